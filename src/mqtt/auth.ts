// Who an MQTT connection is, and whether it still may be (docs/mqtt.md "Authentication"). A client
// CONNECTs either with an access token as password (user name ignored, as the original's reference
// client does: `notused`) or with its client id as user name and its client secret as password.
// The connection is then held to what HTTP would answer now: a token connection ends when the token
// expires or would no longer be accepted, a secret connection when the secret is rotated; both end
// when the account is disabled or removed.
import type { Authenticator } from '../auth/accounts.ts';
import { ReefError } from '../core/errors.ts';
import type { Account } from '../core/types.ts';

export interface Principal {
  account: Account;
  via: 'token' | 'secret';
  /** The access token of a token connection. */
  token?: string;
  /** When that token expires (epoch ms). */
  expiresAt?: number;
  /** The secret hash the account had at CONNECT (a secret connection ends when it changes). */
  secretHash: string;
}

/** A JWT (three base64url parts): a password of this shape is an access token. */
const TOKEN_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/**
 * The one call into the Authenticator's login. Its signature is gaining the caller's address (for the
 * login throttle); only this adapter changes with it.
 */
export function login(auth: Authenticator, clientId: string, clientSecret: string, _remoteAddress: string | undefined) {
  return auth.login(clientId, clientSecret);
}

export async function authenticateConnect(auth: Authenticator, username: string | undefined, password: Buffer | undefined, remoteAddress: string | undefined): Promise<Principal> {
  const pw = password?.toString('utf8') ?? '';
  if (!pw) throw new ReefError('TOKEN_MISSING', 'send an access token (or your client secret, with your client id as user name) as the MQTT password');
  if (TOKEN_SHAPE.test(pw)) {
    const claims = await auth.tokens.verify(pw);
    const account = await auth.authenticate(pw);
    return { account, via: 'token', token: pw, expiresAt: claims.exp * 1000, secretHash: account.secretHash };
  }
  if (!username) throw new ReefError('INVALID_CREDENTIALS', 'with a client secret as password, the user name must be the client id');
  const issued = await login(auth, username, pw, remoteAddress);
  const account = await auth.authenticate(issued.accessToken);
  return { account, via: 'secret', secretHash: account.secretHash };
}

/** The account as it is now, or the ReefError HTTP would answer; updates `p.account`. */
export async function recheck(auth: Authenticator, p: Principal): Promise<Account> {
  let account: Account | null;
  if (p.via === 'token') {
    account = await auth.authenticate(p.token!);
  } else {
    account = await auth.account(p.account.tenantId);
    if (!account) throw new ReefError('TOKEN_INVALID', 'the account no longer exists');
    if (account.disabled) throw new ReefError('ACCOUNT_DISABLED', 'this account is disabled');
    if (account.secretHash !== p.secretHash) throw new ReefError('INVALID_CREDENTIALS', 'the client secret was rotated; connect with the new one');
  }
  p.account = account;
  return account;
}
