// The one way the PostgreSQL backend connects: to whichever host of REEF_DATABASE_URL's list is
// writable now (docs/operations.md "PostgreSQL standby and failover"). The pool, the LISTEN
// connection (src/events/pg-bus.ts), the leader's session (src/jobs/pg-leader.ts) and the group
// writer's pipelined connection (writer.ts) are all HostClients of one PgHosts.
//
// As libpq does with target_session_attrs=read-write: hosts are tried in the list's order (the one
// last found writable first), and a host is writable when it is neither in recovery (a standby) nor
// read-only by default_transaction_read_only. PostgreSQL 14 and later report both at connection
// start (in_hot_standby, default_transaction_read_only: GUC_REPORT), so a connection to a
// known-writable host costs no extra round trip; on older servers one query asks.
//
// The host found writable is remembered: new connections go straight to it. It is given up when a
// connection to it cannot be made, or when it turns out read-only (at connection start, or a write
// answered SQLSTATE 25006 read_only_sql_transaction); the next connection looks through the list
// again. A host given up as read-only or refusing has its open connections closed, pooled ones
// included, so that nothing keeps reading from a standby or waiting on a dead primary.
import pg from 'pg';
import { type DatabaseHost, describeHostError, hostLabel, noWritableHostMessage, parseDatabaseUrl } from '../../core/database-url.ts';

/** No host of the list is writable now: SQLSTATE 08001 (sqlclient_unable_to_establish_sqlconnection), which the store answers as STORE_UNAVAILABLE. */
export class NoWritableHostError extends Error {
  readonly code = '08001';
  constructor(
    readonly states: readonly { host: DatabaseHost; state: string }[],
    /** A host refused the login or has no such database: waiting will not change it (PostgresStore's start-up wait). */
    readonly misconfigured = false,
  ) {
    super(noWritableHostMessage(states));
    this.name = 'NoWritableHostError';
  }
}

/** A host answered but is read-only: SQLSTATE 25006, as PostgreSQL reports a write there. */
export class ReadOnlyHostError extends Error {
  readonly code = '25006';
  constructor(
    readonly host: DatabaseHost,
    readonly state: string,
  ) {
    super(`${hostLabel(host)} ${state}`);
    this.name = 'ReadOnlyHostError';
  }
}

interface Host extends DatabaseHost {
  /** The URL naming this host only (settings of REEF_DATABASE_URL kept). */
  url: string;
  /** Connections to it open now. */
  clients: Set<HostClient>;
}

export interface PgHostsOptions {
  /** How long one connection attempt to one host may take. */
  connectTimeoutMs?: number;
  /** Told when the writable host changes or is given up (the backend logs it). */
  onChange?: (message: string, detail: { host: string; state?: string }) => void;
}

/** Warned when the host taken has no synchronous standby. */
export const NO_SYNC_STANDBY = 'PostgreSQL host in use has no synchronous standby: what it acknowledges is on it alone until one is named in synchronous_standby_names';

/** A failed search is answered again for this long without searching (a burst of requests during a failover is one search, not one each). */
const SEARCH_AGAIN_AFTER_MS = 100;

/** Errors that say the host is gone, not merely slow: its open connections are closed with it. */
const GONE = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND']);

/** Why a connected host may not be written to, or null: from what it reported at start-up, or by asking. */
async function readOnlyState(c: pg.Client, reported: ReadonlyMap<string, string>): Promise<string | null> {
  let standby = reported.get('in_hot_standby');
  let readOnly = reported.get('default_transaction_read_only');
  if (standby === undefined || readOnly === undefined) {
    // A server before 14 reports neither: ask (libpq asks `SHOW transaction_read_only` there).
    const r = await c.query("SELECT pg_is_in_recovery() AS standby, current_setting('default_transaction_read_only') AS ro");
    standby = r.rows[0]?.standby ? 'on' : 'off';
    readOnly = r.rows[0]?.ro as string;
  }
  if (standby === 'on') return 'read-only (standby)';
  if (readOnly === 'on') return 'read-only (default_transaction_read_only = on)';
  return null;
}

/**
 * A pg.Client whose connect() goes to the host of its PgHosts that is writable now, and refuses a
 * host that turns out read-only. Used exactly as a pg.Client (and as pg.Pool's Client).
 */
export class HostClient extends pg.Client {
  /** What the server reported at connection start (ParameterStatus). */
  readonly reported = new Map<string, string>();
  /** The host this client is connected (or connecting) to. */
  target: Host | null = null;
  private readonly hostSet: PgHosts;

  constructor(config: pg.ClientConfig & { hostSet: PgHosts }) {
    super(config);
    this.hostSet = config.hostSet;
    this.connection.on('parameterStatus', (m: { parameterName: string; parameterValue: string }) => this.reported.set(m.parameterName, m.parameterValue));
    // A write refused as read-only, whoever sent it: the host is no longer the primary.
    this.connection.on('errorMessage', (m: { code?: string }) => {
      if (m.code === '25006' && this.target) this.hostSet.readOnly(this.target, 'read-only (refused a write)');
    });
  }

  override connect(): Promise<pg.Client>;
  override connect(callback: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): void;
  override connect(callback?: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): Promise<pg.Client> | undefined {
    const opened = this.open();
    if (!callback) return opened;
    // pg.Pool connects with a callback (err, client).
    const cb = callback as (err: Error | null, c?: pg.Client) => void;
    opened.then(
      (c) => cb(null, c),
      (e: Error) => cb(e),
    );
    return undefined;
  }

  private async open(): Promise<pg.Client> {
    const h = await this.hostSet.writable();
    // The pool gave up waiting meanwhile (its connectionTimeoutMillis destroys the socket).
    if (this.connection.stream.destroyed) throw new Error('timeout exceeded when trying to connect');
    this.target = h;
    // pg.Client connects to these (Connection.connect(port, host), also the TLS server name).
    this.host = h.host;
    this.port = h.port;
    const params = (this as unknown as { connectionParameters: { host: string; port: number } }).connectionParameters;
    params.host = h.host;
    params.port = h.port;
    // Until connect() has answered, nobody may be listening to this client's errors (pg.Pool
    // listens from its callback on), and the server's next message can arrive in the same read as
    // the end of the start-up (a FATAL from a shutdown): held here, and the connect fails with it.
    let broken: Error | undefined;
    const hold = (e: Error) => {
      broken ??= e;
    };
    this.on('error', hold);
    try {
      try {
        await super.connect();
      } catch (e) {
        this.hostSet.unreachable(h, e);
        throw e;
      }
      try {
        const state = await readOnlyState(this, this.reported);
        if (broken) throw broken;
        if (state) {
          this.hostSet.readOnly(h, state);
          throw new ReadOnlyHostError(h, state);
        }
      } catch (e) {
        await this.end().catch(() => undefined);
        throw e;
      }
    } finally {
      this.off('error', hold);
    }
    h.clients.add(this);
    this.once('end', () => h.clients.delete(this));
    return this;
  }
}

/** The hosts of one database URL and which of them is writable now. */
export class PgHosts {
  readonly hosts: readonly Host[];
  /** The host new connections go to; null: look through the list first. */
  private current: Host | null = null;
  /** The host last found writable: tried first when looking again. */
  private lastGood: Host | null = null;
  private searching: Promise<Host> | null = null;
  private failedSearch: { at: number; error: NoWritableHostError } | null = null;
  private readonly connectTimeoutMs: number;

  constructor(
    connectionString: string,
    private readonly opts: PgHostsOptions = {},
  ) {
    const parsed = parseDatabaseUrl(connectionString);
    this.hosts = parsed.hosts.map((h) => ({ ...h, url: parsed.urlFor(h), clients: new Set<HostClient>() }));
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 5000;
    // One host: nothing to choose. Its connections still check it is writable.
    if (this.hosts.length === 1) this.current = this.hosts[0]!;
  }

  /** A client, not yet connected, whose connect() goes to the writable host. `config` adds to the URL's settings. */
  client(config: pg.ClientConfig = {}): pg.Client {
    return new HostClient({ connectionString: this.hosts[0]!.url, connectionTimeoutMillis: this.connectTimeoutMs, ...config, hostSet: this });
  }

  /** A pool of HostClients. */
  pool(config: pg.PoolConfig = {}): pg.Pool {
    const hostSet = this;
    const Client = class extends HostClient {
      constructor(c: pg.ClientConfig) {
        super({ ...c, hostSet });
      }
    };
    return new pg.Pool({ connectionString: this.hosts[0]!.url, connectionTimeoutMillis: this.connectTimeoutMs, ...config, Client: Client as unknown as new () => pg.ClientBase });
  }

  /** The writable host: the one in use, or the first found writable, the last good one tried first. */
  writable(): Promise<Host> {
    if (this.current) return Promise.resolve(this.current);
    const f = this.failedSearch;
    if (f && Date.now() - f.at < SEARCH_AGAIN_AFTER_MS) return Promise.reject(f.error);
    this.searching ??= this.search().finally(() => (this.searching = null));
    return this.searching;
  }

  /**
   * Tries every host (the one in use or last good first, then the list's order) and answers the
   * first writable one; NoWritableHostError, naming what each host is, when there is none. Always
   * looks, even with one host: the start-up check (PostgresStore.migrate).
   */
  async search(): Promise<Host> {
    const first = this.current ?? this.lastGood;
    const order = first ? [first, ...this.hosts.filter((h) => h !== first)] : [...this.hosts];
    const states: { host: Host; state: string }[] = [];
    let misconfigured = false;
    for (const h of order) {
      const found = await this.probe(h);
      if (found === null) {
        this.use(h);
        return h;
      }
      states.push({ host: h, state: found.state });
      misconfigured ||= found.misconfigured;
    }
    // Reported in the list's order, whatever order they were tried in.
    states.sort((a, b) => this.hosts.indexOf(a.host) - this.hosts.indexOf(b.host));
    const error = new NoWritableHostError(
      states.map((s) => ({ host: { host: s.host.host, port: s.host.port }, state: s.state })),
      misconfigured,
    );
    this.failedSearch = { at: Date.now(), error };
    if (this.hosts.length > 1) this.current = null;
    throw error;
  }

  /**
   * null when the host is writable, else what it is, and whether that is the settings' fault (the
   * login refused, no such database) rather than the host's state. A connection of its own, closed
   * at once. With several hosts, a writable one is also asked for its synchronous_standby_names (for use()).
   */
  private async probe(h: Host): Promise<{ state: string; misconfigured: boolean } | null> {
    const c = new pg.Client({ connectionString: h.url, connectionTimeoutMillis: this.connectTimeoutMs, application_name: 'reef-probe' });
    const reported = new Map<string, string>();
    c.connection.on('parameterStatus', (m: { parameterName: string; parameterValue: string }) => reported.set(m.parameterName, m.parameterValue));
    c.on('error', () => undefined); // a failure after connecting surfaces in the query
    try {
      await c.connect();
      const state = await readOnlyState(c, reported);
      if (state === null && this.hosts.length > 1) {
        const r = await c.query("SELECT current_setting('synchronous_standby_names') AS s").catch(() => null);
        this.syncNames.set(h, r ? String(r.rows[0]?.s ?? '') : null);
      }
      return state === null ? null : { state, misconfigured: false };
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      return { state: describeHostError(e), misconfigured: code === '28P01' || code === '28000' || code === '3D000' };
    } finally {
      // Not awaited: the answer is known, and the next host need not wait for this one to close.
      c.end().catch(() => undefined);
    }
  }

  /** A writable host's synchronous_standby_names when last probed; null: could not be read. */
  private readonly syncNames = new Map<Host, string | null>();

  private use(h: Host): void {
    const before = this.current;
    this.current = h;
    this.lastGood = h;
    this.failedSearch = null;
    if (before === h || this.hosts.length === 1) return;
    this.opts.onChange?.('PostgreSQL host in use', { host: hostLabel(h) });
    // A promoted standby has none until a rebuilt one is named: a second failure then loses
    // acknowledged uploads (docs/operations.md "High availability").
    if (this.syncNames.get(h) === '') this.opts.onChange?.(NO_SYNC_STANDBY, { host: hostLabel(h), state: "synchronous_standby_names = ''" });
  }

  /**
   * A connection to `h` could not be made. Another host is looked for on the next connection; when
   * the host is gone (refused, unreachable) its open connections are closed too.
   */
  unreachable(h: Host, e: unknown): void {
    const code = String((e as { code?: unknown })?.code ?? '');
    this.giveUp(h, describeHostError(e), GONE.has(code));
  }

  /** `h` answered read-only: another host is looked for, and its open connections are closed. */
  readOnly(h: Host, state: string): void {
    this.giveUp(h, state, true);
  }

  private giveUp(h: Host, state: string, closeOpen: boolean): void {
    if (this.hosts.length > 1 && this.current === h) {
      this.current = null;
      this.opts.onChange?.('PostgreSQL host given up; looking for the writable one', { host: hostLabel(h), state });
    }
    if (!closeOpen) return;
    for (const c of h.clients) {
      h.clients.delete(c);
      // Destroying the socket ends the client as PostgreSQL ending it would: its owner (the pool,
      // the bus, the leader, the writer) sees a broken connection and opens a new one.
      c.connection.stream.destroy();
    }
  }
}
