// buildApp(deps) assembles the HTTP service and never listens: src/main.ts (and tests) decide where.
import { randomBytes } from 'node:crypto';
import Fastify, { LogController, type FastifyInstance, type FastifyPluginAsync, type FastifyServerOptions } from 'fastify';
import { Ajv } from 'ajv';
import cors from '@fastify/cors';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { ReefError } from '../core/errors.ts';
import type { Config } from '../config/config.ts';
import type { Authenticator } from '../auth/accounts.ts';
import type { EventBus } from '../events/bus.ts';
import type { Store } from '../store/store.ts';
import type { QuotaService } from '../service/quotas.ts';
import { requireAccount } from './auth-hook.ts';
import { installBodyParsers } from './content-types.ts';
import { StreamRegistry } from './sse.ts';
import { observeHttp } from '../metrics/metrics.ts';
import { metricsRoute } from './metrics.ts';
import { ConnectionGuard } from './connections.ts';
import { clientError, frameworkError, installErrorHandling, sendError } from './errors.ts';
import * as schemas from './schemas.ts';
import { adminRoutes } from './routes/admin.ts';
import { deviceRoutes } from './routes/devices.ts';
import { healthRoutes } from './routes/health.ts';
import { observationRoutes } from './routes/observations.ts';
import { solutionRoutes } from './routes/solutions.ts';
import { templateRoutes } from './routes/templates.ts';
import { tokenRoutes } from './routes/tokens.ts';

export interface AppDeps {
  config: Config;
  store: Store;
  auth: Authenticator;
  events: EventBus;
  quotas: QuotaService;
  /** A pino logger or Fastify logger options; defaults to config.logLevel on stdout. */
  logger?: FastifyServerOptions['loggerInstance'];
  /** Routes that need an authenticated caller (request.account), e.g. simulations, the CoAP bridge. */
  apiPlugins?: FastifyPluginAsync[];
  /** Routes outside authentication, e.g. the browser app's static files. */
  plugins?: FastifyPluginAsync[];
  /** The clock streams check token expiry against (tests move it). */
  now?: () => number;
  /** Certificate and key (src/config/tls.ts loadTls): the app's server speaks HTTPS. */
  https?: { cert: string; key: string };
}

const REQUEST_ID = /^[A-Za-z0-9_.-]{1,64}$/;

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'] as const;

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, store, auth, events, quotas } = deps;
  // Request ids: a random per-process prefix and a counter — unique across nodes, no entropy per request.
  const idPrefix = randomBytes(4).toString('hex');
  let idCounter = 0;
  // A new connection has headersTimeout to send its request line and headers (Node answers 408
  // and closes it): silent connections are reaped within seconds instead of holding a file
  // descriptor each for the whole request timeout. Node refuses a headers timeout above the request's.
  const headersTimeout = Math.min(config.http.headersTimeoutMs, config.http.requestTimeoutMs);
  const serverTimeouts = {
    requestTimeout: config.http.requestTimeoutMs,
    headersTimeout,
    connectionsCheckingInterval: Math.max(250, Math.min(30_000, Math.floor(headersTimeout / 4))),
  };
  const app = Fastify({
    ...(deps.logger
      ? { loggerInstance: deps.logger }
      : {
          logger: {
            level: config.logLevel,
            // Secrets are never logged (brief: Standards).
            redact: { paths: ['req.headers.authorization', 'req.headers["x-reef-admin-key"]', '*.clientSecret', '*.accessToken'], censor: '[redacted]' },
          },
        }),
    // Access logs at debug: at info a busy ingest node would spend its time logging.
    logController: new LogController({ disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace' }),
    trustProxy: config.http.trustProxy,
    bodyLimit: config.http.bodyLimitBytes,
    // A client has this long to send its whole request, body included; slow senders are reaped
    // (408) instead of holding a connection open forever. Node checks open connections
    // every `connectionsCheckingInterval`, so the reaping happens within a quarter more.
    requestTimeout: config.http.requestTimeoutMs,
    keepAliveTimeout: config.http.keepAliveTimeoutMs,
    http: serverTimeouts,
    // Fastify makes an https.Server when given key material: the same routes, and the
    // same timeouts (Fastify hands `http` options only to a plain HTTP server).
    ...(deps.https ? { https: { cert: deps.https.cert, key: deps.https.key, handshakeTimeout: headersTimeout, ...serverTimeouts } } : {}),
    // Errors before routing (a path segment too long, a broken URL) and errors Node's HTTP parser
    // raises (header overflow, timeout, garbage) get the uniform body too (src/http/errors.ts).
    frameworkErrors: (err, request, reply) => sendError(reply, frameworkError(err)),
    clientErrorHandler: clientError,
    // A caller's own request id is kept when it is sane, so a trace spans services.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : idPrefix + (idCounter++ & 0xffffffff).toString(16).padStart(8, '0');
    },
  });

  // Query strings and paths are text and are coerced to the declared types; JSON bodies are not,
  // so {"deviceType": 7} is refused rather than silently turned into "7".
  const ajvOptions = { removeAdditional: false, allErrors: false, strict: false, useDefaults: true } as const;
  const bodyAjv = new Ajv({ ...ajvOptions, coerceTypes: false });
  const textAjv = new Ajv({ ...ajvOptions, coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : textAjv).compile(schema));

  // ---- request body content types (src/http/content-types.ts, docs/api.md) ----
  // JSON with an empty body allowed (the JavaScript SDK's bodiless GET/DELETE), nesting bounded,
  // and a body with no Content-Type read as JSON (the Windows client clears it).
  // Token routes add text/plain.
  installBodyParsers(app);
  // ---- end of request body content types ----

  // Connections per source address and in all (src/http/connections.ts).
  const connections = new ConnectionGuard({ perAddress: config.http.maxConnectionsPerAddress, total: config.http.maxConnections });
  connections.attach(app.server);
  app.decorate('connections', connections);

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  // Every response by route pattern and status (docs/operations.md "Metrics and logs"): the
  // pattern, never the URL, whose ids are tenant data.
  app.addHook('onResponse', (request, reply, done) => {
    observeHttp(request.method, request.routeOptions.url, reply.statusCode, reply.elapsedTime);
    done();
  });
  // Live event streams: bounded per account and node, slow readers cut, authority re-checked.
  const streams = new StreamRegistry(config.streams, auth, deps.now);
  app.decorate('streams', streams);
  app.addHook('preClose', async () => streams.closeAll());
  installErrorHandling(app, { drainMs: Math.min(config.http.requestTimeoutMs, 10_000) });

  // Browser clients read next_page and Retry-After only if they are exposed (wire §1).
  await app.register(cors, {
    origin: true,
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH'],
    allowedHeaders: ['Authorization', 'Content-Type', 'Accept', 'X-Request-Id'],
    exposedHeaders: ['next_page', 'Retry-After', 'X-Request-Id', 'Location'],
    maxAge: 600,
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'Reef platform API', version: '1', description: 'Devices and observations of constrained sensors (docs/api.md)' },
      components: {
        securitySchemes: { token: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'The access token from POST /api/tokens, raw or as "Bearer <token>"' } },
      },
      security: [{ token: [] }],
    },
    refResolver: { buildLocalReference: (json, _base, _frag, i) => String(json.$id ?? `def-${i}`) },
  });
  for (const s of [schemas.errorBody, schemas.device, schemas.observation]) app.addSchema(s);
  await app.register(swaggerUi, { routePrefix: '/api/docs' });
  app.get('/api/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  // Every registered path and its methods, to answer other methods with 405 and an Allow header.
  const routes = new Map<string, Set<string>>();
  app.addHook('onRoute', (r) => {
    const methods = Array.isArray(r.method) ? r.method : [r.method];
    const set = routes.get(r.url) ?? new Set<string>();
    for (const m of methods) set.add(m);
    routes.set(r.url, set);
  });

  await app.register(healthRoutes, { store });
  metricsRoute(app, config.metrics.token);
  await app.register(tokenRoutes, { auth });
  await app.register(async (api) => {
    requireAccount(api, auth);
    await api.register(deviceRoutes, { store, events, quotas });
    await api.register(observationRoutes, { store, events, config, quotas });
    await api.register(solutionRoutes, { store });
    await api.register(templateRoutes, { store, quotas });
    for (const p of deps.apiPlugins ?? []) await api.register(p);
  });
  await app.register(adminRoutes, { store, events, quotas, adminKey: config.adminKey });
  for (const p of deps.plugins ?? []) await app.register(p);

  for (const [url, have] of [...routes]) {
    if (url.includes('*') || url.startsWith('/api/docs')) continue;
    const missing = METHODS.filter((m) => !have.has(m));
    if (!missing.length || missing.length === METHODS.length) continue;
    const allow = [...have].filter((m) => m !== 'OPTIONS').sort();
    app.route({
      method: missing,
      url,
      schema: { hide: true },
      handler: async (request, reply) => sendError(reply, new ReefError('METHOD_NOT_ALLOWED', `${request.method} is not allowed here; use ${allow.join(', ')}`, { allow })),
    });
  }
  return app;
}
