// Forged tokens: JWTs an attacker can make without the signing key — and a few made
// with it but wrong in another way — are all refused 401 with the uniform body, on a plain route
// and on a stream, and none reaches the victim's data.
import assert from 'node:assert/strict';
import { createHmac, generateKeyPairSync, sign as rsaSign } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { assertClean, tally } from './tally.ts';

const b64 = (o: unknown) => Buffer.from(typeof o === 'string' ? o : JSON.stringify(o)).toString('base64url');

describe('forged tokens', () => {
  let s: TestServer;
  let victim: { tenantId: string; token: string };
  before(async () => {
    s = await startTestServer();
    victim = await s.login('victim');
  });
  after(() => s.close());

  it('every forgery is 401 on a route and on a stream', async () => {
    const probe = tally('forged tokens');
    const [h, p, sig] = victim.token.split('.') as [string, string, string];
    const header = JSON.parse(Buffer.from(h, 'base64url').toString()) as { kid: string };
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
    const key = (await s.services.store.listSigningKeys()).find((k) => k.kid === header.kid)!.secret;
    const now = Math.floor(Date.now() / 1000);
    const hs = (alg: string, head: object, body: object, k = key) => {
      const input = `${b64(head)}.${b64(body)}`;
      const algo = alg === 'HS512' ? 'sha512' : alg === 'HS384' ? 'sha384' : 'sha256';
      return `${input}.${createHmac(algo, k).update(input).digest('base64url')}`;
    };
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const rs = (head: object, body: object) => {
      const input = `${b64(head)}.${b64(body)}`;
      return `${input}.${rsaSign('sha256', Buffer.from(input), privateKey).toString('base64url')}`;
    };
    const jwk = publicKey.export({ format: 'jwk' });
    const other = { ...claims, sub: 'TN00000000000000000000' };
    const forged: [string, string][] = [
      ['alg none', `${b64({ alg: 'none', kid: header.kid })}.${p}.`],
      ['alg None', `${b64({ alg: 'None', kid: header.kid })}.${p}.`],
      ['alg NONE with signature', `${b64({ alg: 'NONE', kid: header.kid })}.${p}.${sig}`],
      ['alg none, no kid', `${b64({ alg: 'none' })}.${b64(other)}.`],
      ['HS512 with the real key', hs('HS512', { alg: 'HS512', kid: header.kid }, claims)],
      ['HS384 with the real key', hs('HS384', { alg: 'HS384', kid: header.kid }, claims)],
      ['RS256 with an embedded jwk', rs({ alg: 'RS256', kid: header.kid, jwk }, claims)],
      ['RS256, key confusion', rs({ alg: 'RS256', kid: header.kid }, claims)],
      ['HS256 with a guessed key', hs('HS256', { alg: 'HS256', kid: header.kid }, claims, 'secret')],
      ['HS256 with an empty key', hs('HS256', { alg: 'HS256', kid: header.kid }, claims, '')],
      ['HS256 keyed with the kid', hs('HS256', { alg: 'HS256', kid: header.kid }, claims, header.kid)],
      ['sub changed, old signature', `${h}.${b64(other)}.${sig}`],
      ['exp extended, old signature', `${h}.${b64({ ...claims, exp: now + 10 * 365 * 86400 })}.${sig}`],
      ['kid unknown', hs('HS256', { alg: 'HS256', kid: 'nope' }, claims)],
      ['kid path traversal', hs('HS256', { alg: 'HS256', kid: '../../etc/passwd' }, claims, '')],
      ['kid SQL', hs('HS256', { alg: 'HS256', kid: "x' OR '1'='1" }, claims, '')],
      ['kid not a string', hs('HS256', { alg: 'HS256', kid: { $ne: null } }, claims, '')],
      ['no kid', hs('HS256', { alg: 'HS256' }, claims, '')],
      ['crit header', hs('HS256', { alg: 'HS256', kid: header.kid, crit: ['exp'] }, claims)],
      ['typ JWE', hs('HS256', { alg: 'HS256', kid: header.kid, typ: 'JWE' }, claims)],
      ['expired, real key', hs('HS256', { alg: 'HS256', kid: header.kid }, { ...claims, exp: now - 10 })],
      ['not yet valid, real key', hs('HS256', { alg: 'HS256', kid: header.kid }, { ...claims, nbf: now + 3600 })],
      ['wrong issuer, real key', hs('HS256', { alg: 'HS256', kid: header.kid }, { ...claims, iss: 'someone-else' })],
      ['no exp, real key', hs('HS256', { alg: 'HS256', kid: header.kid }, { ...claims, exp: undefined })],
      ['exp a string, real key', hs('HS256', { alg: 'HS256', kid: header.kid }, { ...claims, exp: String(now + 3600) })],
      ['sub not a string, real key', hs('HS256', { alg: 'HS256', kid: header.kid }, { ...claims, sub: 7 })],
      ['stale secret version, real key', hs('HS256', { alg: 'HS256', kid: header.kid }, { ...claims, sv: 'not-the-one' })],
      ['signature with padding', `${h}.${p}.${sig}=`],
      ['signature with trailing bits', `${h}.${p}.${sig.slice(0, -1)}${sig.endsWith('A') ? 'B' : 'A'}`],
      ['signature base64 not url', `${h}.${p}.${Buffer.from(sig, 'base64url').toString('base64')}`],
      ['four segments', `${victim.token}.x`],
      ['two segments', `${h}.${p}`],
      ['header not JSON', `${b64('not json')}.${p}.${sig}`],
      ['header an array', `${b64([1])}.${p}.${sig}`],
      [
        'payload an array, real key',
        (() => {
          const input = `${b64({ alg: 'HS256', kid: header.kid })}.${b64([claims])}`;
          return `${input}.${createHmac('sha256', key).update(input).digest('base64url')}`;
        })(),
      ],
      ['unicode', '\u202e' + victim.token],
      ['10 KB', 'a'.repeat(10_000)],
    ];
    for (const [what, token] of forged) {
      for (const [url, stream] of [
        [`/api/solutions/sandbox/devices`, false],
        [`/api/solutions/sandbox/events`, true],
      ] as const) {
        let r: Response;
        try {
          r = await s.request('GET', url, { token });
        } catch {
          // A header fetch refuses to send (non-ASCII) never reached the server: nothing to count.
          continue;
        }
        const body = stream && r.status === 200 ? null : ((await r.json()) as { code?: string; requestId?: string });
        if (r.status === 200) await r.body?.cancel();
        probe.status(r.status, 401, `${what} on ${url}`);
        if (body) assert.ok(body.code?.startsWith('TOKEN_') && body.requestId, `${what}: uniform 401 body (${JSON.stringify(body)})`);
      }
    }
    // The genuine token still works: the refusals above are not a lock-out.
    assert.equal((await s.request('GET', '/api/solutions/sandbox/devices', { token: victim.token })).status, 200);
    assertClean(probe);
    assert.ok(probe.tried >= 66);
  });
});
