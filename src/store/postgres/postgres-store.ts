// The scale-out store: PostgreSQL through pg's connection pool. Any number of stateless Reef nodes
// may share one database; everything they must agree on (accounts, signing keys, devices,
// observations, job state) lives here. Schema and partitioning: migrations.ts.
import pg from 'pg';
import { ReefError } from '../../core/errors.ts';
import type { Account, DeviceRecord, DeviceTemplateRecord, ObservationRecord } from '../../core/types.ts';
import type {
  Bucket,
  BucketQuery,
  InsertResult,
  MaintenanceReport,
  ManyInsertResult,
  NewDevice,
  ObservationPage,
  ObservationQuery,
  SigningKey,
  SolutionObservationPage,
  SolutionObservationQuery,
  Store,
} from '../store.ts';
import { solutionPage } from '../store.ts';
import { translate } from './errors.ts';
import { LOCK_MIGRATE, LOCK_PARTITIONS, MIGRATIONS } from './migrations.ts';
import { PartitionMap, parseRangeBound } from './partitions.ts';

export interface PostgresOptions {
  connectionString: string;
  /** Pool size per node (pg default 10). */
  maxConnections?: number;
  /** How long a request waits for a pooled connection before STORE_UNAVAILABLE. */
  connectTimeoutMs?: number;
  /** Told about errors of idle pooled connections (a restart of PostgreSQL), which are otherwise harmless. */
  onIdleError?: (e: Error) => void;
}

type Row = Record<string, any>;
const DAY = 86_400_000;

// bigint (int8) columns are epoch milliseconds and counts: well inside Number's exact range.
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20 && format !== 'binary' ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

function accountFromRow(r: Row): Account {
  return {
    tenantId: r.tenant_id,
    name: r.name,
    groupId: r.group_id,
    clientId: r.client_id,
    secretHash: r.secret_hash,
    disabled: r.disabled,
    createdAt: r.created_at,
  };
}

function deviceFromRow(r: Row): DeviceRecord {
  const d: DeviceRecord = {
    id: r.id,
    deviceType: r.device_type,
    domainInfo: r.domain_info,
    tenantId: r.tenant_id,
    groupId: r.group_id,
    solution: r.solution,
    mac: r.mac ?? null,
    createdAt: r.created_at,
  };
  if (r.provisioning_info) d.provisioningInfo = r.provisioning_info;
  return d;
}

const TEMPLATE_COLS = 'id, group_id, solution, name, sensors, created_at, updated_at';

function templateFromRow(r: Row): DeviceTemplateRecord {
  return { id: r.id, name: r.name, sensors: r.sensors, groupId: r.group_id, solution: r.solution, createdAt: Number(r.created_at), updatedAt: Number(r.updated_at) };
}

function obsFromRow(r: Row): ObservationRecord {
  return { ts: r.ts, temperature: r.temperature ?? null, extra: r.extra ?? null };
}

/** A PostgreSQL array literal of numbers, built directly (pg's generic array encoder is slower). */
function numArray(xs: (number | null)[]): string {
  let s = '{';
  for (let i = 0; i < xs.length; i++) {
    if (i) s += ',';
    const x = xs[i];
    s += x === null || x === undefined ? 'NULL' : String(x);
  }
  return s + '}';
}

const DEVICE_COLS = 'id, tenant_id, group_id, solution, device_type, domain_info, provisioning_info, mac, created_at';

// One round trip per batch: find (and share-lock, against a concurrent delete or retention change)
// the device, upsert every row through unnest, and move the device's latest forward, all in one
// statement and therefore one transaction.
const INSERT_BATCH = `
WITH d AS (SELECT pk, tier FROM devices WHERE id = $1 FOR SHARE),
o AS (
  INSERT INTO observations (device_pk, ts, temperature, extra, tier)
  SELECT d.pk, u.ts, u.t, NULLIF(u.x, 'null'::jsonb), d.tier
  FROM d, ROWS FROM (unnest($2::bigint[]), unnest($3::float8[]), jsonb_array_elements($4::jsonb)) AS u(ts, t, x)
  ON CONFLICT (device_pk, ts, tier) DO UPDATE SET temperature = excluded.temperature, extra = excluded.extra
),
l AS (
  INSERT INTO latest (device_pk, ts, temperature, extra)
  SELECT d.pk, $5::bigint, $6::float8, $7::jsonb FROM d
  ON CONFLICT (device_pk) DO UPDATE SET ts = excluded.ts, temperature = excluded.temperature, extra = excluded.extra
  WHERE excluded.ts >= latest.ts
)
SELECT pk, tier FROM d`;

export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  readonly pool: pg.Pool;
  private readonly parts = new PartitionMap();
  private partsLoaded = false;

  constructor(private readonly opts: PostgresOptions) {
    this.pool = new pg.Pool({
      connectionString: opts.connectionString,
      max: opts.maxConnections ?? 10,
      connectionTimeoutMillis: opts.connectTimeoutMs ?? 5000,
      idleTimeoutMillis: 30_000,
      keepAlive: true,
      application_name: 'reef',
      types,
    });
    // An idle connection dies when PostgreSQL restarts; without a listener pg would throw it
    // out of the process. The pool drops it and opens a new one on the next request.
    this.pool.on('error', (e) => opts.onIdleError?.(e));
  }

  /** The connection string, for companions that need their own connection (LISTEN, leadership). */
  get connectionString(): string {
    return this.opts.connectionString;
  }

  private async q(text: string, values?: unknown[], name?: string): Promise<pg.QueryResult<Row>> {
    try {
      return await this.pool.query(name ? { name, text, values } : { text, values });
    } catch (e) {
      translate(e);
    }
  }

  /** Runs f in one transaction on one pooled connection. */
  private async tx<T>(f: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (e) {
      translate(e);
    }
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const out = await f(client);
      await client.query('COMMIT');
      return out;
    } catch (e) {
      try {
        await client.query('ROLLBACK');
      } catch (re) {
        broken = re as Error; // the connection is gone: do not return it to the pool
      }
      translate(e);
    } finally {
      client.release(broken);
    }
  }

  async migrate(): Promise<void> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (e) {
      translate(e);
    }
    let broken: Error | undefined;
    try {
      // A session lock: a second node starting at the same moment waits here, then finds every
      // migration applied. Each migration commits with its version row, so a crash midway leaves
      // either all of a migration or none of it.
      await client.query('SELECT pg_advisory_lock($1)', [LOCK_MIGRATE.toString()]);
      try {
        await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)');
        const done = new Set((await client.query('SELECT version FROM schema_migrations')).rows.map((r) => r.version as number));
        for (const m of MIGRATIONS) {
          if (done.has(m.version)) continue;
          await client.query('BEGIN');
          try {
            await client.query(m.sql);
            await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
            await client.query('COMMIT');
          } catch (e) {
            await client.query('ROLLBACK');
            throw e;
          }
        }
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [LOCK_MIGRATE.toString()]);
      }
    } catch (e) {
      broken = e as Error;
      translate(e);
    } finally {
      client.release(broken);
    }
    await this.loadPartitions();
    await this.ensureRanges(this.parts.ahead(Date.now()));
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  async ping(): Promise<void> {
    await this.q('SELECT 1');
  }

  // ---- partitions -------------------------------------------------------------------------

  /** Reads the partition tree from the catalogue into the cache. */
  async loadPartitions(): Promise<void> {
    const r = await this.q(`
      SELECT c.relname AS name, p.level, pc.relname AS parent, pg_get_expr(c.relpartbound, c.oid) AS bound
      FROM pg_partition_tree('observations') p
      JOIN pg_class c ON c.oid = p.relid
      LEFT JOIN pg_class pc ON pc.oid = p.parentrelid
      WHERE p.level > 0`);
    const rows: { tier: number; start: number | null; end: number | null }[] = [];
    for (const x of r.rows) {
      if (x.level === 1) {
        const m = /^obs_t(\d+)$/.exec(x.name);
        if (m) rows.push({ tier: Number(m[1]), start: null, end: null });
      } else if (x.level === 2) {
        const m = /^obs_t(\d+)$/.exec(x.parent ?? '');
        const range = parseRangeBound(x.bound ?? '');
        if (m && range) rows.push({ tier: Number(m[1]), ...range });
      }
    }
    this.parts.load(rows);
    this.partsLoaded = true;
  }

  /** Makes the given range partitions (idempotent; one round trip), and notes them in the cache. */
  private async ensureRanges(ranges: { tier: number; start: number; end: number }[], client?: pg.PoolClient): Promise<number> {
    if (ranges.length === 0) return 0;
    const sql = `SELECT reef_ensure_partition(t, s, e) AS made FROM unnest($1::int[], $2::bigint[], $3::bigint[]) AS u(t, s, e)`;
    const values = [numArray(ranges.map((r) => r.tier)), numArray(ranges.map((r) => r.start)), numArray(ranges.map((r) => r.end))];
    let res: pg.QueryResult<Row>;
    if (client) res = await client.query(sql, values);
    else res = await this.q(sql, values);
    for (const r of ranges) this.parts.add(r.tier, { start: r.start, end: r.end });
    return res.rows.filter((r) => r.made).length;
  }

  // ---- accounts -----------------------------------------------------------------------------

  async createAccount(a: Account): Promise<Account> {
    await this.q('INSERT INTO accounts (tenant_id, name, group_id, client_id, secret_hash, disabled, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      a.tenantId,
      a.name,
      a.groupId,
      a.clientId,
      a.secretHash,
      a.disabled,
      a.createdAt,
    ]);
    return a;
  }
  async getAccountByClientId(clientId: string): Promise<Account | null> {
    const r = await this.q('SELECT * FROM accounts WHERE client_id = $1', [clientId], 'account-by-client');
    return r.rows[0] ? accountFromRow(r.rows[0]) : null;
  }
  async getAccountByTenantId(tenantId: string): Promise<Account | null> {
    const r = await this.q('SELECT * FROM accounts WHERE tenant_id = $1', [tenantId], 'account-by-tenant');
    return r.rows[0] ? accountFromRow(r.rows[0]) : null;
  }
  async listAccounts(): Promise<Account[]> {
    return (await this.q('SELECT * FROM accounts ORDER BY created_at, tenant_id')).rows.map(accountFromRow);
  }
  async setAccountSecret(tenantId: string, secretHash: string): Promise<void> {
    if ((await this.q('UPDATE accounts SET secret_hash = $1 WHERE tenant_id = $2', [secretHash, tenantId])).rowCount === 0) throw new ReefError('ACCOUNT_NOT_FOUND');
  }
  async setAccountDisabled(tenantId: string, disabled: boolean): Promise<void> {
    if ((await this.q('UPDATE accounts SET disabled = $1 WHERE tenant_id = $2', [disabled, tenantId])).rowCount === 0) throw new ReefError('ACCOUNT_NOT_FOUND');
  }
  async countAccounts(): Promise<number> {
    return (await this.q('SELECT count(*) AS n FROM accounts')).rows[0]!.n;
  }

  // ---- signing keys -------------------------------------------------------------------------

  async listSigningKeys(): Promise<SigningKey[]> {
    const r = await this.q('SELECT kid, secret, created_at FROM signing_keys ORDER BY created_at, kid');
    return r.rows.map((x) => ({ kid: x.kid, secret: x.secret, createdAt: x.created_at }));
  }
  async addSigningKey(k: SigningKey): Promise<void> {
    await this.q('INSERT INTO signing_keys (kid, secret, created_at) VALUES ($1, $2, $3) ON CONFLICT (kid) DO NOTHING', [k.kid, k.secret, k.createdAt]);
  }

  async deleteSigningKey(kid: string): Promise<void> {
    await this.q('DELETE FROM signing_keys WHERE kid = $1', [kid]);
  }

  // ---- solutions and devices ----------------------------------------------------------------

  async solutionExists(groupId: string, solution: string): Promise<boolean> {
    return (await this.q('SELECT 1 FROM solutions WHERE group_id = $1 AND name = $2', [groupId, solution], 'solution-exists')).rowCount! > 0;
  }

  async solutionVersion(groupId: string, solution: string): Promise<number | null> {
    const r = await this.q('SELECT version FROM solutions WHERE group_id = $1 AND name = $2', [groupId, solution], 'solution-version');
    return r.rows[0] ? Number(r.rows[0].version) : null;
  }

  async ensureSolution(groupId: string, solution: string): Promise<void> {
    await this.q('INSERT INTO solutions (group_id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (group_id, name) DO NOTHING', [groupId, solution, Date.now()], 'ensure-solution');
  }

  async createDevice(d: NewDevice): Promise<DeviceRecord> {
    const now = Date.now();
    // The solution row is made (or locked, against a concurrent retention change) in the same
    // statement, and the device takes the solution's retention tier.
    await this.q(
      `WITH s AS (
         INSERT INTO solutions (group_id, name, created_at, version) VALUES ($3, $4, $9, 1)
         ON CONFLICT (group_id, name) DO UPDATE SET version = solutions.version + 1
         RETURNING retention_days)
       INSERT INTO devices (${DEVICE_COLS}, tier)
       SELECT $1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, COALESCE(s.retention_days, 0) FROM s`,
      [d.id, d.tenantId, d.groupId, d.solution, d.deviceType, JSON.stringify(d.domainInfo), d.provisioningInfo ? JSON.stringify(d.provisioningInfo) : null, d.mac ?? null, now],
    );
    const rec: DeviceRecord = {
      id: d.id,
      deviceType: d.deviceType,
      domainInfo: d.domainInfo,
      tenantId: d.tenantId,
      groupId: d.groupId,
      solution: d.solution,
      mac: d.mac ?? null,
      createdAt: now,
    };
    if (d.provisioningInfo) rec.provisioningInfo = d.provisioningInfo;
    return rec;
  }

  async listTemplates(groupId: string, solution: string): Promise<DeviceTemplateRecord[]> {
    const r = await this.q(`SELECT ${TEMPLATE_COLS} FROM device_templates WHERE group_id = $1 AND solution = $2 ORDER BY pk`, [groupId, solution], 'list-templates');
    return r.rows.map(templateFromRow);
  }
  async getTemplate(groupId: string, solution: string, id: string): Promise<DeviceTemplateRecord | null> {
    const r = await this.q(`SELECT ${TEMPLATE_COLS} FROM device_templates WHERE group_id = $1 AND solution = $2 AND id = $3`, [groupId, solution, id], 'get-template');
    return r.rows[0] ? templateFromRow(r.rows[0]) : null;
  }
  async createTemplate(t: { id: string; groupId: string; solution: string; name: string; sensors: unknown[] }, maxPerSolution: number): Promise<DeviceTemplateRecord> {
    const now = Date.now();
    return this.tx(async (c) => {
      // The solution row, made or locked first, serialises creators of one solution: the count and
      // the insert then agree (no two writers past the cap).
      await c.query('INSERT INTO solutions (group_id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (group_id, name) DO NOTHING', [t.groupId, t.solution, now]);
      await c.query('SELECT 1 FROM solutions WHERE group_id = $1 AND name = $2 FOR UPDATE', [t.groupId, t.solution]);
      const n = (await c.query('SELECT count(*)::int AS n FROM device_templates WHERE group_id = $1 AND solution = $2', [t.groupId, t.solution])).rows[0].n as number;
      if (n >= maxPerSolution) throw new ReefError('TOO_MANY_TEMPLATES', `a solution holds at most ${maxPerSolution} device templates`);
      await c.query('INSERT INTO device_templates (id, group_id, solution, name, sensors, created_at, updated_at) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $6)', [
        t.id,
        t.groupId,
        t.solution,
        t.name,
        JSON.stringify(t.sensors),
        now,
      ]);
      return { ...t, createdAt: now, updatedAt: now };
    });
  }
  async updateTemplate(groupId: string, solution: string, id: string, t: { name: string; sensors: unknown[] }): Promise<DeviceTemplateRecord | null> {
    const r = await this.q(
      `UPDATE device_templates SET name = $4, sensors = $5::jsonb, updated_at = $6 WHERE group_id = $1 AND solution = $2 AND id = $3 RETURNING ${TEMPLATE_COLS}`,
      [groupId, solution, id, t.name, JSON.stringify(t.sensors), Date.now()],
      'update-template',
    );
    return r.rows[0] ? templateFromRow(r.rows[0]) : null;
  }
  async deleteTemplate(groupId: string, solution: string, id: string): Promise<DeviceTemplateRecord | null> {
    const r = await this.q(`DELETE FROM device_templates WHERE group_id = $1 AND solution = $2 AND id = $3 RETURNING ${TEMPLATE_COLS}`, [groupId, solution, id], 'delete-template');
    return r.rows[0] ? templateFromRow(r.rows[0]) : null;
  }

  async listDevices(groupId: string, solution: string, deviceType?: string): Promise<DeviceRecord[]> {
    const r =
      deviceType === undefined
        ? await this.q(`SELECT ${DEVICE_COLS} FROM devices WHERE group_id = $1 AND solution = $2 ORDER BY pk`, [groupId, solution], 'list-devices')
        : await this.q(`SELECT ${DEVICE_COLS} FROM devices WHERE group_id = $1 AND solution = $2 AND device_type = $3 ORDER BY pk`, [groupId, solution, deviceType], 'list-devices-type');
    return r.rows.map(deviceFromRow);
  }
  async countDevices(tenantId: string): Promise<number> {
    const r = await this.q('SELECT count(*)::int AS n FROM devices WHERE tenant_id = $1', [tenantId], 'count-devices');
    return (r.rows[0]?.n as number | undefined) ?? 0;
  }
  async countObservationsByTenant(): Promise<Map<string, number>> {
    const r = await this.q('SELECT d.tenant_id AS t, count(*)::bigint AS n FROM observations o JOIN devices d ON d.pk = o.device_pk GROUP BY d.tenant_id', [], 'count-observations');
    return new Map(r.rows.map((row) => [String(row.t), Number(row.n)] as [string, number]));
  }
  async getDevice(groupId: string, solution: string, id: string): Promise<DeviceRecord | null> {
    const r = await this.q(`SELECT ${DEVICE_COLS} FROM devices WHERE group_id = $1 AND solution = $2 AND id = $3`, [groupId, solution, id], 'get-device');
    return r.rows[0] ? deviceFromRow(r.rows[0]) : null;
  }
  async getDeviceByMac(mac: string): Promise<DeviceRecord | null> {
    const r = await this.q(`SELECT ${DEVICE_COLS} FROM devices WHERE mac = $1`, [mac], 'device-by-mac');
    return r.rows[0] ? deviceFromRow(r.rows[0]) : null;
  }
  async deleteDevice(groupId: string, solution: string, id: string): Promise<boolean> {
    return this.tx(async (c) => {
      // FOR UPDATE waits for inserts in flight (they hold FOR SHARE) so none leaves orphans behind.
      const r = await c.query('SELECT pk, tier FROM devices WHERE group_id = $1 AND solution = $2 AND id = $3 FOR UPDATE', [groupId, solution, id]);
      const dev = r.rows[0];
      if (!dev) return false;
      await c.query('DELETE FROM observations WHERE tier = $1 AND device_pk = $2', [dev.tier, dev.pk]);
      await c.query('DELETE FROM latest WHERE device_pk = $1', [dev.pk]);
      await c.query('DELETE FROM devices WHERE pk = $1', [dev.pk]);
      await c.query('UPDATE solutions SET version = version + 1 WHERE group_id = $1 AND name = $2', [groupId, solution]);
      return true;
    });
  }

  // ---- observations -------------------------------------------------------------------------

  async insertObservations(deviceId: string, batch: ObservationRecord[]): Promise<InsertResult> {
    if (!this.partsLoaded) await this.loadPartitions();
    // ON CONFLICT cannot touch one row twice in a statement: collapse repeated timestamps first,
    // the later one winning, as when the rows are written one after another.
    let rows = batch;
    let ascending = true;
    for (let i = 1; i < batch.length && ascending; i++) ascending = batch[i]!.ts > batch[i - 1]!.ts;
    if (!ascending) {
      // Only an unordered batch can repeat a timestamp.
      const seen = new Map<number, number>();
      for (let i = 0; i < batch.length; i++) seen.set(batch[i]!.ts, i);
      if (seen.size < batch.length) rows = [...seen.values()].sort((a, b) => a - b).map((i) => batch[i]!);
    }

    let newest: ObservationRecord | undefined;
    let anyExtra = false;
    const ts: number[] = new Array(rows.length);
    const temps: (number | null)[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const o = rows[i]!;
      ts[i] = o.ts;
      temps[i] = o.temperature;
      if (o.extra) anyExtra = true;
      if (!newest || o.ts >= newest.ts) newest = o;
    }
    // ROWS FROM pads a shorter function with NULLs: with no free-form fields, send an empty list.
    const extras = anyExtra ? JSON.stringify(rows.map((o) => o.extra ?? null)) : '[]';

    const missing = this.parts.missing(ts, Date.now());
    if (missing.length) await this.ensureRanges(missing);

    const r = await this.q(
      INSERT_BATCH,
      [deviceId, numArray(ts), numArray(temps), extras, newest?.ts ?? null, newest?.temperature ?? null, newest?.extra ? JSON.stringify(newest.extra) : null],
      'insert-batch',
    );
    const dev = r.rows[0];
    if (!dev) throw new ReefError('DEVICE_NOT_FOUND');
    if (!this.parts.hasTier(dev.tier)) {
      // A retention tier made by another node: learn it, and make this batch's partitions there
      // (which moves the rows just written out of its default partition).
      await this.loadPartitions();
      await this.ensureRanges(this.parts.missing(ts, Date.now()).filter((m) => m.tier === dev.tier));
    }
    return { written: batch.length };
  }

  async insertObservationsMany(items: { deviceId: string; batch: ObservationRecord[] }[]): Promise<ManyInsertResult> {
    const missing: string[] = [];
    let written = 0;
    for (const { deviceId, batch } of items) {
      try {
        written += (await this.insertObservations(deviceId, batch)).written;
      } catch (e) {
        if (e instanceof ReefError && e.code === 'DEVICE_NOT_FOUND') missing.push(deviceId);
        else throw e;
      }
    }
    return { written, missing };
  }

  async latestObservations(groupId: string, solution: string) {
    const r = await this.q(
      `SELECT d.id, l.ts, l.temperature, l.extra FROM devices d JOIN latest l ON l.device_pk = d.pk
       WHERE d.group_id = $1 AND d.solution = $2 ORDER BY d.pk`,
      [groupId, solution],
      'latest-of-solution',
    );
    return r.rows.map((x) => ({ deviceId: x.id as string, observation: obsFromRow(x) }));
  }

  private async devicePk(deviceId: string): Promise<{ pk: number; tier: number }> {
    const r = await this.q('SELECT pk, tier FROM devices WHERE id = $1', [deviceId], 'device-pk');
    if (!r.rows[0]) throw new ReefError('DEVICE_NOT_FOUND');
    return r.rows[0] as { pk: number; tier: number };
  }

  async queryObservations(deviceId: string, q: ObservationQuery): Promise<ObservationPage> {
    const { pk, tier } = await this.devicePk(deviceId);
    const from = q.from ?? 0;
    const to = Math.min(q.to ?? Number.MAX_SAFE_INTEGER, q.before ?? Number.MAX_SAFE_INTEGER);
    // One more than asked tells whether another page exists without a second query.
    const r =
      q.tag === undefined
        ? await this.q(
            `SELECT ts, temperature, extra FROM observations WHERE tier = $1 AND device_pk = $2 AND ts >= $3 AND ts < $4 ORDER BY ts DESC LIMIT $5`,
            [tier, pk, from, to, q.limit + 1],
            'page',
          )
        : await this.q(
            `SELECT ts, temperature, extra FROM observations WHERE tier = $1 AND device_pk = $2 AND ts >= $3 AND ts < $4
         AND extra -> 'tags' ? $6 ORDER BY ts DESC LIMIT $5`,
            [tier, pk, from, to, q.limit + 1, q.tag],
            'page-tagged',
          );
    const rows = r.rows;
    const more = rows.length > q.limit;
    if (more) rows.pop();
    return { observations: rows.map(obsFromRow), nextBefore: more ? (rows[rows.length - 1]!.ts as number) : null };
  }

  async querySolutionObservations(groupId: string, solution: string, q: SolutionObservationQuery): Promise<SolutionObservationPage> {
    const from = q.from ?? 0;
    const to = q.to ?? Number.MAX_SAFE_INTEGER;
    const tag = q.tag ?? null;
    // One more than asked tells whether another page exists.
    const want = q.limit + 1;
    const rows: Row[] = [];
    if (q.after) {
      // The cursor's own device: the rest of it below the cursor, one index range scan.
      const r = await this.q(
        `SELECT d.pk, d.id, o.ts, o.temperature, o.extra FROM devices d JOIN observations o ON o.tier = d.tier AND o.device_pk = d.pk
         WHERE d.group_id = $1 AND d.solution = $2 AND d.pk = $3 AND o.ts >= $4 AND o.ts < $5
         AND ($7::text IS NULL OR o.extra -> 'tags' ? $7) ORDER BY o.ts DESC LIMIT $6`,
        [groupId, solution, q.after.device, from, Math.min(to, q.after.ts), want, tag],
        'solution-page-device',
      );
      rows.push(...r.rows);
    }
    if (rows.length < want) {
      // Devices in pk order (devices_by_solution), each one's newest rows through the lateral
      // (device_pk, ts DESC) index scan; the incremental sort on the presorted pk lets LIMIT stop
      // after the devices that fill the page.
      const r = await this.q(
        `SELECT d.pk, d.id, o.ts, o.temperature, o.extra FROM devices d
         CROSS JOIN LATERAL (
           SELECT ts, temperature, extra FROM observations o
           WHERE o.tier = d.tier AND o.device_pk = d.pk AND o.ts >= $4 AND o.ts < $5 AND ($7::text IS NULL OR o.extra -> 'tags' ? $7)
           ORDER BY o.ts DESC LIMIT $6) o
         WHERE d.group_id = $1 AND d.solution = $2 AND d.pk > $3
         ORDER BY d.pk, o.ts DESC LIMIT $6`,
        [groupId, solution, q.after?.device ?? -1, from, to, want - rows.length, tag],
        'solution-page-rest',
      );
      rows.push(...r.rows);
    }
    return solutionPage(rows as { pk: number; id: string; ts: number }[], q.limit, obsFromRow);
  }

  async bucketObservations(deviceId: string, q: BucketQuery): Promise<Bucket[]> {
    const { pk, tier } = await this.devicePk(deviceId);
    const r = await this.q(
      `SELECT (ts - $3) / $5 * $5 + $3 AS b, count(*) AS n, min(temperature) AS lo, avg(temperature) AS mean, max(temperature) AS hi
       FROM observations WHERE tier = $1 AND device_pk = $2 AND ts >= $3 AND ts < $4 GROUP BY b ORDER BY b`,
      [tier, pk, q.from, q.to, q.bucketMs],
      'buckets',
    );
    return r.rows.map((x) => ({ ts: x.b, count: x.n, min: x.lo, avg: x.mean, max: x.hi }));
  }

  // ---- retention and upkeep -----------------------------------------------------------------

  async setRetention(groupId: string, solution: string, days: number | null): Promise<void> {
    if (days !== null && (!Number.isInteger(days) || days < 1 || days > 36500)) {
      throw new ReefError('VALIDATION_FAILED', 'retention must be a whole number of days from 1 to 36500, or null', { field: 'retention' });
    }
    const tier = days ?? 0;
    try {
      await this.tx(async (c) => {
        await c.query('SELECT reef_ensure_tier($1)', [tier]);
        const s = await c.query('UPDATE solutions SET retention_days = $1 WHERE group_id = $2 AND name = $3', [days, groupId, solution]);
        if (s.rowCount === 0) throw new ReefError('SOLUTION_NOT_FOUND');
        // RETURNING sees the new row: the old tier comes from the locked pre-image.
        const moved = await c.query(
          `UPDATE devices d SET tier = $1
           FROM (SELECT pk, tier FROM devices WHERE group_id = $2 AND solution = $3 AND tier <> $1 FOR UPDATE) o
           WHERE d.pk = o.pk RETURNING d.pk, o.tier AS old`,
          [tier, groupId, solution],
        );
        if (moved.rowCount === 0) return;
        // The devices' rows change tier: make the new tier's partitions for their times, then let
        // PostgreSQL move the rows (an UPDATE of the partition key moves them between partitions).
        const pks = moved.rows.map((x) => x.pk as number);
        const olds = [...new Set(moved.rows.map((x) => x.old as number))];
        const dayRows = await c.query('SELECT DISTINCT ts / 86400000 AS day FROM observations WHERE tier = ANY($1::int[]) AND device_pk = ANY($2::bigint[])', [numArray(olds), numArray(pks)]);
        this.parts.addTier(tier);
        const need = new Map<number, { tier: number; start: number; end: number }>();
        const now = Date.now();
        for (const x of dayRows.rows) {
          const ts = (x.day as number) * DAY;
          for (const m of this.parts.missing([ts], now)) if (m.tier === tier) need.set(m.start, m);
        }
        for (const m of this.parts.ahead(now)) if (m.tier === tier) need.set(m.start, m);
        await this.ensureRanges([...need.values()], c);
        await c.query('UPDATE observations SET tier = $1 WHERE tier = ANY($2::int[]) AND device_pk = ANY($3::bigint[])', [tier, numArray(olds), numArray(pks)]);
      });
    } finally {
      // The cache may have noted partitions of a transaction that rolled back: read it afresh.
      await this.loadPartitions().catch(() => undefined);
    }
  }

  async getRetention(groupId: string, solution: string): Promise<number | null> {
    const r = await this.q('SELECT retention_days FROM solutions WHERE group_id = $1 AND name = $2', [groupId, solution]);
    if (!r.rows[0]) throw new ReefError('SOLUTION_NOT_FOUND');
    return r.rows[0].retention_days ?? null;
  }

  async maintain(now = Date.now()): Promise<MaintenanceReport> {
    await this.loadPartitions();
    const report: MaintenanceReport = { partitionsCreated: 0, partitionsDropped: 0, rowsDeleted: 0 };
    report.partitionsCreated = await this.ensureRanges(this.parts.ahead(now));
    for (const tier of this.parts.tierList()) {
      if (tier === 0) continue;
      const cutoff = now - tier * DAY;
      let boundary = cutoff;
      for (const r of this.parts.ranges(tier)) {
        if (r.end <= cutoff) {
          const name = `obs_t${tier}_${new Date(r.start).toISOString().slice(0, 10).replace(/-/g, '')}`;
          // DROP takes a brief ACCESS EXCLUSIVE lock on the tier; never queue behind a long
          // reader (which would stall every insert queued behind us): give up, retry next run.
          await this.tx(async (c) => {
            await c.query(`SET LOCAL lock_timeout = '2s'`);
            await c.query('SELECT pg_advisory_xact_lock($1)', [LOCK_PARTITIONS.toString()]);
            await c.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(name)}`);
          });
          report.partitionsDropped++;
        } else if (r.start < boundary) boundary = r.start;
      }
      // Out-of-window timestamps live in the default partition: expire those row by row.
      const d = await this.q(`DELETE FROM ${pg.escapeIdentifier(`obs_t${tier}_default`)} WHERE ts < $1`, [cutoff]);
      report.rowsDeleted += d.rowCount ?? 0;
      // Every observation of the tier older than `boundary` is gone, so is a latest that old.
      await this.q('DELETE FROM latest l USING devices d WHERE d.pk = l.device_pk AND d.tier = $1 AND l.ts < $2', [tier, boundary]);
    }
    await this.loadPartitions();
    return report;
  }

  // ---- job state ----------------------------------------------------------------------------

  async getState(key: string): Promise<string | null> {
    const r = await this.q('SELECT value FROM state WHERE key = $1', [key], 'get-state');
    return r.rows[0] ? (r.rows[0].value as string) : null;
  }
  async setState(key: string, value: string): Promise<void> {
    await this.q('INSERT INTO state (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [key, value], 'set-state');
  }
  async deleteState(key: string): Promise<void> {
    await this.q('DELETE FROM state WHERE key = $1', [key]);
  }
  async listState(prefix: string): Promise<{ key: string; value: string }[]> {
    const r = await this.q('SELECT key, value FROM state WHERE starts_with(key, $1) ORDER BY key', [prefix]);
    return r.rows as { key: string; value: string }[];
  }
}
