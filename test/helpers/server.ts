// A real Reef service for tests: a temp data dir (SQLite file) or a throw-away PostgreSQL database,
// listening on an ephemeral port, plus helpers to make accounts and tokens.
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino, { type Logger } from 'pino';
import { testConfig, type Config } from '../../src/config/config.ts';
import { createAccount, type NewCredentials } from '../../src/auth/accounts.ts';
import { startServer, type ComponentFactory, type RunningServer } from '../../src/server.ts';

export interface TestServer extends RunningServer {
  dataDir: string;
  /** A fresh account (own group unless `group` is given). */
  account(name?: string, group?: string): Promise<NewCredentials>;
  /** A fresh account and a token for it. */
  login(name?: string, group?: string): Promise<NewCredentials & { token: string }>;
  token(c: { clientId: string; clientSecret: string }): Promise<string>;
  /** fetch against the server with an optional token; JSON bodies are encoded. */
  request(method: string, urlPath: string, opts?: { token?: string; body?: unknown; headers?: Record<string, string> }): Promise<Response>;
}

/** A logger for a test server that keeps its warnings (and worse) as lines, for the test to read. */
export function keptWarnings(): { logger: Logger; log: string[] } {
  const log: string[] = [];
  return { logger: pino({ level: 'warn' }, { write: (line: string) => void log.push(line) }), log };
}

export function tempDir(prefix = 'reef-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Config overrides; nested sections may be given in part (the rest keeps its defaults). */
export type TestOverrides = Omit<Partial<Config>, 'http' | 'gateway' | 'loginThrottle' | 'streams' | 'quotas' | 'reads'> & {
  reads?: Partial<Config['reads']>;
  http?: Partial<Config['http']>;
  gateway?: Partial<Config['gateway']>;
  loginThrottle?: Partial<Config['loginThrottle']>;
  streams?: Partial<Config['streams']>;
  quotas?: Partial<Config['quotas']>;
};

export async function startTestServer(overrides: TestOverrides = {}, components: ComponentFactory[] = [], opts: { now?: () => number; log?: import('pino').Logger } = {}): Promise<TestServer> {
  const dataDir = overrides.dataDir ?? tempDir();
  const base = testConfig({ dataDir });
  const config = testConfig({
    ...overrides,
    dataDir,
    http: { ...base.http, ...overrides.http },
    gateway: { ...base.gateway, enabled: false, ...overrides.gateway },
    loginThrottle: { ...base.loginThrottle, ...overrides.loginThrottle },
    streams: { ...base.streams, ...overrides.streams },
    quotas: { ...base.quotas, ...overrides.quotas },
    reads: { ...base.reads, ...overrides.reads },
  });
  const server = await startServer(config, { components, ...opts });
  const t: TestServer = {
    ...server,
    dataDir,
    async close() {
      await server.close();
      if (!overrides.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    },
    // The first account of a group starts it; later ones join it (explicitly, as an operator would).
    async account(name = 'test', group) {
      const store = server.services.store;
      if (!group) return createAccount(store, { name });
      const exists = (await store.listAccounts()).some((a) => a.groupId === group);
      return createAccount(store, { name, ...(exists ? { joinGroup: group } : { group }) });
    },
    async token(c) {
      const r = await fetch(`${server.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(c) });
      if (r.status !== 201) throw new Error(`token request failed: ${r.status} ${await r.text()}`);
      return ((await r.json()) as { accessToken: string }).accessToken;
    },
    async login(name, group) {
      const c = await t.account(name, group);
      return { ...c, token: await t.token(c) };
    },
    request(method, urlPath, opts = {}) {
      const headers: Record<string, string> = { ...(opts.headers ?? {}) };
      if (opts.token) headers.authorization = opts.token;
      let body: string | undefined;
      if (opts.body !== undefined) {
        body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
        headers['content-type'] ??= 'application/json';
      }
      return fetch(`${server.url}${urlPath}`, { method, headers, ...(body === undefined ? {} : { body }) });
    },
  };
  return t;
}

/** A login's answer as a test reads it. */
export interface LoginAnswer {
  status: number;
  retryAfter: string | undefined;
  body: { code?: string; accessToken?: string };
}

/** POST /api/tokens from a given local address (127.0.0.0/8 is all local: a real source address for the throttle). */
export function loginFrom(server: TestServer, from: string, clientId: string, clientSecret: string): Promise<LoginAnswer> {
  const u = new URL('/api/tokens', server.url);
  const payload = JSON.stringify({ clientId, clientSecret });
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        localAddress: from,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'] as string | undefined, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
