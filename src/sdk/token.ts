// Access tokens for the SDK: a fixed token, or one fetched with client credentials on first use and
// renewed shortly before it expires. However many calls wait, one renewal runs at a time.

export interface Credentials {
  clientId: string;
  clientSecret: string;
}

export interface TokenInfo {
  token: string;
  /** Local clock time (ms) after which the token is treated as expired; Infinity when unknown. */
  expiresAt: number;
  /** Local clock time (ms) from which the next call renews first. */
  renewAt: number;
}

/** Claims of a JWT's middle part, decoded the way the original clients read `exp` (wire §1). */
export function decodeJwtClaims(token: string): Record<string, unknown> | null {
  const parts = token.split('.');
  if (parts.length !== 3) return null;
  try {
    let b64 = parts[1]!.replace(/-/g, '+').replace(/_/g, '/');
    while (b64.length % 4) b64 += '=';
    // atob exists in browsers and in Node ≥ 16; no Buffer, so the SDK stays browser-safe.
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const claims = JSON.parse(new TextDecoder().decode(bytes)) as unknown;
    return claims && typeof claims === 'object' && !Array.isArray(claims) ? (claims as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * When to treat a token as expired and when to renew it, in local clock time.
 *
 * The lifetime is `exp - iat` from the token, laid onto the local clock from the moment the token
 * request was sent, so a client whose clock is off still renews in time. `iat` is whole seconds, so
 * the token may be up to a second older than it looks: one second is taken off. Renewal starts when
 * less than max(5 s, 10 % of the lifetime) remains, but never before half the lifetime has passed,
 * so a very short-lived token is still used for something.
 */
export function tokenTimes(token: string, requestedAt: number, expiresIn?: number): { expiresAt: number; renewAt: number } {
  const c = decodeJwtClaims(token);
  const exp = typeof c?.exp === 'number' ? c.exp : undefined;
  const iat = typeof c?.iat === 'number' ? c.iat : undefined;
  let lifetimeMs: number;
  if (exp !== undefined && iat !== undefined && exp > iat) lifetimeMs = (exp - iat) * 1000;
  else if (typeof expiresIn === 'number' && expiresIn > 0) lifetimeMs = expiresIn * 1000;
  else if (exp !== undefined) lifetimeMs = exp * 1000 - requestedAt;
  else return { expiresAt: Infinity, renewAt: Infinity };
  const usable = lifetimeMs > 2000 ? lifetimeMs - 1000 : lifetimeMs / 2;
  const expiresAt = requestedAt + usable;
  const margin = Math.min(Math.max(5000, lifetimeMs * 0.1), usable / 2);
  return { expiresAt, renewAt: expiresAt - margin };
}

/** Hands out a valid token; `fetchToken` performs the token call (POST /api/tokens). */
export class TokenManager {
  private current: TokenInfo | null = null;
  private renewing: Promise<TokenInfo> | null = null;
  /** How many token calls were made: the CLI and tests read it. */
  renewals = 0;

  constructor(
    private readonly fetchToken: (() => Promise<{ accessToken: string; expiresIn?: number }>) | null,
    fixed: string | null,
    private readonly now: () => number = Date.now,
  ) {
    if (fixed) this.current = { token: fixed, ...tokenTimes(fixed, now()) };
  }

  /** True when the manager can fetch a new token itself (credentials were given). */
  get canRenew(): boolean {
    return this.fetchToken !== null;
  }

  /** A token good for the next call, renewing first when it is due. */
  async get(): Promise<string> {
    const c = this.current;
    if (c && (this.now() < c.renewAt || !this.fetchToken)) return c.token;
    try {
      return (await this.renew()).token;
    } catch (e) {
      // Renewal is early on purpose: while the old token is still good, a failed renewal (service
      // briefly unreachable) does not fail the call; the next call tries again.
      if (c && this.current === c && this.now() < c.expiresAt) return c.token;
      throw e;
    }
  }

  /**
   * Called after a 401 for `rejected`: renews unless another call already replaced that token, so
   * 50 calls failing with the same expired token cause one renewal, not 50.
   */
  async invalidate(rejected: string): Promise<string | null> {
    if (!this.fetchToken) return null;
    if (this.current && this.current.token !== rejected && this.now() < this.current.renewAt) return this.current.token;
    if (this.current?.token === rejected) this.current = null;
    return (await this.renew()).token;
  }

  private renew(): Promise<TokenInfo> {
    if (this.renewing) return this.renewing;
    if (!this.fetchToken) throw new Error('no credentials to renew the token with');
    const fetchToken = this.fetchToken;
    this.renewing = (async () => {
      try {
        const requestedAt = this.now();
        this.renewals++;
        const r = await fetchToken();
        const info = { token: r.accessToken, ...tokenTimes(r.accessToken, requestedAt, r.expiresIn) };
        this.current = info;
        return info;
      } finally {
        this.renewing = null;
      }
    })();
    return this.renewing;
  }
}
