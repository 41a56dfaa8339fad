// Logins (docs/security.md): a flood of bogus logins must not stall other callers, and the login
// throttle must neither lock the owner out nor let parallel guesses through. Requests come from
// different loopback addresses (127.0.0.0/8 is all local on Linux) so "source address" is real.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { loginFrom as login, startTestServer, type TestServer } from '../../helpers/server.ts';
import { assertClean, tally } from './tally.ts';

describe('login throttle', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ loginThrottle: { maxFailures: 5, sourceMaxFailures: 20, windowSeconds: 600 } });
  });
  after(() => server.close());

  it("a stranger who knows the client id cannot lock the owner out: the right secret from the owner's address passes", async () => {
    const owner = await server.account('owner');
    for (let i = 0; i < 8; i++) await login(server, '127.0.0.2', owner.clientId, 'guess-' + i);
    const refused = await login(server, '127.0.0.2', owner.clientId, owner.clientSecret);
    assert.equal(refused.status, 429, 'the guessing address is throttled, even with the right secret');
    assert.equal(refused.body.code, 'RATE_LIMITED');
    assert.ok(Number(refused.retryAfter) >= 1);
    const ok = await login(server, '127.0.0.3', owner.clientId, owner.clientSecret);
    assert.equal(ok.status, 201, 'the owner from a clean address logs in');
  });

  it('parallel guesses count as they start: 100 at once, at most the limit are checked', async () => {
    const victim = await server.account('victim');
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => login(server, '127.0.0.4', victim.clientId, 'parallel-' + i)));
    const checked = answers.filter((a) => a.status === 401).length;
    const throttled = answers.filter((a) => a.status === 429).length;
    assert.equal(checked + throttled, 100, `only 401 and 429: ${answers.map((a) => a.status).join(',')}`);
    assert.ok(checked <= 5, `${checked} guesses were checked; the limit is 5`);
  });

  it('one address trying many client ids is limited too', async () => {
    const answers: number[] = [];
    for (let i = 0; i < 40; i++) answers.push((await login(server, '127.0.0.5', randomUUID(), 'x')).status);
    assert.equal(answers.filter((s) => s === 401).length, 20, 'twenty failures from one address, then 429');
    assert.ok(answers.slice(20).every((s) => s === 429));
    const other = await server.account('elsewhere');
    assert.equal((await login(server, '127.0.0.6', other.clientId, other.clientSecret)).status, 201, 'other addresses are not affected');
  });
});

describe('login flood', () => {
  let server: TestServer;
  before(async () => {
    // One hash at a time and room for 100 waiting: the flood keeps hashing busy for seconds, so the
    // requests below are answered while it is still queued, however slow the machine.
    server = await startTestServer({ loginThrottle: { hashConcurrency: 1, hashQueue: 100 } });
  });
  after(() => server.close());

  it('200 concurrent bogus logins: hashing stays bounded, the excess is shed with 503/429 + Retry-After, a real login and a not-yet-seen token still work', async () => {
    const owner = await server.account('real');
    const probe = tally('login flood');
    const { auth, tokens } = server.services;
    // A token this node has never verified, as after a restart.
    const fresh = (await tokens.issue(owner.tenantId)).accessToken;
    // 200 bogus logins from 50 addresses, each address below its throttle limit.
    const flood = Array.from({ length: 200 }, (_, i) => login(server, `127.0.1.${1 + (i % 50)}`, randomUUID(), 'bogus'));
    // While the flood is being hashed, a request with the unseen token is answered.
    while (auth.hashing.active === 0) await new Promise((r) => setImmediate(r));
    const r = await server.request('GET', '/api/solutions/sandbox/devices', { token: fresh });
    assert.equal(r.status, 200);
    assert.ok(auth.hashing.active > 0, 'the token was verified while hashing was still busy: it did not wait behind it');
    const real = await login(server, '127.0.0.9', owner.clientId, owner.clientSecret);
    assert.equal(real.status, 201, `the real login succeeds during the flood (got ${real.status} ${real.body.code})`);
    for (const a of await Promise.all(flood)) {
      probe.status(a.status, [401, 429, 503], 'bogus login');
      if (a.status === 503 || a.status === 429) assert.ok(Number(a.retryAfter) >= 1, 'shed answers carry Retry-After');
      if (a.status === 503) assert.equal(a.body.code, 'SERVER_BUSY');
    }
    assertClean(probe);
    assert.ok(auth.hashing.peakRunning <= 1, `at most 1 hash ran at once (saw ${auth.hashing.peakRunning})`);
    assert.ok(auth.hashing.shed > 0, 'some of the flood was shed instead of queued');
  });
});
