// Where Prometheus scrapes the node's metrics (src/metrics/metrics.ts), and who may
// (docs/operations.md "Metrics and logs"). Nothing is served unless the operator says so:
// - REEF_METRICS_TOKEN: GET /metrics on the HTTP port, for `Authorization: Bearer <token>` only
//   (compared in constant time); without the setting the HTTP port has no /metrics at all (404,
//   as any unknown path), so the public port never shows the node's internals by default;
// - REEF_METRICS_LISTEN: a listener of its own (e.g. 127.0.0.1:9464) serving only /metrics, the
//   way Prometheus exporters do, reachable from the network the operator binds it to; the token,
//   when set, is asked for there too.
import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { ReefError } from '../core/errors.ts';
import { scrape } from '../metrics/metrics.ts';
import { errorBody, sendError } from './errors.ts';

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/** Checks an Authorization header against the token; hashing both sides makes the comparison constant time whatever was sent. */
export function tokenCheck(token: string): (authorization: string | undefined) => boolean {
  const expected = digest(token);
  return (authorization) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    return !!m && timingSafeEqual(digest(m[1]!), expected);
  };
}

const refused = () => new ReefError('METRICS_TOKEN_REQUIRED', 'send the metrics token as Authorization: Bearer <REEF_METRICS_TOKEN>');

/** GET /metrics on the HTTP port, registered only when a token is configured. */
export function metricsRoute(app: FastifyInstance, token: string | null): void {
  if (!token) return;
  const allowed = tokenCheck(token);
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    if (!allowed(request.headers.authorization)) return sendError(reply.header('www-authenticate', 'Bearer'), refused());
    const { contentType, body } = await scrape();
    return reply.type(contentType).header('cache-control', 'no-store').send(body);
  });
}

export interface MetricsListener {
  /** http://host:port of the listener. */
  url: string;
  close(): Promise<void>;
}

/** Connections the scrape listener holds at once: a scraper needs one or two. */
const MAX_CONNECTIONS = 16;

/** A plain-HTTP listener serving only GET /metrics (REEF_METRICS_LISTEN). */
export async function startMetricsListener(host: string, port: number, token: string | null): Promise<MetricsListener> {
  const allowed = token ? tokenCheck(token) : null;
  let ids = 0;
  const fail = (res: http.ServerResponse, e: ReefError, headers: Record<string, string> = {}) => {
    res.writeHead(e.status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(JSON.stringify(errorBody(e, `metrics-${(ids++).toString(16)}`)));
  };
  const server = http.createServer({ requestTimeout: 10_000, headersTimeout: 5_000 }, (req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics') return fail(res, new ReefError('ROUTE_NOT_FOUND', 'this listener serves only /metrics'));
    if (req.method !== 'GET' && req.method !== 'HEAD') return fail(res, new ReefError('METHOD_NOT_ALLOWED', `${req.method} is not allowed here; use GET`), { allow: 'GET, HEAD' });
    if (allowed && !allowed(req.headers.authorization)) return fail(res, refused(), { 'www-authenticate': 'Bearer' });
    scrape().then(
      ({ contentType, body }) => {
        res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : body);
      },
      () => fail(res, new ReefError('INTERNAL')),
    );
  });
  server.maxConnections = MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const a = server.address() as AddressInfo;
  const shown = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  return {
    url: `http://${shown}:${a.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
