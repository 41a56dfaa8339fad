// Access tokens: HS256 JWTs (RFC 7519) signed with a key shared through the store, so every node
// that uses the same database accepts every other node's tokens. Claims follow what the original
// platform's tokens carried (wire §1): iss, sub (tenant id, "TN..."), scope "api", jti, iat, exp;
// plus `sv`, a fingerprint of the account's secret hash, so a token issued before a secret
// rotation stops working (src/auth/accounts.ts).
//
// Signing and verifying are synchronous HMAC-SHA256 with node:crypto (a few microseconds), not a
// JOSE library: jose verifies through WebCrypto, whose HMAC runs on libuv's small thread pool, the
// same pool that scrypt password hashing occupies, so a flood of bogus logins made every request
// with a not-yet-remembered token wait behind it. The verifier is also stricter than a
// general JOSE library needs to be: exactly HS256, a kid, no `crit`, canonical base64url.
import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { ReefError } from '../core/errors.ts';
import type { SigningKey, Store } from '../store/store.ts';

export interface TokenClaims {
  sub: string;
  jti: string;
  iat: number;
  exp: number;
  /** Fingerprint of the account's secret hash when the token was issued (absent on older tokens). */
  sv?: string;
}

const B64URL = /^[A-Za-z0-9_-]*$/;

function b64json(o: unknown): string {
  return Buffer.from(JSON.stringify(o)).toString('base64url');
}

function parseSegment(seg: string): Record<string, unknown> {
  if (!B64URL.test(seg)) throw new ReefError('TOKEN_INVALID', 'the access token is not a well-formed JWT');
  try {
    const v: unknown = JSON.parse(Buffer.from(seg, 'base64url').toString('utf8'));
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // falls through to the error below
  }
  throw new ReefError('TOKEN_INVALID', 'the access token is not a well-formed JWT');
}

export interface IssuedToken {
  accessToken: string;
  tokenType: 'Bearer';
  expiresIn: number;
}

export class TokenService {
  private keys = new Map<string, Buffer>();
  private current!: SigningKey;
  private lastRefresh = 0;
  /**
   * Tokens whose signature already verified, with their claims: a token that verified once stays
   * valid until its exp (checked on every hit), so the answer can be remembered.
   */
  private verified = new Map<string, { claims: TokenClaims; kid: string }>();
  private static readonly VERIFIED_MAX = 10_000;

  constructor(
    private readonly store: Store,
    private readonly opts: { ttlSeconds: number; issuer: string; secret: string | null },
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Loads the signing keys. With REEF_TOKEN_SECRET the key is the configured one (kid derived from
   * it); otherwise the newest stored key is used, and one is generated and stored on first start.
   */
  async init(): Promise<void> {
    if (this.opts.secret) {
      const kid = 'cfg-' + createHash('sha256').update(this.opts.secret).digest('hex').slice(0, 16);
      this.current = { kid, secret: this.opts.secret, createdAt: 0 };
      this.keys.set(kid, Buffer.from(this.opts.secret));
    }
    await this.refresh();
    if (!this.current) {
      // A fixed kid for the first key: nodes starting together on one database all try to add it,
      // one insert wins (the others are no-ops) and every node reads back and signs with that key.
      await this.store.addSigningKey({ kid: 'initial', secret: randomBytes(32).toString('base64url'), createdAt: Date.now() });
      await this.refresh();
    }
  }

  /** Re-reads stored keys: picks up a rotation done by another node. */
  async refresh(): Promise<void> {
    const stored = await this.store.listSigningKeys();
    // Rebuilt, not added to: a key retired by rotation (deleted from the store) stops verifying.
    const keys = new Map<string, Buffer>();
    if (this.opts.secret && this.current) keys.set(this.current.kid, Buffer.from(this.opts.secret));
    for (const k of stored) keys.set(k.kid, Buffer.from(k.secret));
    this.keys = keys;
    if (!this.opts.secret && stored.length) this.current = stored[stored.length - 1]!;
    this.lastRefresh = this.now();
  }

  /** Adds a new signing key; tokens signed with older keys stay valid until they expire. */
  async rotate(): Promise<string> {
    const k = { kid: randomUUID(), secret: randomBytes(32).toString('base64url'), createdAt: Date.now() };
    await this.store.addSigningKey(k);
    await this.refresh();
    return k.kid;
  }

  /** A token for the tenant; `sv` is the fingerprint of its current secret hash (src/auth/accounts.ts). */
  async issue(tenantId: string, sv?: string): Promise<IssuedToken> {
    // Sign with the newest key even when another node rotated it in (src/jobs/upkeep.ts KEY_REFRESH_MS).
    if (this.now() - this.lastRefresh > 60_000) await this.refresh();
    const now = Math.floor(this.now() / 1000);
    const key = this.keys.get(this.current.kid)!;
    const head = b64json({ alg: 'HS256', typ: 'JWT', kid: this.current.kid });
    const body = b64json({ scope: 'api', iss: this.opts.issuer, sub: tenantId, jti: randomUUID(), iat: now, exp: now + this.opts.ttlSeconds, ...(sv ? { sv } : {}) });
    const sig = createHmac('sha256', key).update(`${head}.${body}`).digest('base64url');
    return { accessToken: `${head}.${body}.${sig}`, tokenType: 'Bearer', expiresIn: this.opts.ttlSeconds };
  }

  /** Verifies signature, issuer and expiry; every failure is a 401-family ReefError. */
  async verify(token: string): Promise<TokenClaims> {
    const hit = this.verified.get(token);
    // A retired signing key (deleted from the store) takes its remembered tokens with it.
    if (hit && this.keys.has(hit.kid)) {
      if (hit.claims.exp * 1000 > this.now()) return hit.claims;
      this.verified.delete(token);
      throw new ReefError('TOKEN_EXPIRED', 'the access token has expired; request a new one');
    }
    if (hit) this.verified.delete(token);
    const kid = this.kidOf(token);
    // A key rotated in by another node: look once more, at most every few seconds.
    if (!this.keys.has(kid) && this.now() - this.lastRefresh > 2000) await this.refresh();
    const { claims } = this.verifySignature(token);
    if (this.verified.size >= TokenService.VERIFIED_MAX) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(token, { claims, kid });
    return claims;
  }

  private kidOf(token: string): string {
    const dot = token.indexOf('.');
    const kid = parseSegment(dot < 0 ? token : token.slice(0, dot)).kid;
    if (typeof kid !== 'string') throw new ReefError('TOKEN_INVALID', 'the access token names no signing key');
    return kid;
  }

  /** Synchronous: HMAC-SHA256 over `header.payload`, compared in constant time, then the claims. */
  private verifySignature(token: string): { claims: TokenClaims } {
    const parts = token.split('.');
    if (parts.length !== 3) throw new ReefError('TOKEN_INVALID', 'the access token is not a well-formed JWT');
    const [h, p, sig] = parts as [string, string, string];
    const header = parseSegment(h);
    if (header.alg !== 'HS256' || 'crit' in header || (header.typ !== undefined && header.typ !== 'JWT')) {
      throw new ReefError('TOKEN_INVALID', 'the access token signature or claims are invalid');
    }
    const key = typeof header.kid === 'string' ? this.keys.get(header.kid) : undefined;
    if (!key) throw new ReefError('TOKEN_INVALID', 'the access token was not signed by this service');
    const want = createHmac('sha256', key).update(`${h}.${p}`).digest();
    const got = B64URL.test(sig) ? Buffer.from(sig, 'base64url') : Buffer.alloc(0);
    // Only the canonical encoding of the signature is accepted (no trailing bits, no padding).
    if (got.length !== want.length || got.toString('base64url') !== sig || !timingSafeEqual(got, want)) {
      throw new ReefError('TOKEN_INVALID', 'the access token signature or claims are invalid');
    }
    const c = parseSegment(p);
    const now = this.now() / 1000;
    if (c.iss !== this.opts.issuer || typeof c.sub !== 'string' || typeof c.exp !== 'number' || (c.nbf !== undefined && (typeof c.nbf !== 'number' || c.nbf > now))) {
      throw new ReefError('TOKEN_INVALID', 'the access token signature or claims are invalid');
    }
    if (c.exp <= now) throw new ReefError('TOKEN_EXPIRED', 'the access token has expired; request a new one');
    const claims: TokenClaims = { sub: c.sub, jti: String(c.jti ?? ''), iat: typeof c.iat === 'number' ? c.iat : 0, exp: c.exp };
    if (typeof c.sv === 'string') claims.sv = c.sv;
    return { claims };
  }
}
