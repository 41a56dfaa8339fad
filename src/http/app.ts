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
import { StreamRegistry } from './sse.ts';
import { clientError, frameworkError, installErrorHandling, sendError } from './errors.ts';
import * as schemas from './schemas.ts';
import { adminRoutes } from './routes/admin.ts';
import { deviceRoutes } from './routes/devices.ts';
import { healthRoutes } from './routes/health.ts';
import { observationRoutes } from './routes/observations.ts';
import { solutionRoutes } from './routes/solutions.ts';
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
}

const REQUEST_ID = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * Deepest JSON nesting a body may have. No Reef document nests past a handful of levels; bodies
 * nested thousands deep were answered 500 (a recursive step past them ran out of stack, issue
 * 11.7), so they are refused before parsing.
 */
const MAX_JSON_DEPTH = 64;

/**
 * One pass over the text, brackets outside strings only; stops as soon as the limit is passed.
 * Strings are jumped over with indexOf (native), since most of an upload's text is inside them.
 */
function nestedDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      let j = text.indexOf('"', i + 1);
      while (j > 0 && escaped(text, j)) j = text.indexOf('"', j + 1);
      if (j < 0) return false; // unterminated: JSON.parse refuses it
      i = j;
    } else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > max) return true;
    } else if (c === 125 || c === 93) depth--;
  }
  return false;
}

/** Whether the quote at `j` is escaped: an odd number of backslashes before it. */
function escaped(text: string, j: number): boolean {
  let k = j - 1;
  while (text.charCodeAt(k) === 92 /* \\ */) k--;
  return (j - 1 - k) % 2 === 1;
}
const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'] as const;

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, store, auth, events, quotas } = deps;
  // Request ids: a random per-process prefix and a counter — unique across nodes, no entropy per request.
  const idPrefix = randomBytes(4).toString('hex');
  let idCounter = 0;
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
    // (408) instead of holding a connection open forever (issue 11.7). Node checks open connections
    // every `connectionsCheckingInterval`, so the reaping happens within a quarter more.
    requestTimeout: config.http.requestTimeoutMs,
    http: { requestTimeout: config.http.requestTimeoutMs, connectionsCheckingInterval: Math.max(250, Math.min(30_000, Math.floor(config.http.requestTimeoutMs / 4))) },
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

  // The JavaScript SDK sends Content-Type: application/json on every request, GET and DELETE
  // included (wire §1): an empty JSON body is "no body", not an error.
  const defaultJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '' || (typeof body === 'string' && body.trim() === '')) return done(null, undefined);
    if (nestedDeeperThan(body as string, MAX_JSON_DEPTH)) {
      return done(new ReefError('VALIDATION_FAILED', `the JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`, { field: 'body' }), undefined);
    }
    return defaultJson(request, body as string, done);
  });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  // Live event streams: bounded per account and node, slow readers cut, authority re-checked.
  const streams = new StreamRegistry(config.streams, auth, deps.now);
  app.decorate('streams', streams);
  app.addHook('preClose', async () => streams.closeAll());
  installErrorHandling(app);

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
  await app.register(tokenRoutes, { auth });
  await app.register(async (api) => {
    requireAccount(api, auth);
    await api.register(deviceRoutes, { store, events, quotas });
    await api.register(observationRoutes, { store, events, config, quotas });
    await api.register(solutionRoutes, { store });
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
