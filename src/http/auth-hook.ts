// Authentication for /api/solutions/**: the Authorization header (raw token or Bearer, wire §1)
// becomes request.account before the body is parsed, so unauthenticated uploads cost no parsing.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Account } from '../core/types.ts';
import type { Authenticator, Caller } from '../auth/accounts.ts';

declare module 'fastify' {
  interface FastifyRequest {
    account: Account;
    /** The account and the claims of the token it presented (streams re-check them while open). */
    caller: Caller;
  }
  interface FastifyContextConfig {
    /**
     * The route is an event stream: the token may come as `?access_token=` because EventSource
     * cannot set headers (RFC 6750 §2.3). Only such routes accept it: a token in a URL ends up in
     * logs and browser history, so nothing else takes it from there.
     */
    tokenInQuery?: boolean;
  }
}

export function requireAccount(app: FastifyInstance, auth: Authenticator): void {
  app.decorateRequest('account', null as unknown as Account);
  app.decorateRequest('caller', null as unknown as Caller);
  app.addHook('onRequest', async (request: FastifyRequest) => {
    if (request.method === 'OPTIONS') return;
    let header = request.headers.authorization;
    if (!header && request.routeOptions.config?.tokenInQuery && request.url.includes('access_token=')) {
      const q = new URLSearchParams(request.url.slice(request.url.indexOf('?') + 1));
      header = q.get('access_token') ?? undefined;
    }
    request.caller = await auth.caller(header);
    request.account = request.caller.account;
  });
}
