// Gateway sessions (seed §5, wire §3): `POST /sessions` with the platform access token opens a
// session bound to the client's source address and port; every proxied request from that address
// and port then acts for the token's account. A session lasts `ttlMs` from its opening (default
// 4 h), is closed by `DELETE /sessions`, and ends when the authority it was opened with ends: the
// account disabled or deleted, or its client secret rotated since the token was issued. That is
// re-checked as event streams re-check it (Authenticator.recheck, whose account cache lasts 1 s):
// every second for every session, and on use whenever the cached account changed, so a session
// ends within about a second, used or idle. At most `maxPerAccount` sessions per account: opening
// one more closes that account's least recently used.
import { isReefError, ReefError } from '../core/errors.ts';
import type { Authenticator, Caller } from '../auth/accounts.ts';
import type { Account } from '../core/types.ts';
import { peerKey, type Peer } from '../coap/index.ts';

export interface Session {
  readonly key: string;
  readonly peer: Peer;
  readonly tenantId: string;
  readonly groupId: string;
  /** exp of the token that opened the session (epoch ms), shown to the client; the session is a credential of its own. */
  readonly tokenExp: number;
  readonly openedAt: number;
  readonly expiresAt: number;
  lastUsed: number;
  /**
   * The account and claims of the token that opened the session, re-checked while it lives. With no
   * `exp`: a session outlives its token (docs/coap.md "Sessions"), and its own end is expiresAt.
   */
  readonly caller: Caller;
  /** The account object last found to hold the session's authority (cachedCheck() trusts only it). */
  verified: Account;
}

export type SessionEndReason = 'closed' | 'expired' | 'account' | 'evicted' | 'replaced' | 'shutdown';

/** How often every session's authority is re-checked (as event streams are, src/http/sse.ts). */
export const AUTHORITY_SWEEP_MS = 1000;

export class SessionTable {
  private readonly byPeer = new Map<string, Session>();
  private readonly byTenant = new Map<string, Set<Session>>();
  private sweeper: NodeJS.Timeout | undefined;
  private authority: NodeJS.Timeout | undefined;
  private rechecking = false;

  constructor(
    private readonly auth: Authenticator,
    private readonly opts: { ttlMs: number; maxPerAccount: number },
    /** Told of every session that ends, so its observations end too. */
    private readonly onEnd: (s: Session, why: SessionEndReason) => void = () => undefined,
  ) {
    // Expired sessions are also found on use; the sweep only frees memory of idle ones.
    this.sweeper = setInterval(() => this.sweep(), Math.min(60_000, Math.max(1000, opts.ttlMs / 4)));
    this.sweeper.unref();
    this.authority = setInterval(() => void this.recheckAll(), AUTHORITY_SWEEP_MS);
    this.authority.unref();
  }

  get size(): number {
    return this.byPeer.size;
  }

  /** Opens (or re-opens, replacing) the session of `peer` with a raw access token. Throws a 401-family ReefError. */
  async open(peer: Peer, token: string): Promise<Session> {
    token = token.trim().replace(/^bearer\s+/i, '');
    if (!token) throw new ReefError('TOKEN_MISSING', 'send the access token as the payload');
    if (token.length > 4096) throw new ReefError('TOKEN_INVALID', 'the access token is too long');
    const claims = await this.auth.tokens.verify(token);
    const account = await this.auth.account(claims.sub);
    if (!account) throw new ReefError('TOKEN_INVALID', 'the account of this token no longer exists');
    const now = Date.now();
    const expiresAt = now + this.opts.ttlMs;
    const caller: Caller = { account, claims: { ...claims, exp: Number.POSITIVE_INFINITY } };
    // Disabled, or a token issued before the secret was rotated: refused as an HTTP request is.
    await this.auth.recheck(caller);
    const key = peerKey(peer);
    const old = this.byPeer.get(key);
    if (old) this.end(old, 'replaced');
    const s: Session = {
      key,
      peer: { address: peer.address, port: peer.port },
      tenantId: account.tenantId,
      groupId: account.groupId,
      tokenExp: claims.exp * 1000,
      openedAt: now,
      expiresAt,
      lastUsed: now,
      caller,
      verified: account,
    };
    const mine = this.byTenant.get(s.tenantId) ?? new Set<Session>();
    while (mine.size >= this.opts.maxPerAccount) {
      let lru: Session | undefined;
      for (const x of mine) if (!lru || x.lastUsed < lru.lastUsed) lru = x;
      this.end(lru!, 'evicted');
    }
    mine.add(s);
    this.byTenant.set(s.tenantId, mine);
    this.byPeer.set(key, s);
    return s;
  }

  /** Closes the session of `peer`; false when there was none. */
  close(peer: Peer): boolean {
    const s = this.byPeer.get(peerKey(peer));
    if (!s) return false;
    this.end(s, 'closed');
    return true;
  }

  /** The live session of `peer`, or a ReefError saying why there is none. */
  async check(peer: Peer): Promise<Session> {
    const s = this.byPeer.get(peerKey(peer));
    if (!s) throw new ReefError('SESSION_REQUIRED', 'no session: POST /sessions with your access token first');
    const now = Date.now();
    if (now >= s.expiresAt) {
      this.end(s, 'expired');
      throw new ReefError('SESSION_REQUIRED', 'session expired: POST /sessions again');
    }
    await this.recheck(s);
    s.lastUsed = now;
    return s;
  }

  /**
   * Whether the session's authority still holds (Authenticator.recheck); ends it and throws the
   * 401-family ReefError when it does not. A store outage throws too, but ends nothing.
   */
  private async recheck(s: Session): Promise<void> {
    try {
      await this.auth.recheck(s.caller);
    } catch (e) {
      if (isReefError(e) && e.status === 401) this.end(s, 'account');
      throw e;
    }
    const account = this.auth.cachedAccount(s.tenantId);
    if (account) s.verified = account;
  }

  /** Re-checks every session's authority (each second); those that lost it end. */
  async recheckAll(): Promise<void> {
    if (this.rechecking) return;
    this.rechecking = true;
    try {
      await Promise.all([...this.byPeer.values()].map((s) => this.recheck(s).catch(() => undefined)));
    } finally {
      this.rechecking = false;
    }
  }

  /**
   * check() answered from what is cached, without waiting: the session when it is live and its
   * account is cached as enabled; undefined when check() must be asked (to read the account again,
   * or to say why there is no session).
   */
  cachedCheck(peer: Peer): Session | undefined {
    const s = this.byPeer.get(peerKey(peer));
    if (!s) return undefined;
    const now = Date.now();
    if (now >= s.expiresAt) return undefined;
    // Only the very account object last re-checked: a reloaded one (a second old, or forgotten
    // after this node disabled the account or rotated its secret) is re-checked by check() first.
    if (this.auth.cachedAccount(s.tenantId) !== s.verified) return undefined;
    s.lastUsed = now;
    return s;
  }

  /** The session of `peer` without any check (observe bookkeeping). */
  peek(peer: Peer): Session | undefined {
    return this.byPeer.get(peerKey(peer));
  }

  /** Ends every session of an account (e.g. when the gateway learns it was disabled). */
  endTenant(tenantId: string, why: SessionEndReason): void {
    for (const s of [...(this.byTenant.get(tenantId) ?? [])]) this.end(s, why);
  }

  countFor(tenantId: string): number {
    return this.byTenant.get(tenantId)?.size ?? 0;
  }

  sweep(now = Date.now()): void {
    for (const s of [...this.byPeer.values()]) if (now >= s.expiresAt) this.end(s, 'expired');
  }

  closeAll(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    if (this.authority) clearInterval(this.authority);
    this.sweeper = undefined;
    this.authority = undefined;
    for (const s of [...this.byPeer.values()]) this.end(s, 'shutdown');
  }

  private end(s: Session, why: SessionEndReason): void {
    if (this.byPeer.get(s.key) !== s) return;
    this.byPeer.delete(s.key);
    const mine = this.byTenant.get(s.tenantId);
    mine?.delete(s);
    if (mine && mine.size === 0) this.byTenant.delete(s.tenantId);
    this.onEnd(s, why);
  }
}
