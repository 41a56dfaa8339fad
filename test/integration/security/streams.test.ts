// Live event streams are bounded (per account, per node, per connection's
// unsent bytes) and do not outlive the authority they were opened with.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { rotateSecret, setDisabled } from '../../../src/auth/accounts.ts';
import { parseSse, type SseMessage } from '../../../src/sdk/sse.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';
import { assertClean, tally } from './tally.ts';

const T0 = Date.UTC(2026, 5, 1);

async function newDevice(server: TestServer, token: string): Promise<string> {
  const r = await server.request('POST', '/api/solutions/StudioSimulation/devices', { token, body: { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 1, longitude: 2 } } } });
  assert.equal(r.status, 201);
  return ((await r.json()) as { id: string }).id;
}

function batch(n: number, start: number) {
  return { observations: Array.from({ length: n }, (_, i) => ({ timestamp: new Date(start + i * 1000).toISOString(), temperature: 20 + (i % 100) / 10, note: 'x'.repeat(40) })) };
}

/** Opens the solution's event stream with fetch; yields its messages. */
async function open(server: TestServer, token: string): Promise<{ status: number; messages: AsyncGenerator<SseMessage>; body: Record<string, unknown> | null; close(): void }> {
  const ctrl = new AbortController();
  const r = await fetch(`${server.url}/api/solutions/StudioSimulation/events`, { headers: { authorization: token, accept: 'text/event-stream' }, signal: ctrl.signal });
  if (r.status !== 200) return { status: r.status, messages: (async function* () {})(), body: (await r.json()) as Record<string, unknown>, close: () => ctrl.abort() };
  return { status: 200, messages: parseSse(r.body!), body: null, close: () => ctrl.abort() };
}

/** A stream whose reader never reads: a raw socket, paused. */
function stalled(server: TestServer, token: string): Promise<net.Socket> {
  const u = new URL(server.url);
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: u.hostname, port: Number(u.port) }, () => {
      s.write(`GET /api/solutions/StudioSimulation/events HTTP/1.1\r\nHost: x\r\nAuthorization: ${token}\r\nAccept: text/event-stream\r\n\r\n`);
      s.once('data', () => {
        s.pause();
        resolve(s);
      });
    });
    s.on('error', reject);
  });
}

/** The shared waitFor (test/helpers/wait.ts), for the stream counters. */
const until = (cond: () => boolean) => waitFor('the stream counters', cond);

describe('event stream limits', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ streams: { maxPerAccount: 40, maxPerNode: 60, maxBufferedBytes: 64 * 1024 } });
  });
  after(() => server.close());

  it('an account holds at most its cap of streams; one more is 429 TOO_MANY_STREAMS, and a closed one frees its slot', async () => {
    const probe = tally('stream flood');
    const { token, tenantId } = await server.login('flooder');
    const streams = [];
    for (let i = 0; i < 40; i++) streams.push(await open(server, token));
    for (const s of streams) probe.status(s.status, 200, 'within the cap');
    for (let i = 0; i < 10; i++) {
      const extra = await open(server, token);
      probe.status(extra.status, 429, 'past the cap');
      assert.equal(extra.body?.code, 'TOO_MANY_STREAMS');
      assert.ok(typeof extra.body?.requestId === 'string', 'the uniform error body');
    }
    // Another account is not affected by this one's streams (the node cap is 60).
    const other = await server.login('bystander');
    const theirs = await open(server, other.token);
    probe.status(theirs.status, 200, "another account's stream");
    theirs.close();
    streams.pop()!.close();
    await until(() => server.app.streams.countFor(tenantId) === 39);
    const again = await open(server, token);
    probe.status(again.status, 200, 'after one closed');
    again.close();
    for (const s of streams) s.close();
    await until(() => server.app.streams.size === 0);
    assertClean(probe);
  });

  it('readers that stop reading are disconnected, not buffered for; a reader that reads gets every event', async () => {
    const { token } = await server.login('slow');
    const id = await newDevice(server, token);
    const sockets = await Promise.all(Array.from({ length: 30 }, () => stalled(server, token)));
    const reader = await open(server, token);
    const got: number[] = [];
    const reading = (async () => {
      for await (const m of reader.messages) {
        if (m.event === 'observations') got.push((JSON.parse(m.data) as { observations: unknown[] }).observations.length);
        if (got.length === 5) return;
      }
    })();
    for (let k = 0; k < 5; k++) {
      const r = await server.request('POST', `/api/solutions/StudioSimulation/devices/${id}/observations`, { token, body: batch(10_000, T0 + k * 10_000_000) });
      assert.equal(r.status, 201, 'uploads are not held up by stalled readers');
    }
    await reading;
    assert.deepEqual(got, [10_000, 10_000, 10_000, 10_000, 10_000]);
    assert.equal(server.app.streams.slowDisconnects, 30, 'every stalled reader was cut');
    await until(() => server.app.streams.size === 1);
    reader.close();
    for (const s of sockets) s.destroy();
  });
});

describe('streams end when their authority does', () => {
  let server: TestServer;
  let clock = Date.now();
  before(async () => {
    server = await startTestServer({ tokens: { ttlSeconds: 600, secret: null, issuer: 'reef' } }, [], { now: () => clock });
  });
  after(() => server.close());

  async function endOf(s: Awaited<ReturnType<typeof open>>): Promise<{ reason: string; code?: string }> {
    for await (const m of s.messages) if (m.event === 'end') return JSON.parse(m.data) as { reason: string; code?: string };
    throw new Error('the stream closed without an end event');
  }

  it('token expiry ends the stream with TOKEN_EXPIRED', async () => {
    const { token } = await server.login('expiring');
    const s = await open(server, token);
    assert.equal(s.status, 200);
    clock += 601_000;
    assert.equal((await endOf(s)).code, 'TOKEN_EXPIRED');
    clock = Date.now();
  });

  it('disabling the account ends its streams with ACCOUNT_DISABLED', async () => {
    const c = await server.login('disabled');
    const s = await open(server, c.token);
    await setDisabled(server.services.store, c.tenantId, true);
    clock += 2000; // past the one-second account cache
    assert.equal((await endOf(s)).code, 'ACCOUNT_DISABLED');
  });

  it('rotating the secret ends streams opened with older tokens', async () => {
    const c = await server.login('rotating');
    const s = await open(server, c.token);
    await rotateSecret(server.services.store, c.tenantId);
    clock += 2000;
    const end = await endOf(s);
    assert.equal(end.code, 'TOKEN_INVALID');
    assert.match(end.reason, /rotated/);
  });

  it('?access_token is accepted by streams only', async () => {
    const { token } = await server.login('query-token');
    const list = await fetch(`${server.url}/api/solutions/sandbox/devices?access_token=${encodeURIComponent(token)}`);
    assert.equal(list.status, 401);
    assert.equal(((await list.json()) as { code: string }).code, 'TOKEN_MISSING');
    const ctrl = new AbortController();
    const stream = await fetch(`${server.url}/api/solutions/sandbox/events?access_token=${encodeURIComponent(token)}`, { signal: ctrl.signal });
    assert.equal(stream.status, 200);
    ctrl.abort();
  });
});
