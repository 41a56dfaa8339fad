// Configuration is read once, from REEF_* environment variables and command-line flags (flags win),
// validated with every error collected, then passed down. Nothing else reads process.env.
import { isIP } from 'node:net';
import fs from 'node:fs';
import path from 'node:path';
import { tlsSettingProblems, type TlsSettings } from './tls.ts';
import { DatabaseUrlError, parseDatabaseUrl } from '../core/database-url.ts';

export interface Config {
  http: {
    host: string;
    port: number;
    trustProxy: boolean;
    bodyLimitBytes: number;
    requestTimeoutMs: number;
    /** A connection that has not sent a complete request line and headers by then is closed (408); also the TLS handshake's limit. */
    headersTimeoutMs: number;
    /** An idle kept-alive connection is closed after this long. */
    keepAliveTimeoutMs: number;
    /** Connections the HTTP(S) listener holds open in all (src/http/connections.ts). */
    maxConnections: number;
    /** Connections one source address may hold open; 0: no limit. */
    maxConnectionsPerAddress: number;
    publicUrl: string | null;
  };
  /** HTTPS (and other TLS listeners): off unless a certificate or self-signing is asked for (src/config/tls.ts). */
  tls: TlsSettings;
  dataDir: string;
  /** PostgreSQL connection string, one host or several (src/core/database-url.ts); unset means the embedded SQLite store in dataDir. */
  databaseUrl: string | null;
  /** A PostgreSQL standby that serves observation reads (docs/operations.md "Reads from a standby"); null: the primary serves them. */
  databaseReadUrl: string | null;
  /** How long a starting node waits for a writable PostgreSQL host (a failover under way) before it gives up; 0: not at all. */
  databaseStartWaitMs: number;
  tokens: { ttlSeconds: number; secret: string | null; issuer: string };
  adminKey: string | null;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Log lines as JSON, or pretty for people; auto: pretty when standard output is a terminal (src/app/logger.ts). */
  logFormat: 'auto' | 'json' | 'pretty';
  /** Who may scrape /metrics (src/http/metrics.ts, docs/operations.md "Metrics and logs"). */
  metrics: {
    /** Bearer token /metrics asks for; null: no /metrics on the HTTP port. */
    token: string | null;
    /** A listener of its own serving only /metrics; null: none. */
    listen: { host: string; port: number } | null;
  };
  /** Create the demo account (and its demo kit and simulation) on first start with an empty store. */
  demo: boolean;
  /** Login throttle and bounded password hashing (src/auth/throttle.ts, src/auth/secrets.ts). */
  loginThrottle: { maxFailures: number; sourceMaxFailures: number; clientMaxFailures: number; windowSeconds: number; hashConcurrency: number; hashQueue: number; hashQueuePerSource: number };
  /** Live event streams (src/http/sse.ts). */
  streams: { maxPerAccount: number; maxPerNode: number; maxBufferedBytes: number };
  /** Default per-account quotas; an operator can set others per account. */
  quotas: { devices: number; observations: number; backfill: number; solutions: number; templates: number; alarmRules: number };
  maxObservationsPerRequest: number;
  /** Largest JSON of one observation's fields besides timestamp and temperature (src/service/observations.ts). */
  maxObservationExtraBytes: number;
  /** What one observation read may cost (src/http/read-slots.ts, src/service/observations.ts). */
  reads: { maxScan: number; maxBuckets: number; maxPerAccount: number };
  gateway: {
    enabled: boolean;
    host: string;
    port: number;
    deadlineMs: number;
    sessionTtlSeconds: number;
    maxSessionsPerAccount: number;
    meshDomain: string;
    /** A kit clock off by more than this many seconds is set right with a time PUT. */
    clockSkewSeconds: number;
    /** Store every reachable kit's readings as observations. */
    readings: boolean;
    /** Kits at fixed addresses, besides those that announce themselves. */
    kits: { mac: string; host: string; port: number }[];
  };
  mqtt: {
    enabled: boolean;
    host: string;
    port: number;
    /** False when the port was set explicitly: then a taken port fails the start instead of moving on. */
    portFallback: boolean;
    /** Port of MQTT over TLS; used only with a certificate and key. */
    tlsPort: number;
    /** As portFallback, for the TLS port. */
    tlsPortFallback: boolean;
    /** PEM files of the TLS listener; both or neither. */
    tlsCert: string | null;
    tlsKey: string | null;
    /** Kit payloads are published retained (a new subscriber gets the last one at once). */
    retain: boolean;
    /** Connected clients' accounts and tokens are checked again this often. */
    recheckSeconds: number;
    /** What one client, address or account may hold of a node (docs/security.md "Limits"). */
    limits: MqttLimits;
    /** redis:// or rediss:// URL of the MQTT state shared by the nodes (docs/mqtt.md "Several nodes"); null: in memory. */
    redisUrl: string | null;
  };
  /** Alarms (src/alarms, docs/alarms.md). */
  alarms: {
    /** Webhooks may reach loopback, private and link-local addresses (docs/security.md "Webhook targets"). */
    webhookAllowPrivate: boolean;
    /** Non-public subnets webhooks may reach all the same (docs/security.md "Webhook targets"). */
    webhookAllowCidrs: { address: string; prefix: number; family: 4 | 6 }[];
  };
}

/** The broker's bounds (src/mqtt/broker.ts, docs/mqtt.md "Limits and hostile input"). */
export interface MqttLimits {
  /** Connections of the node, plain and TLS together. */
  maxConnections: number;
  /** Connections from one source address. */
  maxPerAddress: number;
  /** Connected clients and stored sessions of one account. */
  maxPerAccount: number;
  /** Milliseconds a connection has to finish its TLS handshake and to send CONNECT. */
  connectTimeoutMs: number;
  /** Largest keep-alive in seconds; 0 (none) and larger values are taken as this. */
  maxKeepAliveSeconds: number;
  /** Largest Remaining Length of a packet after CONNECT, in bytes. */
  maxPacketBytes: number;
  /** Incoming QoS 2 messages of one client awaiting their PUBREL. */
  maxInflight: number;
  /** Messages a connected client may have unsent before it is disconnected. */
  maxQueuedMessages: number;
  /** Bytes a connected client may have unsent before it is disconnected. */
  maxQueuedBytes: number;
  /** Messages a persistent session may hold for its client. */
  sessionMessages: number;
  /** Bytes of payload a persistent session may hold for its client. */
  sessionBytes: number;
  /** Milliseconds a persistent session is kept after its client disconnects. */
  sessionExpiryMs: number;
}

/** REEF_ALARM_WEBHOOK_ALLOW_CIDRS: `address/prefix` or one address, comma-separated; each bad one is a problem. */
function parseCidrs(text: string, problems: string[]): { address: string; prefix: number; family: 4 | 6 }[] {
  const out: { address: string; prefix: number; family: 4 | 6 }[] = [];
  for (const item of text
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)) {
    const [address = '', bits, extra] = item.split('/');
    const family = isIP(address);
    const max = family === 6 ? 128 : 32;
    const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : Number.NaN;
    if (family === 0 || extra !== undefined || !(prefix >= 0 && prefix <= max)) {
      problems.push(`REEF_ALARM_WEBHOOK_ALLOW_CIDRS (--alarm-webhook-allow-cidrs): ${JSON.stringify(item)} is not an IPv4 or IPv6 address with an optional /prefix`);
      continue;
    }
    out.push({ address, prefix, family: family as 4 | 6 });
  }
  return out;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Source = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Every setting: its variable, flag, default and parser. The README's configuration table mirrors this. */
export const SETTINGS = [
  { env: 'REEF_HTTP_HOST', flag: 'host', def: '127.0.0.1', doc: 'Address the HTTP server listens on' },
  { env: 'REEF_HTTP_PORT', flag: 'port', def: '8080', doc: 'HTTP port (0 picks a free one)' },
  { env: 'REEF_TLS_CERT', flag: 'tls-cert', def: '', doc: 'PEM certificate file: serve HTTPS instead of HTTP (with REEF_TLS_KEY)' },
  { env: 'REEF_TLS_KEY', flag: 'tls-key', def: '', doc: 'PEM private key file of REEF_TLS_CERT (not world-readable)' },
  { env: 'REEF_TLS_SELF_SIGNED', flag: 'tls-self-signed', def: 'false', doc: 'Serve HTTPS with a self-signed certificate made at first start in the data dir' },
  { env: 'REEF_DATA_DIR', flag: 'data-dir', def: './data', doc: 'Directory of the embedded SQLite store and generated keys' },
  {
    env: 'REEF_DATABASE_URL',
    flag: 'database-url',
    def: '',
    doc: 'postgres:// URL, with several hosts for a primary and its standbys (postgres://u@h1:5432,h2:5432/db; the writable one is used); unset uses embedded SQLite',
  },
  {
    env: 'REEF_DATABASE_READ_URL',
    flag: 'database-read-url',
    def: '',
    doc: 'postgres:// URL of one standby (or a pooler in front of several) that serves observation pages, latest of all and buckets; unset: the primary serves them',
  },
  {
    env: 'REEF_DATABASE_START_WAIT',
    flag: 'database-start-wait',
    def: '60',
    doc: "Seconds a starting node waits for a writable PostgreSQL host (a failover under way), looking again every second and logging each host's state, before it exits; 0: exit at once",
  },
  { env: 'REEF_TOKEN_TTL', flag: 'token-ttl', def: '3600', doc: 'Access-token lifetime in seconds' },
  { env: 'REEF_TOKEN_SECRET', flag: 'token-secret', def: '', doc: 'HMAC key for tokens (≥ 32 chars); unset generates one and keeps it in the store' },
  { env: 'REEF_ADMIN_KEY', flag: 'admin-key', def: '', doc: 'Key for operator endpoints (/api/admin/*); unset disables them' },
  { env: 'REEF_LOG_LEVEL', flag: 'log-level', def: 'info', doc: 'fatal, error, warn, info, debug, trace or silent' },
  { env: 'REEF_LOG_FORMAT', flag: 'log-format', def: 'auto', doc: 'json, pretty (for people), or auto: pretty when standard output is a terminal, JSON otherwise' },
  {
    env: 'REEF_METRICS_TOKEN',
    flag: 'metrics-token',
    def: '',
    doc: 'Bearer token (≥ 16 chars) for GET /metrics (Prometheus text) on the HTTP port and on REEF_METRICS_LISTEN; unset: no /metrics on the HTTP port',
  },
  {
    env: 'REEF_METRICS_LISTEN',
    flag: 'metrics-listen',
    def: '',
    doc: 'host:port of a plain-HTTP listener serving only /metrics, e.g. 127.0.0.1:9464 (port 0 picks one); unset: none',
  },
  { env: 'REEF_DEMO', flag: 'demo', def: 'true', doc: 'Create a demo account on first start with an empty store' },
  { env: 'REEF_TRUST_PROXY', flag: 'trust-proxy', def: 'false', doc: 'Trust X-Forwarded-* (behind a load balancer)' },
  { env: 'REEF_BODY_LIMIT', flag: 'body-limit', def: '16777216', doc: 'Largest request body in bytes' },
  { env: 'REEF_MAX_OBSERVATIONS', flag: 'max-observations', def: '10000', doc: 'Most observations in one upload' },
  { env: 'REEF_MAX_OBSERVATION_EXTRA', flag: 'max-observation-extra', def: '65536', doc: "Largest JSON of one observation's fields besides timestamp and temperature, in bytes (HTTP and MQTT)" },
  { env: 'REEF_READ_MAX_SCAN', flag: 'read-max-scan', def: '20000', doc: 'Stored observations one tag-filtered page examines; the page ends there, with next_page' },
  { env: 'REEF_READ_MAX_BUCKETS', flag: 'read-max-buckets', def: '10000', doc: 'Buckets one bucketed read may ask for (more: 400)' },
  { env: 'REEF_READ_MAX_PER_ACCOUNT', flag: 'read-max-per-account', def: '4', doc: 'Observation reads (ranges, tag filters, buckets) one account may have in progress on a node (more: 429)' },
  { env: 'REEF_LOGIN_MAX_FAILURES', flag: 'login-max-failures', def: '10', doc: 'Failed logins per client id per window before 429' },
  { env: 'REEF_LOGIN_WINDOW', flag: 'login-window', def: '60', doc: 'Login throttle window in seconds' },
  { env: 'REEF_LOGIN_SOURCE_MAX_FAILURES', flag: 'login-source-max-failures', def: '50', doc: 'Failed logins per source address (all client ids) per window before 429' },
  {
    env: 'REEF_LOGIN_CLIENT_MAX_FAILURES',
    flag: 'login-client-max-failures',
    def: '20',
    doc: 'Failed logins per client id from all addresses per window; past it only addresses without failures may try it',
  },
  { env: 'REEF_LOGIN_HASH_CONCURRENCY', flag: 'login-hash-concurrency', def: '2', doc: 'Secret checks (scrypt) running at once' },
  { env: 'REEF_LOGIN_HASH_QUEUE', flag: 'login-hash-queue', def: '256', doc: 'Secret checks waiting in all before 503 SERVER_BUSY (8 per source address)' },
  { env: 'REEF_SSE_MAX_PER_ACCOUNT', flag: 'sse-max-per-account', def: '32', doc: 'Live event streams one account may hold open on a node' },
  { env: 'REEF_SSE_MAX_PER_NODE', flag: 'sse-max-per-node', def: '4096', doc: 'Live event streams one node holds open in all' },
  { env: 'REEF_SSE_MAX_BUFFER', flag: 'sse-max-buffer', def: '1048576', doc: 'Bytes a stream may have unsent before the reader is disconnected' },
  { env: 'REEF_QUOTA_DEVICES', flag: 'quota-devices', def: '10000', doc: 'Default devices per account' },
  { env: 'REEF_QUOTA_OBSERVATIONS', flag: 'quota-observations', def: '100000000', doc: 'Default stored observations per account' },
  { env: 'REEF_QUOTA_BACKFILL', flag: 'quota-backfill', def: '5000000', doc: 'Default observations one simulation may backfill' },
  { env: 'REEF_QUOTA_SOLUTIONS', flag: 'quota-solutions', def: '100', doc: "Default solutions per account's group" },
  { env: 'REEF_QUOTA_TEMPLATES', flag: 'quota-templates', def: '1000', doc: "Default device templates per account's group, all solutions" },
  { env: 'REEF_QUOTA_ALARM_RULES', flag: 'quota-alarm-rules', def: '10000', doc: "Default alarm rules per account's group, all solutions" },
  { env: 'REEF_HTTP_REQUEST_TIMEOUT', flag: 'http-request-timeout', def: '60', doc: 'Seconds a client has to send a whole request (then 408)' },
  {
    env: 'REEF_HTTP_HEADERS_TIMEOUT',
    flag: 'http-headers-timeout',
    def: '10',
    doc: 'Seconds a new connection has to send its request line and headers, and to finish a TLS handshake (then 408 and closed)',
  },
  { env: 'REEF_HTTP_KEEP_ALIVE_TIMEOUT', flag: 'http-keep-alive-timeout', def: '72', doc: "Seconds an idle kept-alive HTTP connection stays open (above a load balancer's 60)" },
  {
    env: 'REEF_HTTP_MAX_CONNECTIONS',
    flag: 'http-max-connections',
    def: '0',
    doc: 'HTTP connections open at once in all; 0 derives it from the open-files limit (ulimit -n) minus a quarter of it (docs/operations.md)',
  },
  { env: 'REEF_HTTP_MAX_CONNECTIONS_PER_ADDRESS', flag: 'http-max-connections-per-address', def: '256', doc: 'HTTP connections one source address may hold open (0: no limit, e.g. behind a proxy)' },
  { env: 'REEF_PUBLIC_URL', flag: 'public-url', def: '', doc: 'URL clients reach this service at (for next_page links); unset uses the request' },
  { env: 'REEF_GATEWAY', flag: 'gateway', def: 'true', doc: 'Run the CoAP gateway in `reef serve`' },
  { env: 'REEF_GATEWAY_HOST', flag: 'gateway-host', def: '127.0.0.1', doc: 'CoAP gateway UDP address; its requests to kits leave from it too (docs/coap.md)' },
  { env: 'REEF_GATEWAY_PORT', flag: 'gateway-port', def: '5683', doc: 'CoAP gateway UDP port' },
  { env: 'REEF_GATEWAY_DEADLINE_MS', flag: 'gateway-deadline', def: '30000', doc: 'Application deadline for a kit to answer (then 5.04)' },
  { env: 'REEF_GATEWAY_SESSION_TTL', flag: 'gateway-session-ttl', def: '14400', doc: 'Gateway session lifetime in seconds' },
  { env: 'REEF_GATEWAY_MAX_SESSIONS', flag: 'gateway-max-sessions', def: '10', doc: 'Gateway sessions per account' },
  { env: 'REEF_MESH_DOMAIN', flag: 'mesh-domain', def: 'mesh.reef.local', doc: 'Domain of kit host names SSN<mac>.<domain>' },
  { env: 'REEF_GATEWAY_CLOCK_SKEW', flag: 'gateway-clock-skew', def: '10', doc: 'Seconds a kit clock may be off before the gateway sets it' },
  { env: 'REEF_GATEWAY_READINGS', flag: 'gateway-readings', def: 'true', doc: "Store every reachable kit's readings as observations in sandbox" },
  { env: 'REEF_GATEWAY_KITS', flag: 'gateway-kits', def: '', doc: 'Kits at fixed addresses: MAC=host:port[,MAC=host:port...]' },
  { env: 'REEF_MQTT', flag: 'mqtt', def: 'true', doc: 'Run the MQTT broker in `reef serve` (docs/mqtt.md)' },
  { env: 'REEF_MQTT_HOST', flag: 'mqtt-host', def: '127.0.0.1', doc: 'Address the MQTT broker listens on' },
  { env: 'REEF_MQTT_PORT', flag: 'mqtt-port', def: '1883', doc: 'MQTT port; when the default is taken the next free one up to 1892 is used (0 picks any free one)' },
  { env: 'REEF_MQTT_TLS_PORT', flag: 'mqtt-tls-port', def: '8883', doc: 'MQTT over TLS port, listening only with a certificate and key' },
  { env: 'REEF_MQTT_TLS_CERT', flag: 'mqtt-tls-cert', def: '', doc: 'PEM certificate (chain) file for MQTT over TLS; unset: the HTTPS certificate (REEF_TLS_*), if any' },
  { env: 'REEF_MQTT_TLS_KEY', flag: 'mqtt-tls-key', def: '', doc: 'PEM private key file for MQTT over TLS' },
  { env: 'REEF_MQTT_RETAIN', flag: 'mqtt-retain', def: 'true', doc: 'Publish kit payloads retained: a new subscriber gets the last one at once' },
  { env: 'REEF_MQTT_RECHECK', flag: 'mqtt-recheck', def: '1', doc: "Seconds between re-checks of connected MQTT clients' accounts and tokens" },
  { env: 'REEF_MQTT_MAX_CONNECTIONS', flag: 'mqtt-max-connections', def: '10000', doc: 'MQTT connections one node accepts, plain and TLS together (keep it below the open-file limit)' },
  { env: 'REEF_MQTT_MAX_PER_ADDRESS', flag: 'mqtt-max-per-address', def: '200', doc: 'MQTT connections from one source address' },
  { env: 'REEF_MQTT_MAX_PER_ACCOUNT', flag: 'mqtt-max-per-account', def: '1000', doc: 'MQTT clients one account may have connected, and persistent sessions stored, on a node' },
  { env: 'REEF_MQTT_CONNECT_TIMEOUT', flag: 'mqtt-connect-timeout', def: '10', doc: 'Seconds an MQTT connection has to finish its TLS handshake and to send CONNECT' },
  { env: 'REEF_MQTT_MAX_KEEPALIVE', flag: 'mqtt-max-keepalive', def: '600', doc: 'Largest MQTT keep-alive in seconds; 0 (none) or more is taken as this (closed after 1.5 times it idle)' },
  { env: 'REEF_MQTT_MAX_PACKET', flag: 'mqtt-max-packet', def: '1048576', doc: 'Largest MQTT packet after CONNECT in bytes (an ingest message is also held to REEF_BODY_LIMIT)' },
  { env: 'REEF_MQTT_MAX_INFLIGHT', flag: 'mqtt-max-inflight', def: '32', doc: 'Incoming QoS 2 messages of one MQTT client awaiting their PUBREL' },
  { env: 'REEF_MQTT_MAX_QUEUE_MESSAGES', flag: 'mqtt-max-queue-messages', def: '1000', doc: 'Messages a connected MQTT client may have unsent before it is disconnected' },
  { env: 'REEF_MQTT_MAX_QUEUE_BYTES', flag: 'mqtt-max-queue-bytes', def: '4194304', doc: 'Bytes a connected MQTT client may have unsent before it is disconnected' },
  { env: 'REEF_MQTT_SESSION_MESSAGES', flag: 'mqtt-session-messages', def: '1000', doc: 'QoS 1 and 2 messages a persistent MQTT session may hold for its client' },
  { env: 'REEF_MQTT_SESSION_BYTES', flag: 'mqtt-session-bytes', def: '8388608', doc: 'Payload bytes a persistent MQTT session may hold for its client' },
  { env: 'REEF_MQTT_SESSION_EXPIRY', flag: 'mqtt-session-expiry', def: '7200', doc: 'Seconds a persistent MQTT session is kept after its client disconnects' },
  {
    env: 'REEF_REDIS_URL',
    flag: 'redis-url',
    def: '',
    doc: 'redis:// or rediss:// URL: MQTT sessions, retained messages and wills kept in Redis and messages shared by the nodes; unset keeps them in memory',
  },
  {
    env: 'REEF_ALARM_WEBHOOK_ALLOW_PRIVATE',
    flag: 'alarm-webhook-allow-private',
    def: 'false',
    doc: 'Let alarm webhooks reach loopback, private (RFC 1918, ULA) and link-local addresses; refused by default (docs/security.md)',
  },
  {
    env: 'REEF_ALARM_WEBHOOK_ALLOW_CIDRS',
    flag: 'alarm-webhook-allow-cidrs',
    def: '',
    doc: 'Comma-separated subnets (10.20.0.0/16, fd00:1::/64, or one address) alarm webhooks may reach although they are not public',
  },
] as const;

/** Parses `--name value` and `--name=value` flags into a map keyed by flag name. */
/**
 * Reads and checks every setting at once: a flag (by its SETTINGS name, as the command's argument
 * parser gave it: src/cli/args.ts) wins over the environment, which wins over the default.
 */
export function loadConfig(env: Source = process.env, flags: Readonly<Record<string, string>> = {}): Config {
  const problems: string[] = [];
  const raw = (s: (typeof SETTINGS)[number]): string => flags[s.flag] ?? env[s.env] ?? s.def;
  const get = (name: (typeof SETTINGS)[number]['env']) => SETTINGS.find((s) => s.env === name)!;

  const int = (name: (typeof SETTINGS)[number]['env'], min: number, max: number): number => {
    const s = get(name);
    const v = raw(s).trim();
    const n = Number(v);
    if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < min || n > max) {
      problems.push(`${s.env} (--${s.flag}) must be a whole number from ${min} to ${max}, got ${JSON.stringify(v)}`);
      return Number(s.def);
    }
    return n;
  };
  const bool = (name: (typeof SETTINGS)[number]['env']): boolean => {
    const s = get(name);
    const v = raw(s).trim().toLowerCase();
    if (['1', 'true', 'yes', 'on'].includes(v)) return true;
    if (['0', 'false', 'no', 'off'].includes(v)) return false;
    problems.push(`${s.env} (--${s.flag}) must be true or false, got ${JSON.stringify(v)}`);
    return s.def === 'true';
  };
  const str = (name: (typeof SETTINGS)[number]['env']): string => raw(get(name)).trim();

  const host = str('REEF_HTTP_HOST');
  if (!host) problems.push('REEF_HTTP_HOST (--host) must not be empty');
  const port = int('REEF_HTTP_PORT', 0, 65535);
  const dataDir = path.resolve(str('REEF_DATA_DIR') || './data');
  const databaseUrl = str('REEF_DATABASE_URL') || null;
  if (databaseUrl) {
    // The host list is read here so that a malformed one stops the start; the store reads it again
    // with the same function (src/core/database-url.ts) and picks the writable host.
    try {
      parseDatabaseUrl(databaseUrl);
    } catch (e) {
      if (!(e instanceof DatabaseUrlError)) throw e;
      problems.push(`REEF_DATABASE_URL (--database-url) ${e.message}`);
    }
  }
  const databaseReadUrl = str('REEF_DATABASE_READ_URL') || null;
  if (databaseReadUrl) {
    if (!databaseUrl) problems.push('REEF_DATABASE_READ_URL (--database-read-url) needs REEF_DATABASE_URL: the embedded SQLite store has no standby');
    // One host, as node-postgres reads it: a host list here would be a second failover to follow.
    try {
      if (parseDatabaseUrl(databaseReadUrl, 'read').hosts.length !== 1) problems.push('REEF_DATABASE_READ_URL (--database-read-url) must name one host (a standby, or a pooler in front of several)');
    } catch (e) {
      if (!(e instanceof DatabaseUrlError)) throw e;
      problems.push(`REEF_DATABASE_READ_URL (--database-read-url) ${e.message}`);
    }
  }
  const ttl = int('REEF_TOKEN_TTL', 10, 30 * 86400);
  const secret = str('REEF_TOKEN_SECRET') || null;
  if (secret !== null && secret.length < 32) problems.push('REEF_TOKEN_SECRET (--token-secret) must be at least 32 characters');
  const adminKey = str('REEF_ADMIN_KEY') || null;
  if (adminKey !== null && adminKey.length < 16) problems.push('REEF_ADMIN_KEY (--admin-key) must be at least 16 characters');
  const publicUrl = str('REEF_PUBLIC_URL').replace(/\/+$/, '') || null;
  if (publicUrl !== null && !/^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/.test(publicUrl)) problems.push('REEF_PUBLIC_URL (--public-url) must be an http:// or https:// URL without query');
  const logLevel = str('REEF_LOG_LEVEL').toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) problems.push(`REEF_LOG_LEVEL (--log-level) must be one of ${LOG_LEVELS.join(', ')}`);
  const logFormat = str('REEF_LOG_FORMAT').toLowerCase();
  if (!['auto', 'json', 'pretty'].includes(logFormat)) problems.push('REEF_LOG_FORMAT (--log-format) must be auto, json or pretty');
  const metricsToken = str('REEF_METRICS_TOKEN') || null;
  if (metricsToken !== null && (metricsToken.length < 16 || /\s/.test(metricsToken))) problems.push('REEF_METRICS_TOKEN (--metrics-token) must be at least 16 characters, without spaces');
  const metricsListen = parseListen(str('REEF_METRICS_LISTEN'), problems);

  const tlsCert = str('REEF_TLS_CERT');
  const tlsKey = str('REEF_TLS_KEY');
  const tls: TlsSettings = { cert: tlsCert ? path.resolve(tlsCert) : null, key: tlsKey ? path.resolve(tlsKey) : null, selfSigned: bool('REEF_TLS_SELF_SIGNED') };
  problems.push(...tlsSettingProblems(tls));

  const config: Config = {
    http: {
      host,
      port,
      trustProxy: bool('REEF_TRUST_PROXY'),
      bodyLimitBytes: int('REEF_BODY_LIMIT', 1024, 1 << 30),
      requestTimeoutMs: int('REEF_HTTP_REQUEST_TIMEOUT', 1, 3600) * 1000,
      headersTimeoutMs: int('REEF_HTTP_HEADERS_TIMEOUT', 1, 3600) * 1000,
      keepAliveTimeoutMs: int('REEF_HTTP_KEEP_ALIVE_TIMEOUT', 1, 3600) * 1000,
      maxConnections: int('REEF_HTTP_MAX_CONNECTIONS', 0, 10_000_000) || defaultMaxConnections(),
      maxConnectionsPerAddress: int('REEF_HTTP_MAX_CONNECTIONS_PER_ADDRESS', 0, 10_000_000),
      publicUrl,
    },
    tls,
    dataDir,
    databaseUrl,
    databaseReadUrl,
    databaseStartWaitMs: int('REEF_DATABASE_START_WAIT', 0, 86400) * 1000,
    tokens: { ttlSeconds: ttl, secret, issuer: 'reef' },
    adminKey,
    logLevel: logLevel as Config['logLevel'],
    logFormat: logFormat as Config['logFormat'],
    metrics: { token: metricsToken, listen: metricsListen },
    demo: bool('REEF_DEMO'),
    loginThrottle: {
      maxFailures: int('REEF_LOGIN_MAX_FAILURES', 1, 1_000_000),
      sourceMaxFailures: int('REEF_LOGIN_SOURCE_MAX_FAILURES', 1, 1_000_000),
      clientMaxFailures: int('REEF_LOGIN_CLIENT_MAX_FAILURES', 1, 1_000_000),
      windowSeconds: int('REEF_LOGIN_WINDOW', 1, 86400),
      hashConcurrency: int('REEF_LOGIN_HASH_CONCURRENCY', 1, 64),
      hashQueue: int('REEF_LOGIN_HASH_QUEUE', 0, 100_000),
      hashQueuePerSource: 8,
    },
    streams: {
      maxPerAccount: int('REEF_SSE_MAX_PER_ACCOUNT', 1, 1_000_000),
      maxPerNode: int('REEF_SSE_MAX_PER_NODE', 1, 1_000_000),
      maxBufferedBytes: int('REEF_SSE_MAX_BUFFER', 16 * 1024, 1 << 30),
    },
    quotas: {
      devices: int('REEF_QUOTA_DEVICES', 1, 1_000_000_000),
      observations: int('REEF_QUOTA_OBSERVATIONS', 1, Number.MAX_SAFE_INTEGER),
      backfill: int('REEF_QUOTA_BACKFILL', 1, Number.MAX_SAFE_INTEGER),
      solutions: int('REEF_QUOTA_SOLUTIONS', 1, 1_000_000),
      templates: int('REEF_QUOTA_TEMPLATES', 1, 1_000_000_000),
      alarmRules: int('REEF_QUOTA_ALARM_RULES', 1, 1_000_000_000),
    },
    maxObservationsPerRequest: int('REEF_MAX_OBSERVATIONS', 1, 1_000_000),
    maxObservationExtraBytes: int('REEF_MAX_OBSERVATION_EXTRA', 16, 1 << 30),
    reads: {
      maxScan: int('REEF_READ_MAX_SCAN', 100, 1_000_000_000),
      maxBuckets: int('REEF_READ_MAX_BUCKETS', 1, 1_000_000),
      maxPerAccount: int('REEF_READ_MAX_PER_ACCOUNT', 1, 10_000),
    },
    gateway: {
      enabled: bool('REEF_GATEWAY'),
      host: str('REEF_GATEWAY_HOST'),
      port: int('REEF_GATEWAY_PORT', 0, 65535),
      deadlineMs: int('REEF_GATEWAY_DEADLINE_MS', 10, 3_600_000),
      sessionTtlSeconds: int('REEF_GATEWAY_SESSION_TTL', 1, 30 * 86400),
      maxSessionsPerAccount: int('REEF_GATEWAY_MAX_SESSIONS', 1, 10_000),
      meshDomain: str('REEF_MESH_DOMAIN'),
      clockSkewSeconds: int('REEF_GATEWAY_CLOCK_SKEW', 1, 86400),
      readings: bool('REEF_GATEWAY_READINGS'),
      kits: parseKits(str('REEF_GATEWAY_KITS'), problems),
    },
    mqtt: mqttConfig(),
    alarms: { webhookAllowPrivate: bool('REEF_ALARM_WEBHOOK_ALLOW_PRIVATE'), webhookAllowCidrs: parseCidrs(str('REEF_ALARM_WEBHOOK_ALLOW_CIDRS'), problems) },
  };
  if (problems.length) throw new ConfigError(problems);
  return config;

  function mqttConfig(): Config['mqtt'] {
    const portSet = flags['mqtt-port'] !== undefined || env.REEF_MQTT_PORT !== undefined;
    const tlsPortSet = flags['mqtt-tls-port'] !== undefined || env.REEF_MQTT_TLS_PORT !== undefined;
    const tlsCert = str('REEF_MQTT_TLS_CERT') || null;
    const tlsKey = str('REEF_MQTT_TLS_KEY') || null;
    if ((tlsCert === null) !== (tlsKey === null)) problems.push('REEF_MQTT_TLS_CERT (--mqtt-tls-cert) and REEF_MQTT_TLS_KEY (--mqtt-tls-key) must be set together');
    for (const [name, file] of [
      ['REEF_MQTT_TLS_CERT (--mqtt-tls-cert)', tlsCert],
      ['REEF_MQTT_TLS_KEY (--mqtt-tls-key)', tlsKey],
    ] as const) {
      if (file !== null && !fs.existsSync(file)) problems.push(`${name}: no such file ${JSON.stringify(file)}`);
    }
    // A private key every user can read is refused, as for HTTPS (src/config/tls.ts).
    if (tlsKey !== null && fs.existsSync(tlsKey) && fs.statSync(tlsKey).mode & 0o004) {
      problems.push(`REEF_MQTT_TLS_KEY (--mqtt-tls-key): the TLS key ${tlsKey} is readable by every user; chmod 600 (or 640) it`);
    }
    const host = str('REEF_MQTT_HOST');
    if (!host) problems.push('REEF_MQTT_HOST (--mqtt-host) must not be empty');
    const redisUrl = str('REEF_REDIS_URL') || null;
    if (redisUrl !== null && !redisUrlOk(redisUrl)) problems.push('REEF_REDIS_URL (--redis-url) must be a redis:// or rediss:// URL with a host, e.g. redis://127.0.0.1:6379/0');
    return {
      enabled: bool('REEF_MQTT'),
      host,
      port: int('REEF_MQTT_PORT', 0, 65535),
      portFallback: !portSet,
      tlsPort: int('REEF_MQTT_TLS_PORT', 0, 65535),
      tlsPortFallback: !tlsPortSet,
      tlsCert: tlsCert && path.resolve(tlsCert),
      tlsKey: tlsKey && path.resolve(tlsKey),
      retain: bool('REEF_MQTT_RETAIN'),
      recheckSeconds: int('REEF_MQTT_RECHECK', 1, 86400),
      limits: {
        maxConnections: int('REEF_MQTT_MAX_CONNECTIONS', 1, 1_000_000),
        maxPerAddress: int('REEF_MQTT_MAX_PER_ADDRESS', 1, 1_000_000),
        maxPerAccount: int('REEF_MQTT_MAX_PER_ACCOUNT', 1, 1_000_000),
        connectTimeoutMs: int('REEF_MQTT_CONNECT_TIMEOUT', 1, 300) * 1000,
        maxKeepAliveSeconds: int('REEF_MQTT_MAX_KEEPALIVE', 1, 65535),
        // Room for a CONNECT-sized packet at least; never more than MQTT's own ceiling (§2.2.3).
        maxPacketBytes: int('REEF_MQTT_MAX_PACKET', 1024, 268_435_455),
        maxInflight: int('REEF_MQTT_MAX_INFLIGHT', 1, 65535),
        maxQueuedMessages: int('REEF_MQTT_MAX_QUEUE_MESSAGES', 1, 1_000_000),
        maxQueuedBytes: int('REEF_MQTT_MAX_QUEUE_BYTES', 16 * 1024, 1 << 30),
        sessionMessages: int('REEF_MQTT_SESSION_MESSAGES', 0, 1_000_000),
        sessionBytes: int('REEF_MQTT_SESSION_BYTES', 0, 1 << 30),
        sessionExpiryMs: int('REEF_MQTT_SESSION_EXPIRY', 1, 30 * 86400) * 1000,
      },
      redisUrl,
    };
  }
}

/** redis://[user:password@]host[:port][/db] or rediss:// (TLS): a host, and a database number if any. */
function redisUrlOk(text: string): boolean {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return false;
  }
  return (u.protocol === 'redis:' || u.protocol === 'rediss:') && u.hostname !== '' && /^(\/\d*)?$/.test(u.pathname) && !u.search && !u.hash;
}

/**
 * The open-files limit (soft) of this process, from /proc/self/limits on Linux; 1024 (the usual
 * default) where that cannot be read. Every connection, database file and socket takes one.
 */
export function openFilesLimit(): number {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
    if (m) return m[1] === 'unlimited' ? 1_048_576 : Number(m[1]);
  } catch {
    // not Linux: the usual default
  }
  return 1024;
}

/** REEF_HTTP_MAX_CONNECTIONS=0: three quarters of the open-files limit, the rest kept for the store, MQTT and the gateway. */
export function defaultMaxConnections(limit = openFilesLimit()): number {
  return Math.max(64, limit - Math.max(128, Math.floor(limit / 4)));
}

/** REEF_METRICS_LISTEN: `host:port` (`[v6]:port` for IPv6), or empty for none. */
function parseListen(v: string, problems: string[]): { host: string; port: number } | null {
  if (!v) return null;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):(\d{1,5})$/.exec(v);
  const port = m ? Number(m[3]) : -1;
  if (!m || port > 65535) {
    problems.push(`REEF_METRICS_LISTEN (--metrics-listen) must be host:port (e.g. 127.0.0.1:9464, [::1]:9464), got ${JSON.stringify(v)}`);
    return null;
  }
  return { host: (m[1] ?? m[2])!, port };
}

/** `MAC=host:port,...` → fixed kit addresses; each bad entry is one problem. */
function parseKits(v: string, problems: string[]): { mac: string; host: string; port: number }[] {
  if (!v) return [];
  const kits: { mac: string; host: string; port: number }[] = [];
  for (const entry of v
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const m = /^([0-9a-fA-F:-]{16,23})=(.+):(\d{1,5})$/.exec(entry);
    const mac = m ? m[1]!.replace(/[:-]/g, '').toLowerCase() : '';
    const port = m ? Number(m[3]) : 0;
    if (!m || !/^[0-9a-f]{16}$/.test(mac) || port < 1 || port > 65535) {
      problems.push(`REEF_GATEWAY_KITS (--gateway-kits) entry ${JSON.stringify(entry)} must be MAC=host:port with a 16-hex-digit MAC`);
      continue;
    }
    kits.push({ mac, host: m[2]!.replace(/^\[|\]$/g, ''), port });
  }
  return kits;
}

/** A config for tests and embedding: defaults, then the given overrides. */
export function testConfig(overrides: Partial<Config> & { dataDir: string }): Config {
  const base = loadConfig({ REEF_LOG_LEVEL: 'silent', REEF_DEMO: 'false', REEF_HTTP_PORT: '0', REEF_GATEWAY_PORT: '0', REEF_MQTT_PORT: '0', REEF_MQTT_TLS_PORT: '0' }, {});
  return { ...base, ...overrides };
}
