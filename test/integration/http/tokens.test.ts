// Tokens and authentication (seed §5, wire §1): both token paths, raw and Bearer tokens, and every
// way a token can be wrong answering 401 with the uniform error body.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { rotateSecret, setDisabled } from '../../../src/auth/accounts.ts';
import { testClock } from '../../helpers/clock.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

let server: TestServer;
const clock = testClock();
before(async () => {
  server = await startTestServer({ loginThrottle: { maxFailures: 3, windowSeconds: 60 } }, [], { now: clock.now });
});
after(() => server.close());

function decodePayload(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString());
}

async function expectError(r: Response, status: number, code: string) {
  assert.equal(r.status, status);
  const body = (await r.json()) as Record<string, unknown>;
  assert.equal(body.statusCode, status);
  assert.equal(body.code, code);
  assert.equal(typeof body.message, 'string');
  assert.equal(typeof body.requestId, 'string');
  assert.equal(body.requestId, r.headers.get('x-request-id'));
  assert.ok(!JSON.stringify(body).includes('    at '), 'no stack trace');
  return body;
}

describe('POST /api/tokens and /tokens', () => {
  it('exchanges client id and secret for a signed JWT with the original claims', async () => {
    const c = await server.account('tok');
    for (const p of ['/api/tokens', '/tokens']) {
      const r = await server.request('POST', p, { body: { clientId: c.clientId, clientSecret: c.clientSecret } });
      assert.equal(r.status, 201);
      assert.equal(r.headers.get('cache-control'), 'no-store');
      const body = (await r.json()) as { accessToken: string; tokenType: string; expiresIn: number };
      assert.equal(body.tokenType, 'Bearer');
      assert.equal(body.expiresIn, 3600);
      const claims = decodePayload(body.accessToken);
      assert.equal(claims.sub, c.tenantId);
      assert.match(String(claims.sub), /^TN/);
      assert.equal(claims.scope, 'api');
      assert.equal((claims.exp as number) - (claims.iat as number), 3600);
      assert.equal(typeof claims.jti, 'string');
    }
  });

  it('client ids are lower-case UUIDs and tenant ids start with TN', async () => {
    const c = await server.account('ids');
    assert.match(c.clientId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.match(c.tenantId, /^TN[0-9A-F]+$/);
  });

  it('a wrong secret and an unknown client id are the same 401', async () => {
    const c = await server.account('wrong');
    await expectError(await server.request('POST', '/api/tokens', { body: { clientId: c.clientId, clientSecret: 'nope' } }), 401, 'INVALID_CREDENTIALS');
    await expectError(await server.request('POST', '/api/tokens', { body: { clientId: crypto.randomUUID(), clientSecret: c.clientSecret } }), 401, 'INVALID_CREDENTIALS');
  });

  it('missing fields and wrong types are 400 naming the field', async () => {
    const b = await expectError(await server.request('POST', '/api/tokens', { body: { clientId: 'x' } }), 400, 'VALIDATION_FAILED');
    assert.equal(b.field, 'clientSecret');
    await expectError(await server.request('POST', '/api/tokens', { body: { clientId: 5, clientSecret: {} } }), 400, 'VALIDATION_FAILED');
    await expectError(await server.request('POST', '/api/tokens', { body: '{"clientId":' }), 400, 'MALFORMED_JSON');
    await expectError(await server.request('POST', '/api/tokens', { body: 'clientId=a', headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 415, 'UNSUPPORTED_MEDIA_TYPE');
  });

  it('throttles failed logins per client id from one address with 429 and Retry-After, even for the right secret (test/integration/security/login-flood.test.ts: other addresses pass)', async () => {
    const c = await server.account('throttled');
    const other = await server.account('bystander');
    for (let i = 0; i < 3; i++) await server.request('POST', '/api/tokens', { body: { clientId: c.clientId, clientSecret: 'bad' } });
    const r = await server.request('POST', '/api/tokens', { body: { clientId: c.clientId, clientSecret: c.clientSecret } });
    await expectError(r, 429, 'RATE_LIMITED');
    assert.ok(Number(r.headers.get('retry-after')) >= 1);
    // Another client id is not affected.
    assert.equal((await server.request('POST', '/api/tokens', { body: { clientId: other.clientId, clientSecret: other.clientSecret } })).status, 201);
  });

  it('a disabled account gets no token', async () => {
    const c = await server.account('off');
    await setDisabled(server.services.store, c.tenantId, true);
    await expectError(await server.request('POST', '/api/tokens', { body: { clientId: c.clientId, clientSecret: c.clientSecret } }), 401, 'ACCOUNT_DISABLED');
  });
});

describe('Authorization header', () => {
  it('accepts the raw token (wire §1) and Bearer', async () => {
    const { token } = await server.login('raw');
    assert.equal((await server.request('GET', '/api/solutions/sandbox/devices', { token })).status, 200);
    assert.equal((await server.request('GET', '/api/solutions/sandbox/devices', { token: `Bearer ${token}` })).status, 200);
  });

  it('missing, malformed, forged, expired and foreign tokens are 401, never 500', async () => {
    const { token, tenantId } = await server.login('bad-tokens');
    const url = '/api/solutions/sandbox/devices';
    await expectError(await server.request('GET', url), 401, 'TOKEN_MISSING');
    await expectError(await server.request('GET', url, { token: 'not-a-jwt' }), 401, 'TOKEN_INVALID');
    await expectError(await server.request('GET', url, { token: 'a.b.c' }), 401, 'TOKEN_INVALID');
    await expectError(await server.request('GET', url, { token: 'x'.repeat(10000) }), 401, 'TOKEN_INVALID');
    const [h, p] = token.split('.');
    const tampered = JSON.parse(Buffer.from(p!, 'base64url').toString());
    tampered.sub = 'TNSOMEONEELSE';
    await expectError(await server.request('GET', url, { token: `${h}.${Buffer.from(JSON.stringify(tampered)).toString('base64url')}.${token.split('.')[2]}` }), 401, 'TOKEN_INVALID');
    // Signed with a key that is not ours, under our key id.
    const kid = JSON.parse(Buffer.from(h!, 'base64url').toString()).kid;
    const forged = await new SignJWT({ scope: 'api' })
      .setProtectedHeader({ alg: 'HS256', kid })
      .setIssuer('reef')
      .setSubject(tenantId)
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode('an attacker key that is long enough!!'));
    await expectError(await server.request('GET', url, { token: forged }), 401, 'TOKEN_INVALID');
    // alg "none" is refused.
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', kid })).toString('base64url')}.${p}.`;
    await expectError(await server.request('GET', url, { token: none }), 401, 'TOKEN_INVALID');
  });

  it('an expired token is TOKEN_EXPIRED', async () => {
    const shortClock = testClock();
    const short = await startTestServer({ tokens: { ttlSeconds: 1, secret: null, issuer: 'reef' } }, [], { now: shortClock.now });
    try {
      const { token } = await short.login('exp');
      shortClock.advance(2100);
      await expectError(await short.request('GET', '/api/solutions/sandbox/devices', { token }), 401, 'TOKEN_EXPIRED');
    } finally {
      await short.close();
    }
  });

  it('rotating the secret ends the tokens issued before it', async () => {
    const c = await server.login('rotate-secret');
    const url = '/api/solutions/sandbox/devices';
    assert.equal((await server.request('GET', url, { token: c.token })).status, 200);
    const rotated = await rotateSecret(server.services.store, c.tenantId);
    server.services.auth.forget(c.tenantId);
    const b = await expectError(await server.request('GET', url, { token: c.token }), 401, 'TOKEN_INVALID');
    assert.match(String(b.message), /rotated/);
    const fresh = await server.token(rotated);
    assert.equal((await server.request('GET', url, { token: fresh })).status, 200, 'a token for the new secret works');
  });

  it('disabling an account invalidates its live tokens', async () => {
    const c = await server.login('disable-live');
    assert.equal((await server.request('GET', '/api/solutions/sandbox/devices', { token: c.token })).status, 200);
    await setDisabled(server.services.store, c.tenantId, true);
    clock.advance(1100); // the account cache holds for one second
    await expectError(await server.request('GET', '/api/solutions/sandbox/devices', { token: c.token }), 401, 'ACCOUNT_DISABLED');
  });

  it('rotation keeps old tokens valid; retiring their key ends them, even once remembered', async () => {
    const s = await startTestServer();
    try {
      const c = await s.login('rotate');
      const url = '/api/solutions/sandbox/devices';
      assert.equal((await s.request('GET', url, { token: c.token })).status, 200);
      const oldKid = JSON.parse(Buffer.from(c.token.split('.')[0]!, 'base64url').toString()).kid as string;
      await s.services.tokens.rotate();
      assert.equal((await s.request('GET', url, { token: c.token })).status, 200, 'an older key still verifies');
      const fresh = await s.token(c);
      assert.notEqual(JSON.parse(Buffer.from(fresh.split('.')[0]!, 'base64url').toString()).kid, oldKid, 'new tokens use the new key');
      await s.services.store.deleteSigningKey(oldKid);
      await s.services.tokens.refresh();
      await expectError(await s.request('GET', url, { token: c.token }), 401, 'TOKEN_INVALID');
      assert.equal((await s.request('GET', url, { token: fresh })).status, 200);
    } finally {
      await s.close();
    }
  });

  it('a token survives a restart: the signing key is kept with the data', async () => {
    const dataDir = (await import('../../helpers/server.ts')).tempDir();
    const a = await startTestServer({ dataDir });
    const c = await a.login('persist');
    await a.close();
    const b = await startTestServer({ dataDir });
    try {
      assert.equal((await b.request('GET', '/api/solutions/sandbox/devices', { token: c.token })).status, 200);
    } finally {
      await b.close();
    }
  });
});
