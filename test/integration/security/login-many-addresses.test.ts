// Login floods spread over many source addresses: a real login is checked ahead of the flood's
// waiting checks (it waits only for the hashes already running), and guesses at one client id are
// bounded across addresses while its owner, from an address that has not been guessing, still
// logs in. Requests come from loopback addresses (127.0.0.0/8), so "source address" is real.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { loginFrom as login, startTestServer, type LoginAnswer, type TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

describe('a bogus-login flood from 60 addresses', () => {
  let server: TestServer;
  before(async () => {
    // One hash at a time and room for all of the flood: it stays queued for seconds.
    server = await startTestServer({ loginThrottle: { hashConcurrency: 1, hashQueue: 1000 } });
  });
  after(() => server.close());

  it('a real login is checked before the checks the flood has waiting, not after one from each address', async () => {
    const owner = await server.account('owner');
    const { hashing } = server.services.auth;
    let answered = 0;
    // 240 bogus logins, 4 from each of 60 addresses (under every per-address limit).
    const flood = Array.from({ length: 240 }, (_, i) =>
      login(server, `127.0.2.${1 + (i % 60)}`, randomUUID(), 'bogus').then((a) => {
        answered++;
        return a;
      }),
    );
    await waitFor('the flood queued', () => hashing.waiting >= 200);
    const before = answered;
    const real = await login(server, '127.0.0.20', owner.clientId, owner.clientSecret);
    const during = answered - before;
    assert.equal(real.status, 201, `the real login succeeds (got ${real.status} ${real.body.code})`);
    // With one hash at a time, the real login waits for the one running (and at most one that
    // started as it arrived); served round-robin by address it waited for one from each of 60.
    assert.ok(during <= 2, `${during} flood checks were answered while the real login waited`);
    assert.ok(hashing.waiting > 100, 'the flood was still waiting when the real login was answered');
    for (const a of await Promise.all(flood)) assert.ok([401, 429, 503].includes(a.status), `bogus login: ${a.status}`);
  });
});

describe('guesses at one client id from 40 addresses', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ loginThrottle: { maxFailures: 10, sourceMaxFailures: 50, clientMaxFailures: 20, windowSeconds: 600 } });
  });
  after(() => server.close());

  it('are bounded by the client id budget plus one per address; the owner from a clean address still logs in', async () => {
    const victim = await server.account('victim');
    // 40 addresses, 10 guesses each, in parallel across addresses.
    const answers = (
      await Promise.all(
        Array.from({ length: 40 }, async (_, a) => {
          const out: LoginAnswer[] = [];
          for (let i = 0; i < 10; i++) out.push(await login(server, `127.0.3.${1 + a}`, victim.clientId, `guess-${a}-${i}`));
          return out;
        }),
      )
    ).flat();
    const checked = answers.filter((a) => a.status === 401).length;
    const throttled = answers.filter((a) => a.status === 429);
    assert.equal(checked + throttled.length, 400, `only 401 and 429: ${[...new Set(answers.map((a) => a.status))].join(',')}`);
    assert.ok(checked <= 20 + 40, `${checked} guesses were checked; the budget is 20 plus one per address`);
    for (const a of throttled) {
      assert.equal(a.body.code, 'RATE_LIMITED');
      assert.ok(Number(a.retryAfter) >= 1);
    }
    // A guessing address is refused even with the right secret; the owner elsewhere is not.
    assert.equal((await login(server, '127.0.3.1', victim.clientId, victim.clientSecret)).status, 429);
    const ok = await login(server, '127.0.3.200', victim.clientId, victim.clientSecret);
    assert.equal(ok.status, 201, 'the owner from an address that has not been guessing logs in');
    assert.equal((await login(server, '127.0.3.200', victim.clientId, victim.clientSecret)).status, 201, 'and again');
  });
});
