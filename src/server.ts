// The running service: store, auth, events, HTTP (and, as they land, the CoAP gateway and the
// simulation scheduler), started together and stopped together.
import { QuotaService } from './service/quotas.ts';
import fs from 'node:fs';
import path from 'node:path';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import pino, { type Logger } from 'pino';
import type { Config } from './config/config.ts';
import { Authenticator, createAccount } from './auth/accounts.ts';
import { TokenService } from './auth/tokens.ts';
import type { EventBus } from './events/bus.ts';
import { openCoordination } from './jobs/coordination.ts';
import type { Leadership } from './jobs/leader.ts';
import { upkeepJob } from './jobs/upkeep.ts';
import { buildApp } from './http/app.ts';
import { openStore } from './store/open.ts';
import type { Store } from './store/store.ts';

export interface Services {
  config: Config;
  store: Store;
  events: EventBus;
  auth: Authenticator;
  tokens: TokenService;
  /** Background jobs run where this says (one node at a time on PostgreSQL). */
  leadership: Leadership;
  /** Per-account quotas (devices, stored observations, simulation backfill). */
  quotas: QuotaService;
  log: Logger;
}

/** A part of the running service (gateway, simulations...) with its own start and stop. */
export interface Component {
  name: string;
  /** HTTP routes needing an authenticated caller. */
  apiPlugin?: FastifyPluginAsync;
  /** HTTP routes outside authentication. */
  plugin?: FastifyPluginAsync;
  start?(): Promise<void>;
  stop?(): Promise<void>;
  /** Lines for the start-up banner of `reef serve` (after start), e.g. how to reach the demo kit. */
  banner?(url: string): string[];
}

export interface RunningServer {
  app: FastifyInstance;
  services: Services;
  url: string;
  demo: DemoCredentials | null;
  components: Component[];
  close(): Promise<void>;
}

export interface DemoCredentials {
  tenantId: string;
  clientId: string;
  clientSecret: string;
}

export async function openServices(config: Config, log?: Logger, now: () => number = Date.now): Promise<Services> {
  const logger = log ?? pino({ level: config.logLevel, redact: ['*.clientSecret', '*.accessToken', 'req.headers.authorization'] });
  const store = await openStore(config);
  const tokens = new TokenService(store, config.tokens, now);
  await tokens.init();
  const auth = new Authenticator(store, tokens, config.loginThrottle, 1000, now);
  // Events cross nodes and jobs run on one node when the store is shared (PostgreSQL).
  const { events, leadership } = await openCoordination(store, { onError: (err, what) => logger.warn({ err }, what) });
  const quotas = new QuotaService(store, config.quotas, now);
  leadership.run(upkeepJob({ store, nodeId: leadership.nodeId, log: logger, quotas, tokens: { ttlSeconds: config.tokens.ttlSeconds, configuredSecret: config.tokens.secret !== null } }));
  return { config, store, events, auth, tokens, leadership, quotas, log: logger };
}

/**
 * First start with an empty store: a demo account whose credentials are kept (mode 0600) in the
 * data directory, so a local restart can print them again.
 */
async function ensureDemo(s: Services): Promise<DemoCredentials | null> {
  if (!s.config.demo) return null;
  const file = path.join(s.config.dataDir, 'demo-account.json');
  if ((await s.store.countAccounts()) === 0) {
    const c = await createAccount(s.store, { name: 'demo' });
    const demo = { tenantId: c.tenantId, clientId: c.clientId, clientSecret: c.clientSecret };
    fs.mkdirSync(s.config.dataDir, { recursive: true, mode: 0o700 });
    fs.writeFileSync(file, JSON.stringify(demo, null, 2) + '\n', { mode: 0o600 });
    return demo;
  }
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as DemoCredentials;
  } catch {
    return null;
  }
}

export type ComponentFactory = (s: Services, demo: DemoCredentials | null) => Promise<Component | null>;

export async function startServer(config: Config, opts: { components?: ComponentFactory[]; log?: Logger; now?: () => number } = {}): Promise<RunningServer> {
  const services = await openServices(config, opts.log, opts.now);
  const demo = await ensureDemo(services);
  const components: Component[] = [];
  for (const make of opts.components ?? []) {
    const c = await make(services, demo);
    if (c) components.push(c);
  }
  const app = await buildApp({
    config,
    store: services.store,
    auth: services.auth,
    events: services.events,
    quotas: services.quotas,
    logger: services.log,
    ...(opts.now ? { now: opts.now } : {}),
    apiPlugins: components.flatMap((c) => (c.apiPlugin ? [c.apiPlugin] : [])),
    plugins: components.flatMap((c) => (c.plugin ? [c.plugin] : [])),
  });
  await app.listen({ host: config.http.host, port: config.http.port });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.http.port;
  const host = config.http.host.includes(':') ? `[${config.http.host}]` : config.http.host;
  const url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`;
  for (const c of components) await c.start?.();
  await services.leadership.start();

  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      // Stop producers first, then let in-flight HTTP requests finish, then close the store.
      for (const c of [...components].reverse()) await c.stop?.().catch((err) => services.log.error({ err }, `stopping ${c.name} failed`));
      await services.leadership.close();
      await app.close();
      await services.events.close();
      await services.store.close();
    })());
  return { app, services, url, demo, components, close };
}
