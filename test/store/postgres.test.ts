// The store conformance suite against the real PostgreSQL on 127.0.0.1:5432, in a throw-away
// database made for this run and dropped afterwards.
import assert from 'node:assert/strict';
import { describe, it, before, after } from 'node:test';
import { periodStart, widthOf } from '../../src/store/postgres/partitions.ts';
import { storeConformance } from './conformance.ts';
import { PostgresStore } from '../../src/store/postgres/postgres-store.ts';
import { createTestDatabase } from '../helpers/pg.ts';

let db: Awaited<ReturnType<typeof createTestDatabase>> | undefined;

storeConformance('postgres', {
  async open() {
    db = await createTestDatabase();
    const s = new PostgresStore({ connectionString: db.url });
    await s.migrate();
    return s;
  },
  async cleanup() {
    await db?.drop();
  },
});

// What only the PostgreSQL backend has: concurrent migration, time partitions, expiry by dropping them.

describe('postgres: migrations and partitions', () => {
  let pdb: Awaited<ReturnType<typeof createTestDatabase>>;
  let s1: PostgresStore;
  let s2: PostgresStore;
  const partitionOf = async (deviceId: string, ts: number) =>
    (await s1.pool.query('SELECT o.tableoid::regclass::text AS p FROM observations o JOIN devices d ON d.pk = o.device_pk WHERE d.id = $1 AND o.ts = $2', [deviceId, ts])).rows[0]?.p as
      | string
      | undefined;

  before(async () => {
    pdb = await createTestDatabase();
    s1 = new PostgresStore({ connectionString: pdb.url });
    s2 = new PostgresStore({ connectionString: pdb.url });
  });
  after(async () => {
    await s1.close();
    await s2.close();
    await pdb.drop();
  });

  it('two nodes migrating at once apply each migration exactly once', async () => {
    await Promise.all([s1.migrate(), s2.migrate(), s1.migrate()]);
    const r = await s1.pool.query('SELECT version, count(*)::int AS n FROM schema_migrations GROUP BY version ORDER BY version');
    assert.ok(r.rows.length >= 2);
    assert.ok(r.rows.every((x) => x.n === 1));
  });

  it('partitions are ready around now, made on demand for other periods, and the default takes the rest', async () => {
    const now = Date.now();
    await s1.createDevice({ id: 'p-dev', tenantId: 'T', groupId: 'G', solution: 'p', deviceType: 'VirtualDevice', domainInfo: {} });
    const month = (ts: number) => `obs_t0_${new Date(periodStart(widthOf(0), ts)).toISOString().slice(0, 10).replace(/-/g, '')}`;
    const earlier = Date.UTC(2024, 2, 10, 12);
    const ancient = Date.UTC(1975, 0, 1);
    await s1.insertObservations('p-dev', [
      { ts: ancient, temperature: 1, extra: null },
      { ts: earlier, temperature: 2, extra: null },
      { ts: now, temperature: 3, extra: null },
    ]);
    assert.equal(await partitionOf('p-dev', now), month(now), 'made ahead');
    assert.equal(await partitionOf('p-dev', earlier), month(earlier), 'made on demand');
    assert.equal(await partitionOf('p-dev', ancient), 'obs_t0_default', 'outside the window');
    // Another node learns of partitions from the catalogue: its inserts land in them too.
    await s2.insertObservations('p-dev', [{ ts: earlier + 1, temperature: 4, extra: null }]);
    assert.equal(await partitionOf('p-dev', earlier + 1), month(earlier));
    // A partition made later for the default's rows takes them over.
    const start = periodStart('month', ancient);
    await s1.pool.query('SELECT reef_ensure_partition(0, $1, $2)', [start, Date.UTC(1975, 1, 1)]);
    assert.equal(await partitionOf('p-dev', ancient), 'obs_t0_19750101');
    const page = await s2.queryObservations('p-dev', { limit: 10 });
    assert.deepEqual(
      page.observations.map((o) => o.temperature),
      [3, 4, 2, 1],
    );
  });

  it('retention drops whole partitions of its tier, leaving other tiers alone', async () => {
    const now = Date.now();
    await s1.createDevice({ id: 'r-dev', tenantId: 'T', groupId: 'G', solution: 'r', deviceType: 'VirtualDevice', domainInfo: {} });
    const old = now - 60 * 86_400_000;
    await s1.insertObservations('r-dev', [
      { ts: old, temperature: 1, extra: null },
      { ts: now, temperature: 2, extra: null },
    ]);
    await s1.setRetention('G', 'r', 30);
    const oldPart = await partitionOf('r-dev', old);
    assert.match(oldPart ?? '', /^obs_t30_\d{8}$/, 'weekly partitions of the 30-day tier');
    const report = await s2.maintain(now);
    assert.ok(report.partitionsDropped >= 1);
    assert.equal(report.rowsDeleted, 0, 'nothing deleted row by row');
    const left = await s1.pool.query('SELECT to_regclass($1) AS t', [oldPart]);
    assert.equal(left.rows[0].t, null, 'the expired partition is gone');
    assert.deepEqual(
      (await s1.queryObservations('r-dev', { limit: 10 })).observations.map((o) => o.ts),
      [now],
    );
    assert.ok((await s1.queryObservations('p-dev', { limit: 10 })).observations.length === 4, 'forever tier untouched');
  });

  it('connection failures become STORE_UNAVAILABLE with a retry delay', async () => {
    const dead = new PostgresStore({ connectionString: 'postgres://postgres@127.0.0.1:1/none', connectTimeoutMs: 2000 });
    try {
      await assert.rejects(dead.ping(), (e: any) => e.code === 'STORE_UNAVAILABLE' && e.status === 503 && e.retryAfter >= 1);
      await assert.rejects(dead.insertObservations('x', [{ ts: 1, temperature: 1, extra: null }]), (e: any) => e.code === 'STORE_UNAVAILABLE');
    } finally {
      await dead.close();
    }
  });
});
