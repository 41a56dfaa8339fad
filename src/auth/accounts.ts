// Accounts (tenants) and their credentials: creation, secret rotation, disabling, and turning a
// client id + secret or an access token into the calling account (seed §5).
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { ReefError } from '../core/errors.ts';
import type { Account } from '../core/types.ts';
import { SOLUTION_NAME } from '../core/validate.ts';
import type { Store } from '../store/store.ts';
import { dummySecretHash, generateSecret, hashSecret, HashQueue, verifySecret } from './secrets.ts';
import type { TokenClaims, TokenService } from './tokens.ts';
import { LoginThrottle } from './throttle.ts';

export interface NewCredentials {
  tenantId: string;
  clientId: string;
  /** Shown once; only its scrypt hash is stored. */
  clientSecret: string;
  groupId: string;
  name: string;
}

/** Tenant ids start with TN, as the original platform's did (wire §1). */
export function newTenantId(): string {
  return 'TN' + randomBytes(10).toString('hex').toUpperCase();
}

const TENANT_ID = /^TN[0-9A-F]{20}$/i;

/**
 * A new account. Without a group it is a group of its own (group id = its tenant id). `group`
 * starts a new named group; `joinGroup` joins an existing one, and only that way: a group is never
 * joined by accident, and a group name can never be another account's tenant id, so nobody joins a
 * tenant's own devices by naming its id.
 */
export async function createAccount(store: Store, opts: { name: string; group?: string; joinGroup?: string }): Promise<NewCredentials> {
  const name = opts.name.trim();
  if (!name || name.length > 200) throw new ReefError('VALIDATION_FAILED', 'account name must be 1-200 characters', { field: 'name' });
  if (opts.group !== undefined && opts.joinGroup !== undefined)
    throw new ReefError('VALIDATION_FAILED', 'give either group (a new group) or joinGroup (an existing one), not both', { field: 'group' });
  const named = opts.group ?? opts.joinGroup;
  const field = opts.group !== undefined ? 'group' : 'joinGroup';
  if (named !== undefined) {
    if (!SOLUTION_NAME.test(named)) throw new ReefError('VALIDATION_FAILED', "group must be 1-64 letters, digits, '_', '-' or '.'", { field });
    if (TENANT_ID.test(named)) throw new ReefError('VALIDATION_FAILED', 'a group name cannot have the form of a tenant id (TN + 20 hex digits)', { field });
    const exists = (await store.listAccounts()).some((a) => a.groupId === named);
    if (opts.group !== undefined && exists) throw new ReefError('CONFLICT', `group ${named} already exists; to add this account to it, join it explicitly (--join-group ${named})`, { field });
    if (opts.joinGroup !== undefined && !exists) throw new ReefError('VALIDATION_FAILED', `there is no group ${named} to join; create it with --group`, { field });
  }
  const tenantId = newTenantId();
  const clientId = randomUUID();
  const clientSecret = generateSecret();
  const groupId = named ?? tenantId;
  await store.createAccount({ tenantId, name, groupId, clientId, secretHash: await hashSecret(clientSecret), disabled: false, createdAt: Date.now() });
  return { tenantId, clientId, clientSecret, groupId, name };
}

/** Finds an account by tenant id or client id (the CLI accepts either). */
export async function findAccount(store: Store, idOrClientId: string): Promise<Account> {
  const a = (await store.getAccountByTenantId(idOrClientId)) ?? (await store.getAccountByClientId(idOrClientId.toLowerCase()));
  if (!a) throw new ReefError('ACCOUNT_NOT_FOUND', `no account with tenant id or client id ${JSON.stringify(idOrClientId)}`);
  return a;
}

export async function rotateSecret(store: Store, idOrClientId: string): Promise<{ tenantId: string; clientId: string; clientSecret: string }> {
  const a = await findAccount(store, idOrClientId);
  const clientSecret = generateSecret();
  await store.setAccountSecret(a.tenantId, await hashSecret(clientSecret));
  return { tenantId: a.tenantId, clientId: a.clientId, clientSecret };
}

export async function setDisabled(store: Store, idOrClientId: string, disabled: boolean): Promise<Account> {
  const a = await findAccount(store, idOrClientId);
  await store.setAccountDisabled(a.tenantId, disabled);
  return { ...a, disabled };
}

/**
 * The secret version a token carries (`sv`): a short fingerprint of the account's secret hash. The
 * hash changes when the secret is rotated, so tokens issued before a rotation stop verifying.
 * It reveals nothing: the hash is salted and this is a digest of it.
 */
export function secretVersion(secretHash: string): string {
  return createHash('sha256').update(secretHash).digest('base64url').slice(0, 12);
}

export interface LoginLimits {
  /** Failed logins per (source address, client id) per window. */
  maxFailures: number;
  /** Failed logins per source address, over all client ids, per window. */
  sourceMaxFailures: number;
  /** Failed logins per client id, over all addresses, per window; past it only clean addresses may try it. */
  clientMaxFailures: number;
  windowSeconds: number;
  /** scrypt checks running at once, and waiting (in all / per source) before SERVER_BUSY. */
  hashConcurrency: number;
  hashQueue: number;
  hashQueuePerSource: number;
}

export const DEFAULT_LOGIN_LIMITS: LoginLimits = { maxFailures: 10, sourceMaxFailures: 50, clientMaxFailures: 20, windowSeconds: 60, hashConcurrency: 2, hashQueue: 256, hashQueuePerSource: 8 };

/** An authenticated caller: its account and the claims of the token it presented. */
export interface Caller {
  account: Account;
  claims: TokenClaims;
}

/**
 * What every authenticated request resolves to. Accounts are cached for a second so a burst of
 * requests costs one lookup, while disabling an account takes effect within that second.
 */
export class Authenticator {
  private cache = new Map<string, { account: Account | null; at: number }>();
  readonly throttle: LoginThrottle;
  readonly hashing: HashQueue;

  constructor(
    private readonly store: Store,
    readonly tokens: TokenService,
    limits: Partial<LoginLimits> = {},
    private readonly cacheMs = 1000,
    /** The clock of the account cache, the throttle and token re-checks (tests inject one). */
    private readonly now: () => number = Date.now,
  ) {
    const l = { ...DEFAULT_LOGIN_LIMITS, ...limits };
    this.throttle = new LoginThrottle({ maxFailures: l.maxFailures, sourceMaxFailures: l.sourceMaxFailures, clientMaxFailures: l.clientMaxFailures, windowMs: l.windowSeconds * 1000 }, now);
    this.hashing = new HashQueue({ concurrency: l.hashConcurrency, maxQueued: l.hashQueue, maxQueuedPerSource: l.hashQueuePerSource });
  }

  /**
   * Client id + secret → token. Unknown id and wrong secret answer alike, in the same time.
   * `source` is the caller's address (the throttle and the hashing queue are per source).
   */
  async login(clientId: unknown, clientSecret: unknown, source = 'local') {
    if (typeof clientId !== 'string' || typeof clientSecret !== 'string' || !clientId || !clientSecret) {
      throw new ReefError('VALIDATION_FAILED', 'clientId and clientSecret are required strings', { field: typeof clientId === 'string' && clientId ? 'clientSecret' : 'clientId' });
    }
    if (clientId.length > 100 || clientSecret.length > 200) throw new ReefError('INVALID_CREDENTIALS');
    const key = clientId.toLowerCase();
    const attempt = this.throttle.begin(source, key);
    let account: Account | null;
    let ok: boolean;
    try {
      account = await this.store.getAccountByClientId(key);
      const hash = account?.secretHash ?? (await dummySecretHash());
      // A known client id from an address with no recent failures is what a real login looks
      // like: its check goes ahead of every other waiting one (HashQueue). Client ids are random
      // UUIDs, so that this is faster for known ids under a flood tells a guesser nothing useful.
      ok = await this.hashing.run(source, () => verifySecret(clientSecret, hash), account !== null && attempt.clean);
    } catch (e) {
      // Shed or failed before checking: not a wrong guess, but it was not a success either.
      attempt.failed();
      throw e;
    }
    if (!account || !ok) {
      attempt.failed();
      throw new ReefError('INVALID_CREDENTIALS', 'client id or client secret is wrong');
    }
    attempt.ok();
    if (account.disabled) throw new ReefError('ACCOUNT_DISABLED', 'this account is disabled');
    return this.tokens.issue(account.tenantId, secretVersion(account.secretHash));
  }

  /** Authorization header value → account. Accepts the raw token (wire §1) and `Bearer <token>`. */
  async authenticate(header: string | undefined): Promise<Account> {
    return (await this.caller(header)).account;
  }

  /** Authorization header value → account and token claims. */
  async caller(header: string | undefined): Promise<Caller> {
    if (!header || !header.trim()) throw new ReefError('TOKEN_MISSING', 'send the access token in the Authorization header');
    let token = header.trim();
    if (/^bearer\s+/i.test(token)) token = token.replace(/^bearer\s+/i, '');
    if (token.length > 4096) throw new ReefError('TOKEN_INVALID', 'the access token is too long');
    const claims = await this.tokens.verify(token);
    const account = await this.account(claims.sub);
    this.check(account, claims);
    return { account: account!, claims };
  }

  /**
   * Whether a caller's authority still holds: the account exists and is enabled, the token has not
   * expired, and the secret has not been rotated since it was issued. Long-lived connections (event
   * streams, bridge streams, MQTT) call this again while they run.
   */
  async recheck(c: Caller): Promise<void> {
    if (c.claims.exp * 1000 <= this.now()) throw new ReefError('TOKEN_EXPIRED', 'the access token has expired; request a new one');
    this.check(await this.account(c.account.tenantId), c.claims);
  }

  private check(account: Account | null, claims: TokenClaims): asserts account is Account {
    if (!account) throw new ReefError('TOKEN_INVALID', 'the account of this token no longer exists');
    if (account.disabled) throw new ReefError('ACCOUNT_DISABLED', 'this account is disabled');
    // Tokens issued before `sv` existed carry none and live to their expiry (docs/security.md).
    if (claims.sv !== undefined && claims.sv !== this.versionOf(account)) {
      throw new ReefError('TOKEN_INVALID', 'the client secret was rotated after this token was issued; request a new token');
    }
  }

  /** The account's secret version, hashed once per cached account object, not once per request. */
  private readonly versions = new WeakMap<Account, string>();
  private versionOf(account: Account): string {
    let v = this.versions.get(account);
    if (v === undefined) this.versions.set(account, (v = secretVersion(account.secretHash)));
    return v;
  }

  /** account() when it can answer from its cache (fresh entry); undefined when it would read the store. */
  cachedAccount(tenantId: string): Account | null | undefined {
    const hit = this.cache.get(tenantId);
    return hit && this.now() - hit.at < this.cacheMs ? hit.account : undefined;
  }

  /** How much longer cachedAccount() answers for this tenant from what it holds now (ms; 0: not cached). */
  accountFreshMs(tenantId: string): number {
    const hit = this.cache.get(tenantId);
    return hit ? Math.max(0, this.cacheMs - (this.now() - hit.at)) : 0;
  }

  async account(tenantId: string): Promise<Account | null> {
    const hit = this.cachedAccount(tenantId);
    if (hit !== undefined) return hit;
    const now = this.now();
    const account = await this.store.getAccountByTenantId(tenantId);
    if (this.cache.size > 10000) this.cache.clear();
    this.cache.set(tenantId, { account, at: now });
    return account;
  }

  /** Forgets a cached account now (after this node disabled it or rotated its secret). */
  forget(tenantId: string): void {
    this.cache.delete(tenantId);
  }
}
