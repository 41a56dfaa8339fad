// Liveness (/healthz: the process answers) and readiness (/readyz: the store answers too), for
// load balancers and orchestrators.
import type { FastifyInstance } from 'fastify';
import type { Store } from '../../store/store.ts';

export async function healthRoutes(app: FastifyInstance, opts: { store: Store }) {
  app.get('/healthz', { schema: { tags: ['health'], hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { tags: ['health'], hide: true } }, async () => {
    await opts.store.ping();
    return { status: 'ready', store: opts.store.kind };
  });
}
