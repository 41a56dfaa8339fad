// Who an MQTT connection is, and whether it still may be (docs/mqtt.md "Authentication"). A client
// CONNECTs either with an access token as password (user name ignored, as the original's reference
// client does: `notused`) or with its client id as user name and its client secret as password.
// The connection is then held to what HTTP would answer now: a token connection ends when the token
// expires or would no longer be accepted, a secret connection when the secret is rotated; both end
// when the account is disabled or removed.
import type { Authenticator, Caller } from '../auth/accounts.ts';
import { ReefError } from '../core/errors.ts';
import type { Account } from '../core/types.ts';

export interface Principal {
  account: Account;
  via: 'token' | 'secret';
  /** A token connection's account and token claims, re-checked as event streams are. */
  caller?: Caller;
  /** When that token expires (epoch ms). */
  expiresAt?: number;
  /** The secret hash the account had at CONNECT (a secret connection ends when it changes). */
  secretHash: string;
}

/** A JWT (three base64url parts): a password of this shape is an access token. */
const TOKEN_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/**
 * The one call into the Authenticator's login: the throttle and the hashing queue are per source
 * address, as for POST /api/tokens.
 */
export function login(auth: Authenticator, clientId: string, clientSecret: string, remoteAddress: string | undefined) {
  return auth.login(clientId, clientSecret, remoteAddress ?? 'local');
}

export async function authenticateConnect(auth: Authenticator, username: string | undefined, password: Buffer | undefined, remoteAddress: string | undefined): Promise<Principal> {
  const pw = password?.toString('utf8') ?? '';
  if (!pw) throw new ReefError('TOKEN_MISSING', 'send an access token (or your client secret, with your client id as user name) as the MQTT password');
  if (TOKEN_SHAPE.test(pw)) {
    const caller = await auth.caller(pw);
    return { account: caller.account, via: 'token', caller, expiresAt: caller.claims.exp * 1000, secretHash: caller.account.secretHash };
  }
  if (!username) throw new ReefError('INVALID_CREDENTIALS', 'with a client secret as password, the user name must be the client id');
  const issued = await login(auth, username, pw, remoteAddress);
  const account = await auth.authenticate(issued.accessToken);
  return { account, via: 'secret', secretHash: account.secretHash };
}

/** The account as it is now, or the ReefError HTTP would answer; updates `p.account`. */
export async function recheck(auth: Authenticator, p: Principal): Promise<Account> {
  let account: Account | null;
  if (p.caller) {
    // Expiry, disabled or removed account, secret rotated since the token was issued.
    await auth.recheck(p.caller);
    account = (await auth.account(p.account.tenantId))!;
  } else {
    account = await auth.account(p.account.tenantId);
    if (!account) throw new ReefError('TOKEN_INVALID', 'the account no longer exists');
    if (account.disabled) throw new ReefError('ACCOUNT_DISABLED', 'this account is disabled');
    if (account.secretHash !== p.secretHash) throw new ReefError('INVALID_CREDENTIALS', 'the client secret was rotated; connect with the new one');
  }
  p.account = account;
  return account;
}
