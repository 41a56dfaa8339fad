// Connections to the HTTP port need no account: silent ones used to pile up until the process ran
// out of file descriptors. Each source address holds a bounded number, the listener a bounded
// number in all (silent ones give way to clients that talk), and silent ones are closed after the
// headers timeout. Sources are loopback addresses (127.0.0.0/8), so "address" is real.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

/** Sockets the server has closed (or reset). */
const closed = new WeakSet<net.Socket>();

/** A TCP connection from `from` that has connected and sent nothing. */
function silent(server: TestServer, from: string): Promise<net.Socket> {
  const u = new URL(server.url);
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: u.hostname, port: Number(u.port), localAddress: from }, () => resolve(s));
    s.on('error', reject);
    s.on('close', () => closed.add(s));
    // Read whatever comes (a 408, the close): a paused socket never sees its end.
    s.resume();
  });
}

/**
 * Sends `GET path` on a socket (a new one from `from`, or the one given, kept alive) and gives the
 * status line's code, or 'closed' when the server closed the connection without answering.
 */
function get(server: TestServer, from: string | net.Socket, path: string): Promise<number | 'closed'> {
  const u = new URL(server.url);
  return new Promise((resolve) => {
    const s = typeof from === 'string' ? net.connect({ host: u.hostname, port: Number(u.port), localAddress: from }) : from;
    let got = '';
    const onData = (d: Buffer) => {
      got += d.toString('latin1');
      const end = got.indexOf('\r\n\r\n');
      const len = /content-length: (\d+)/i.exec(got);
      if (end > 0 && len && got.length >= end + 4 + Number(len[1])) {
        s.off('data', onData);
        if (typeof from === 'string') s.end();
        resolve(Number(got.split(' ')[1]));
      }
    };
    s.on('data', onData);
    s.on('error', () => {});
    s.on('close', () => resolve('closed'));
    s.write(`GET ${path} HTTP/1.1\r\nHost: reef\r\n\r\n`);
  });
}

describe('HTTP connection limits', () => {
  let server: TestServer;
  const sockets: net.Socket[] = [];
  before(async () => {
    server = await startTestServer({ http: { maxConnectionsPerAddress: 20, maxConnections: 50, headersTimeoutMs: 60_000 } });
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await server.close();
  });

  it('one address holds at most 20: the 21st is closed unanswered; other addresses, /healthz and logins are served; its kept-alive connection keeps working', async () => {
    const talking = new net.Socket();
    const u = new URL(server.url);
    await new Promise<void>((r) => talking.connect({ host: u.hostname, port: Number(u.port), localAddress: '127.0.0.2' }, r));
    sockets.push(talking);
    assert.equal(await get(server, talking, '/healthz'), 200);
    for (let i = 0; i < 19; i++) sockets.push(await silent(server, '127.0.0.2'));
    await waitFor('20 connections from 127.0.0.2 counted', () => server.app.connections.open >= 20);
    assert.equal(await get(server, '127.0.0.2', '/healthz'), 'closed', 'the 21st connection from the address is closed');
    assert.ok(server.app.connections.refused >= 1);
    assert.equal(await get(server, talking, '/healthz'), 200, 'a connection the address already had keeps working');
    assert.equal(await get(server, '127.0.0.3', '/healthz'), 200, 'another address is served');
    const owner = await server.account('owner');
    const login = await fetch(`${server.url}/api/tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ clientId: owner.clientId, clientSecret: owner.clientSecret }),
    });
    assert.equal(login.status, 201, 'a login from another address is served');
    // Once the address closes its connections, it connects again.
    for (const s of sockets.splice(0)) s.destroy();
    await waitFor('the connections closed', () => server.app.connections.open === 0);
    assert.equal(await get(server, '127.0.0.2', '/healthz'), 200);
    await waitFor('the connections closed', () => server.app.connections.open === 0);
  });

  it('at the listener cap, the oldest silent connection gives way to a new one; connections that have talked are kept', async () => {
    const u = new URL(server.url);
    const talking = new net.Socket();
    await new Promise<void>((r) => talking.connect({ host: u.hostname, port: Number(u.port), localAddress: '127.0.0.10' }, r));
    sockets.push(talking);
    assert.equal(await get(server, talking, '/healthz'), 200);
    // 49 silent connections from three addresses, each under its own cap: the listener is full.
    for (const [from, n] of [
      ['127.0.0.6', 20],
      ['127.0.0.7', 20],
      ['127.0.0.8', 9],
    ] as const) {
      for (let i = 0; i < n; i++) sockets.push(await silent(server, from));
    }
    await waitFor('50 connections counted', () => server.app.connections.open >= 50);
    const shedBefore = server.app.connections.shed;
    const oldest = sockets[1]!;
    for (let i = 0; i < 5; i++) assert.equal(await get(server, '127.0.0.9', '/healthz'), 200, 'a new client is served at the cap');
    await waitFor('the oldest silent connection closed', () => closed.has(oldest));
    assert.ok(!closed.has(sockets[sockets.length - 1]!), 'the newest silent connection is still open');
    assert.ok(server.app.connections.shed > shedBefore, 'silent connections were closed to make room');
    assert.ok(server.app.connections.open <= 50, `never more than the cap open (${server.app.connections.open})`);
    assert.equal(await get(server, talking, '/healthz'), 200, 'the connection that had talked is kept');
    for (const s of sockets.splice(0)) s.destroy();
    await waitFor('the connections closed', () => server.app.connections.open === 0);
  });
});

describe('silent connections', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ http: { headersTimeoutMs: 1000 } });
  });
  after(() => server.close());

  it('a connection that sends no complete request within the headers timeout gets 408 with the uniform body and is closed', async () => {
    const s = await silent(server, '127.0.0.11');
    let got = '';
    s.on('data', (d) => (got += d));
    s.write('GET /healthz HTTP/1.1\r\nHost: re');
    await new Promise<void>((r) => s.once('close', () => r()));
    assert.match(got, /^HTTP\/1\.1 408 /);
    const body = JSON.parse(got.slice(got.indexOf('\r\n\r\n') + 4));
    assert.equal(body.code, 'REQUEST_TIMEOUT');
    assert.equal(body.statusCode, 408);
    await waitFor('the connection released', () => server.app.connections.open === 0);
  });

  it('a connection that sends nothing at all is closed too', async () => {
    const s = await silent(server, '127.0.0.12');
    await new Promise<void>((r) => s.once('close', () => r()));
    await waitFor('the connection released', () => server.app.connections.open === 0);
  });
});

describe('silent connections to HTTPS', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ tls: { cert: null, key: null, selfSigned: true }, http: { headersTimeoutMs: 1000, maxConnectionsPerAddress: 3 } });
  });
  after(() => server.close());

  it('a connection that never starts its TLS handshake is dropped, and counts against its address meanwhile', async () => {
    assert.match(server.url, /^https:/);
    const held = await Promise.all([silent(server, '127.0.0.13'), silent(server, '127.0.0.13'), silent(server, '127.0.0.13')]);
    await waitFor('3 connections counted', () => server.app.connections.open === 3);
    const fourth = await silent(server, '127.0.0.13');
    await waitFor('the 4th closed at once', () => closed.has(fourth));
    await waitFor('the silent ones dropped by the handshake timeout', () => held.every((s) => closed.has(s)));
    await waitFor('the connections released', () => server.app.connections.open === 0);
  });
});
