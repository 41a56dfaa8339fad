// Accounts (tenants) and their credentials: creation, secret rotation, disabling, and turning a
// client id + secret or an access token into the calling account (seed §5).
import { randomBytes, randomUUID } from 'node:crypto';
import { ReefError } from '../core/errors.ts';
import type { Account } from '../core/types.ts';
import { SOLUTION_NAME } from '../core/validate.ts';
import type { Store } from '../store/store.ts';
import { dummySecretHash, generateSecret, hashSecret, verifySecret } from './secrets.ts';
import type { TokenService } from './tokens.ts';
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

export async function createAccount(store: Store, opts: { name: string; group?: string }): Promise<NewCredentials> {
  const name = opts.name.trim();
  if (!name || name.length > 200) throw new ReefError('VALIDATION_FAILED', 'account name must be 1-200 characters', { field: 'name' });
  if (opts.group !== undefined && !SOLUTION_NAME.test(opts.group)) {
    throw new ReefError('VALIDATION_FAILED', "group must be 1-64 letters, digits, '_', '-' or '.'", { field: 'group' });
  }
  const tenantId = newTenantId();
  const clientId = randomUUID();
  const clientSecret = generateSecret();
  // Without --group an account is a group of its own; the group id is then the tenant id.
  const groupId = opts.group ?? tenantId;
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
 * What every authenticated request resolves to. Accounts are cached for a second so a burst of
 * requests costs one lookup, while disabling an account takes effect within that second.
 */
export class Authenticator {
  private cache = new Map<string, { account: Account | null; at: number }>();
  readonly throttle: LoginThrottle;

  constructor(
    private readonly store: Store,
    readonly tokens: TokenService,
    throttle: { maxFailures: number; windowSeconds: number },
    private readonly cacheMs = 1000,
    /** The clock of the account cache (tests inject one). */
    private readonly now: () => number = Date.now,
  ) {
    this.throttle = new LoginThrottle(throttle.maxFailures, throttle.windowSeconds * 1000);
  }

  /** Client id + secret → token. Unknown id and wrong secret answer alike, in the same time. */
  async login(clientId: unknown, clientSecret: unknown) {
    if (typeof clientId !== 'string' || typeof clientSecret !== 'string' || !clientId || !clientSecret) {
      throw new ReefError('VALIDATION_FAILED', 'clientId and clientSecret are required strings', { field: typeof clientId === 'string' && clientId ? 'clientSecret' : 'clientId' });
    }
    if (clientId.length > 100 || clientSecret.length > 200) throw new ReefError('INVALID_CREDENTIALS');
    const key = clientId.toLowerCase();
    this.throttle.check(key);
    const account = await this.store.getAccountByClientId(key);
    const ok = await verifySecret(clientSecret, account?.secretHash ?? (await dummySecretHash()));
    if (!account || !ok) {
      this.throttle.fail(key);
      throw new ReefError('INVALID_CREDENTIALS', 'client id or client secret is wrong');
    }
    if (account.disabled) throw new ReefError('ACCOUNT_DISABLED', 'this account is disabled');
    this.throttle.succeed(key);
    return this.tokens.issue(account.tenantId);
  }

  /** Authorization header value → account. Accepts the raw token (wire §1) and `Bearer <token>`. */
  async authenticate(header: string | undefined): Promise<Account> {
    if (!header || !header.trim()) throw new ReefError('TOKEN_MISSING', 'send the access token in the Authorization header');
    let token = header.trim();
    if (/^bearer\s+/i.test(token)) token = token.replace(/^bearer\s+/i, '');
    if (token.length > 4096) throw new ReefError('TOKEN_INVALID', 'the access token is too long');
    const claims = await this.tokens.verify(token);
    const account = await this.account(claims.sub);
    if (!account) throw new ReefError('TOKEN_INVALID', 'the account of this token no longer exists');
    if (account.disabled) throw new ReefError('ACCOUNT_DISABLED', 'this account is disabled');
    return account;
  }

  async account(tenantId: string): Promise<Account | null> {
    const now = this.now();
    const hit = this.cache.get(tenantId);
    if (hit && now - hit.at < this.cacheMs) return hit.account;
    const account = await this.store.getAccountByTenantId(tenantId);
    if (this.cache.size > 10000) this.cache.clear();
    this.cache.set(tenantId, { account, at: now });
    return account;
  }
}
