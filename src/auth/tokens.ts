// Access tokens: HS256 JWTs (RFC 7519) signed with a key shared through the store, so every node
// that uses the same database accepts every other node's tokens. Claims follow what the original
// platform's tokens carried (wire §1): iss, sub (tenant id, "TN..."), scope "api", jti, iat, exp.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { SignJWT, jwtVerify, errors as joseErrors, decodeProtectedHeader } from 'jose';
import { ReefError } from '../core/errors.ts';
import type { SigningKey, Store } from '../store/store.ts';

export interface TokenClaims {
  sub: string;
  jti: string;
  iat: number;
  exp: number;
}

export interface IssuedToken {
  accessToken: string;
  tokenType: 'Bearer';
  expiresIn: number;
}

export class TokenService {
  private keys = new Map<string, Uint8Array>();
  private current!: SigningKey;
  private lastRefresh = 0;
  /**
   * Tokens whose signature already verified, with their claims. jose verifies through WebCrypto at
   * a few hundred microseconds a call, more than the rest of a small request; a token that verified
   * once stays valid until its exp (checked on every hit), so the answer can be remembered.
   */
  private verified = new Map<string, { claims: TokenClaims; kid: string }>();
  private static readonly VERIFIED_MAX = 10_000;

  constructor(
    private readonly store: Store,
    private readonly opts: { ttlSeconds: number; issuer: string; secret: string | null },
  ) {}

  /**
   * Loads the signing keys. With REEF_TOKEN_SECRET the key is the configured one (kid derived from
   * it); otherwise the newest stored key is used, and one is generated and stored on first start.
   */
  async init(): Promise<void> {
    if (this.opts.secret) {
      const kid = 'cfg-' + createHash('sha256').update(this.opts.secret).digest('hex').slice(0, 16);
      this.current = { kid, secret: this.opts.secret, createdAt: 0 };
      this.keys.set(kid, new TextEncoder().encode(this.opts.secret));
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
    const keys = new Map<string, Uint8Array>();
    if (this.opts.secret && this.current) keys.set(this.current.kid, new TextEncoder().encode(this.opts.secret));
    for (const k of stored) keys.set(k.kid, new TextEncoder().encode(k.secret));
    this.keys = keys;
    if (!this.opts.secret && stored.length) this.current = stored[stored.length - 1]!;
    this.lastRefresh = Date.now();
  }

  /** Adds a new signing key; tokens signed with older keys stay valid until they expire. */
  async rotate(): Promise<string> {
    const k = { kid: randomUUID(), secret: randomBytes(32).toString('base64url'), createdAt: Date.now() };
    await this.store.addSigningKey(k);
    await this.refresh();
    return k.kid;
  }

  async issue(tenantId: string): Promise<IssuedToken> {
    // Sign with the newest key even when another node rotated it in (src/jobs/upkeep.ts KEY_REFRESH_MS).
    if (Date.now() - this.lastRefresh > 60_000) await this.refresh();
    const now = Math.floor(Date.now() / 1000);
    const key = this.keys.get(this.current.kid)!;
    const accessToken = await new SignJWT({ scope: 'api' })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: this.current.kid })
      .setIssuer(this.opts.issuer)
      .setSubject(tenantId)
      .setJti(randomUUID())
      .setIssuedAt(now)
      .setExpirationTime(now + this.opts.ttlSeconds)
      .sign(key);
    return { accessToken, tokenType: 'Bearer', expiresIn: this.opts.ttlSeconds };
  }

  /** Verifies signature, issuer and expiry; every failure is a 401-family ReefError. */
  async verify(token: string): Promise<TokenClaims> {
    const hit = this.verified.get(token);
    // A retired signing key (deleted from the store) takes its remembered tokens with it.
    if (hit && this.keys.has(hit.kid)) {
      if (hit.claims.exp * 1000 > Date.now()) return hit.claims;
      this.verified.delete(token);
      throw new ReefError('TOKEN_EXPIRED', 'the access token has expired; request a new one');
    }
    if (hit) this.verified.delete(token);
    const { claims, kid } = await this.verifySignature(token);
    if (this.verified.size >= TokenService.VERIFIED_MAX) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(token, { claims, kid });
    return claims;
  }

  private async verifySignature(token: string): Promise<{ claims: TokenClaims; kid: string }> {
    let kid: string | undefined;
    try {
      kid = decodeProtectedHeader(token).kid;
    } catch {
      throw new ReefError('TOKEN_INVALID', 'the access token is not a well-formed JWT');
    }
    if (typeof kid !== 'string') throw new ReefError('TOKEN_INVALID', 'the access token names no signing key');
    let key = this.keys.get(kid);
    // A key rotated in by another node: look once more, at most every few seconds.
    if (!key && Date.now() - this.lastRefresh > 2000) {
      await this.refresh();
      key = this.keys.get(kid);
    }
    if (!key) throw new ReefError('TOKEN_INVALID', 'the access token was not signed by this service');
    try {
      const { payload } = await jwtVerify(token, key, { issuer: this.opts.issuer, algorithms: ['HS256'] });
      if (typeof payload.sub !== 'string' || typeof payload.exp !== 'number') throw new ReefError('TOKEN_INVALID');
      return { claims: { sub: payload.sub, jti: String(payload.jti ?? ''), iat: payload.iat ?? 0, exp: payload.exp }, kid };
    } catch (e) {
      if (e instanceof ReefError) throw e;
      if (e instanceof joseErrors.JWTExpired) throw new ReefError('TOKEN_EXPIRED', 'the access token has expired; request a new one');
      throw new ReefError('TOKEN_INVALID', 'the access token signature or claims are invalid');
    }
  }
}

