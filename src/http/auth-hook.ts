// Authentication for /api/solutions/**: the Authorization header (raw token or Bearer, wire §1)
// becomes request.account before the body is parsed, so unauthenticated uploads cost no parsing.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Account } from '../core/types.ts';
import type { Authenticator } from '../auth/accounts.ts';

declare module 'fastify' {
  interface FastifyRequest {
    account: Account;
  }
}

export function requireAccount(app: FastifyInstance, auth: Authenticator): void {
  app.decorateRequest('account', null as unknown as Account);
  app.addHook('onRequest', async (request: FastifyRequest) => {
    if (request.method === 'OPTIONS') return;
    // EventSource cannot send headers: streams may carry the token as ?access_token (RFC 6750 §2.3).
    let header = request.headers.authorization;
    if (!header && request.url.includes('access_token=')) {
      const q = new URLSearchParams(request.url.slice(request.url.indexOf('?') + 1));
      header = q.get('access_token') ?? undefined;
    }
    request.account = await auth.authenticate(header);
  });
}
