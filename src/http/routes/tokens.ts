// POST /api/tokens and POST /tokens (the JavaScript SDK posts without /api, wire §1):
// client id + secret → a signed access token (seed §5).
import type { FastifyInstance } from 'fastify';
import type { Authenticator } from '../../auth/accounts.ts';
import { acceptJsonAsText } from '../content-types.ts';
import { errors } from '../schemas.ts';

export async function tokenRoutes(app: FastifyInstance, opts: { auth: Authenticator }) {
  // Clients post credentials as text/plain or with no Content-Type: JSON either way.
  acceptJsonAsText(app);
  const schema = {
    tags: ['tokens'],
    summary: 'Exchange a client id and secret for an access token',
    body: {
      type: 'object',
      properties: { clientId: { type: 'string', maxLength: 200 }, clientSecret: { type: 'string', maxLength: 400 } },
      required: ['clientId', 'clientSecret'],
    },
    response: {
      201: {
        type: 'object',
        properties: { accessToken: { type: 'string' }, tokenType: { type: 'string' }, expiresIn: { type: 'integer' } },
      },
      ...errors(400, 401, 413, 415, 429, 503),
    },
  };
  const handler = async (request: any, reply: any) => {
    const { clientId, clientSecret } = request.body as { clientId: string; clientSecret: string };
    // request.ip is the socket peer, or the forwarded client only when REEF_TRUST_PROXY is set.
    const token = await opts.auth.login(clientId, clientSecret, request.ip);
    return reply.code(201).header('cache-control', 'no-store').send(token);
  };
  app.post('/api/tokens', { schema, bodyLimit: 16 * 1024 }, handler);
  app.post('/tokens', { schema: { ...schema, hide: true }, bodyLimit: 16 * 1024 }, handler);
}
