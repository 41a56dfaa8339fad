// A body past the size limit is answered 413 with the uniform error body, also to a client that
// writes its whole body before it reads (chunked or with a Content-Length): the server reads the
// rest and throws it away before it closes (RFC 9112 §9.6), instead of resetting the connection.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const MiB = 1024 * 1024;

/** Sends a whole request on a raw socket, reading nothing until every byte is written. */
function writeAllThenRead(server: TestServer, head: string, bodyChunks: number, chunked: boolean): Promise<{ error?: string; status?: number; body?: Record<string, unknown> }> {
  const u = new URL(server.url);
  return new Promise((resolve) => {
    const sock = net.connect(Number(u.port), u.hostname);
    let got = '';
    sock.pause();
    sock.on('data', (d) => (got += d));
    sock.on('error', (e) => resolve({ error: (e as NodeJS.ErrnoException).code ?? e.message }));
    sock.on('end', () => {
      const status = Number(got.split(' ')[1]);
      resolve({ status, body: JSON.parse(got.slice(got.indexOf('\r\n\r\n') + 4)) });
    });
    sock.write(head);
    const piece = Buffer.alloc(64 * 1024, 'a');
    const chunk = chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]) : piece;
    let n = 0;
    const pump = () => {
      while (n < bodyChunks) {
        n++;
        if (!sock.write(chunk)) return void sock.once('drain', pump);
      }
      sock.write(chunked ? '0\r\n\r\n' : '', () => sock.resume());
    };
    pump();
  });
}

describe('bodies past the limit', () => {
  let server: TestServer;
  let token: string;
  before(async () => {
    server = await startTestServer({ http: { bodyLimitBytes: 1 * MiB } });
    token = (await server.login('big')).token;
    const r = await server.request('POST', '/api/solutions/sandbox/devices', { token, body: { id: 'dev-1', deviceType: 't' } });
    assert.equal(r.status, 201);
  });
  after(() => server.close());

  for (const [path, what] of [
    ['/api/solutions/sandbox/devices/dev-1/observations', 'an upload'],
    ['/api/tokens', 'a login'],
    ['/api/solutions/sandbox/devices', 'a device'],
  ] as const) {
    it(`a 5 MiB chunked body to ${what}, written in full before reading: 413 PAYLOAD_TOO_LARGE with the uniform body`, async () => {
      const head = `POST ${path} HTTP/1.1\r\nHost: reef\r\nAuthorization: ${token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`;
      const r = await writeAllThenRead(server, head, 80, true);
      assert.equal(r.error, undefined, `the connection was not reset (${r.error})`);
      assert.equal(r.status, 413);
      assert.equal(r.body?.code, 'PAYLOAD_TOO_LARGE');
      assert.equal(r.body?.statusCode, 413);
      assert.equal(typeof r.body?.requestId, 'string');
    });
  }

  it('a 5 MiB body with its Content-Length, written in full before reading: 413 with the uniform body', async () => {
    const head = `POST /api/solutions/sandbox/devices/dev-1/observations HTTP/1.1\r\nHost: reef\r\nAuthorization: ${token}\r\nContent-Type: application/json\r\nContent-Length: ${80 * 64 * 1024}\r\n\r\n`;
    const r = await writeAllThenRead(server, head, 80, false);
    assert.equal(r.error, undefined, `the connection was not reset (${r.error})`);
    assert.equal(r.status, 413);
    assert.equal(r.body?.code, 'PAYLOAD_TOO_LARGE');
  });

  it('the service answers normally afterwards', async () => {
    const r = await server.request('GET', '/api/solutions/sandbox/devices', { token });
    assert.equal(r.status, 200);
  });
});
