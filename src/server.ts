// The running service: store, auth, events, HTTP (and, as they land, the CoAP gateway and the
// simulation scheduler), started together and stopped together.
import { QuotaService } from './service/quotas.ts';
import fs from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { ConfigError, type Config } from './config/config.ts';
import { Authenticator, createAccount } from './auth/accounts.ts';
import { TokenService } from './auth/tokens.ts';
import { upkeepJob } from './jobs/upkeep.ts';
import { buildApp } from './http/app.ts';
import { TlsError, loadTls, type TlsMaterial } from './config/tls.ts';
import { openBackend } from './app/backend.ts';
import { createLogger } from './app/logger.ts';
import { enableProcessMetrics, watchLeadership, watchStreams } from './metrics/metrics.ts';
import { startMetricsListener } from './http/metrics.ts';
import type { Component, ComponentFactory, DemoCredentials, Services } from './app/contracts.ts';

// The contract types moved below the features (src/app/contracts.ts); re-exported for callers of
// the composition root (cli/serve.ts, tests, benches).
export type { Component, ComponentFactory, DemoCredentials, Services } from './app/contracts.ts';

export interface RunningServer {
  app: FastifyInstance;
  services: Services;
  url: string;
  demo: DemoCredentials | null;
  components: Component[];
  /** The certificate served when HTTPS is on (url then starts https://). */
  tls: TlsMaterial | null;
  /** The scrape listener's /metrics URL (REEF_METRICS_LISTEN), or null. */
  metricsUrl: string | null;
  close(): Promise<void>;
}

/** What a caller may inject: a logger, and the clock of tokens and the account cache (tests). */
export interface ServiceOptions {
  log?: Logger;
  now?: () => number;
}

export async function openServices(config: Config, log?: Logger, opts: Omit<ServiceOptions, 'log'> = {}): Promise<Services> {
  const logger = log ?? (await createLogger(config));
  // Events cross nodes and jobs run on one node when the store is shared (PostgreSQL).
  const { store, events, leadership } = await openBackend(config, { onError: (err, what) => logger.warn({ err }, what), startWaitMs: config.databaseStartWaitMs });
  const tokens = new TokenService(store, config.tokens, opts.now);
  await tokens.init();
  const auth = new Authenticator(store, tokens, config.loginThrottle, undefined, opts.now);
  const quotas = new QuotaService(store, config.quotas, opts.now);
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

export async function startServer(config: Config, opts: ServiceOptions & { components?: ComponentFactory[] } = {}): Promise<RunningServer> {
  // TLS problems (unreadable or mismatched files) stop the start before anything is opened.
  let tls: TlsMaterial | null;
  try {
    tls = loadTls(
      config.tls,
      config.dataDir,
      [config.http.host].filter((h) => h !== '0.0.0.0' && h !== '::'),
    );
  } catch (e) {
    throw e instanceof TlsError ? new ConfigError([e.message]) : e;
  }
  const services = await openServices(config, opts.log, opts.now ? { now: opts.now } : {});
  if (tls?.replaced) services.log.warn({ certFile: tls.certFile, reason: tls.replaced }, 'the self-signed TLS certificate in the data directory was unusable; a new one was made');
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
    ...(tls ? { https: { cert: tls.cert, key: tls.key } } : {}),
  });
  await app.listen({ host: config.http.host, port: config.http.port });
  // Metrics (docs/operations.md "Metrics and logs"): process metrics, the readings taken at scrape
  // time, and the scrape listener when one is configured.
  enableProcessMetrics();
  const unwatch = [watchStreams(() => app.streams.size), watchLeadership(() => services.leadership.isLeader())];
  const scrapes = config.metrics.listen ? await startMetricsListener(config.metrics.listen.host, config.metrics.listen.port, config.metrics.token) : null;
  if (scrapes) {
    const open = !config.metrics.token && !/^(127\.|::1$|localhost$)/.test(config.metrics.listen!.host);
    if (open) services.log.warn({ metrics: scrapes.url }, 'the metrics listener is on a non-loopback address without REEF_METRICS_TOKEN: whoever reaches it reads the metrics');
    else services.log.info({ metrics: `${scrapes.url}/metrics` }, 'metrics listener');
  }
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.http.port;
  const host = config.http.host.includes(':') ? `[${config.http.host}]` : config.http.host;
  const url = `${tls ? 'https' : 'http'}://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`;
  for (const c of components) await c.start?.();
  await services.leadership.start();

  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      // Stop producers first, then let in-flight HTTP requests finish, then close the store.
      for (const c of [...components].reverse()) await c.stop?.().catch((err) => services.log.error({ err }, `stopping ${c.name} failed`));
      await services.leadership.close();
      await scrapes?.close();
      for (const u of unwatch) u();
      // Node's close() ends only the connections idle at that moment: one whose request finishes
      // later would stay open for the keep-alive timeout (72 s) and hold the close until then.
      const sweep = setInterval(() => app.server.closeIdleConnections(), 50);
      await app.close().finally(() => clearInterval(sweep));
      await services.events.close();
      await services.store.close();
    })());
  return { app, services, url, demo, components, tls, metricsUrl: scrapes ? `${scrapes.url}/metrics` : null, close };
}
