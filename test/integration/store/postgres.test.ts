// The store conformance suite against the real PostgreSQL on 127.0.0.1:5432, in a throw-away
// database made for this run and dropped afterwards.
import assert from 'node:assert/strict';
import { describe, it, before, after } from 'node:test';
import pg from 'pg';
import { periodStart, widthOf } from '../../../src/store/postgres/partitions.ts';
import { storeConformance } from './conformance/index.ts';
import { MIGRATIONS } from '../../../src/store/postgres/migrations.ts';
import { BY_ID_IN_SOLUTION, PostgresStore } from '../../../src/store/postgres/postgres-store.ts';
import type { InsertResult } from '../../../src/store/store.ts';
import { createTestDatabase } from '../../helpers/pg.ts';
import { batchOf } from '../../../src/core/observation-batch.ts';

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

/** Two nodes (stores) on one throw-away database, made before the suite's tests, dropped after. */
function twoNodes(): { s1: PostgresStore; s2: PostgresStore; url: string } {
  let pdb: Awaited<ReturnType<typeof createTestDatabase>>;
  const nodes = {} as { s1: PostgresStore; s2: PostgresStore; url: string };
  before(async () => {
    pdb = await createTestDatabase();
    nodes.url = pdb.url;
    nodes.s1 = new PostgresStore({ connectionString: pdb.url });
    nodes.s2 = new PostgresStore({ connectionString: pdb.url });
  });
  after(async () => {
    await nodes.s1.close();
    await nodes.s2.close();
    await pdb.drop();
  });
  return nodes;
}

describe('postgres: migrations and partitions', () => {
  const nodes = twoNodes();
  const partitionOf = async (deviceId: string, ts: number) =>
    (await nodes.s1.pool.query('SELECT o.tableoid::regclass::text AS p FROM observations o JOIN devices d ON d.pk = o.device_pk WHERE d.id = $1 AND o.ts = $2', [deviceId, ts])).rows[0]?.p as
      | string
      | undefined;

  it('two nodes migrating at once apply each migration exactly once', async () => {
    await Promise.all([nodes.s1.migrate(), nodes.s2.migrate(), nodes.s1.migrate()]);
    const r = await nodes.s1.pool.query('SELECT version, count(*)::int AS n FROM schema_migrations GROUP BY version ORDER BY version');
    assert.ok(r.rows.length >= 2);
    assert.ok(r.rows.every((x) => x.n === 1));
  });

  it('partitions are ready around now, made on demand for other periods, and the default takes the rest', async () => {
    const now = Date.now();
    await nodes.s1.createDevice({ id: 'p-dev', tenantId: 'T', groupId: 'G', solution: 'p', deviceType: 'VirtualDevice', domainInfo: {} });
    const month = (ts: number) => `obs_t0_${new Date(periodStart(widthOf(0), ts)).toISOString().slice(0, 10).replace(/-/g, '')}`;
    const earlier = Date.UTC(2024, 2, 10, 12);
    const ancient = Date.UTC(1975, 0, 1);
    await nodes.s1.insertObservations(
      'p-dev',
      batchOf([
        { ts: ancient, temperature: 1, extra: null },
        { ts: earlier, temperature: 2, extra: null },
        { ts: now, temperature: 3, extra: null },
      ]),
    );
    assert.equal(await partitionOf('p-dev', now), month(now), 'made ahead');
    assert.equal(await partitionOf('p-dev', earlier), month(earlier), 'made on demand');
    assert.equal(await partitionOf('p-dev', ancient), 'obs_t0_default', 'outside the window');
    // Another node learns of partitions from the catalogue: its inserts land in them too.
    await nodes.s2.insertObservations('p-dev', batchOf([{ ts: earlier + 1, temperature: 4, extra: null }]));
    assert.equal(await partitionOf('p-dev', earlier + 1), month(earlier));
    // A partition made later for the default's rows takes them over.
    const start = periodStart('month', ancient);
    await nodes.s1.pool.query('SELECT reef_ensure_partition(0, $1, $2)', [start, Date.UTC(1975, 1, 1)]);
    assert.equal(await partitionOf('p-dev', ancient), 'obs_t0_19750101');
    const page = await nodes.s2.queryObservations('p-dev', { limit: 10 });
    assert.deepEqual(
      page.observations.map((o) => o.temperature),
      [3, 4, 2, 1],
    );
  });

  it('a batch running past the end of a partition gets the next one made for its later rows', async () => {
    // March 2024 exists (made above); April 2024 is neither near now nor made yet.
    const march = Date.UTC(2024, 2, 31, 23);
    const april = Date.UTC(2024, 3, 1, 1);
    assert.equal((await nodes.s1.pool.query("SELECT to_regclass('obs_t0_20240401') AS r")).rows[0].r, null);
    await nodes.s1.createDevice({ id: 'q-dev', tenantId: 'T', groupId: 'G', solution: 'p', deviceType: 'VirtualDevice', domainInfo: {} });
    await nodes.s1.insertObservations(
      'q-dev',
      batchOf([
        { ts: march, temperature: 5, extra: null },
        { ts: april, temperature: 6, extra: null },
      ]),
    );
    assert.equal(await partitionOf('q-dev', march), 'obs_t0_20240301');
    assert.equal(await partitionOf('q-dev', april), 'obs_t0_20240401');
  });

  it('retention drops whole partitions of its tier, leaving other tiers alone', async () => {
    const now = Date.now();
    await nodes.s1.createDevice({ id: 'r-dev', tenantId: 'T', groupId: 'G', solution: 'r', deviceType: 'VirtualDevice', domainInfo: {} });
    const old = now - 60 * 86_400_000;
    await nodes.s1.insertObservations(
      'r-dev',
      batchOf([
        { ts: old, temperature: 1, extra: null },
        { ts: now, temperature: 2, extra: null },
      ]),
    );
    await nodes.s1.setRetention('G', 'r', 30);
    const oldPart = await partitionOf('r-dev', old);
    assert.match(oldPart ?? '', /^obs_t30_\d{8}$/, 'weekly partitions of the 30-day tier');
    const report = await nodes.s2.maintain(now);
    assert.ok(report.partitionsDropped >= 1);
    assert.equal(report.rowsDeleted, 0, 'nothing deleted row by row');
    const left = await nodes.s1.pool.query('SELECT to_regclass($1) AS t', [oldPart]);
    assert.equal(left.rows[0].t, null, 'the expired partition is gone');
    assert.deepEqual(
      (await nodes.s1.queryObservations('r-dev', { limit: 10 })).observations.map((o) => o.ts),
      [now],
    );
    assert.ok((await nodes.s1.queryObservations('p-dev', { limit: 10 })).observations.length === 4, 'forever tier untouched');
  });

  it('a URL naming a socket directory connects through the Unix socket (docs/operations.md)', async () => {
    const url = new URL(nodes.url);
    url.hostname = 'localhost';
    url.port = '';
    url.searchParams.set('host', '/var/run/postgresql');
    const local = new PostgresStore({ connectionString: url.toString() });
    try {
      assert.equal((await local.pool.query('SELECT inet_client_addr() AS a')).rows[0].a, null, 'no client address: not TCP');
      await local.insertObservations('q-dev', batchOf([{ ts: Date.UTC(2024, 2, 12), temperature: 7, extra: null }]));
      assert.equal(await partitionOf('q-dev', Date.UTC(2024, 2, 12)), 'obs_t0_20240301');
    } finally {
      await local.close();
    }
  });

  it('connection failures become STORE_UNAVAILABLE with a retry delay', async () => {
    const dead = new PostgresStore({ connectionString: 'postgres://postgres@127.0.0.1:1/none', connectTimeoutMs: 2000 });
    try {
      await assert.rejects(dead.ping(), (e: any) => e.code === 'STORE_UNAVAILABLE' && e.status === 503 && e.retryAfter >= 1);
      await assert.rejects(dead.insertObservations('x', batchOf([{ ts: 1, temperature: 1, extra: null }])), (e: any) => e.code === 'STORE_UNAVAILABLE');
    } finally {
      await dead.close();
    }
  });
});

// How batches are written (postgres-store.ts): groups of concurrent batches in one transaction, a
// binary COPY where the device's time span is free, a merge where it is not or where a racing
// upload got there first.
describe('postgres: batch writes', () => {
  let pdb: Awaited<ReturnType<typeof createTestDatabase>>;
  let s: PostgresStore;
  const T = Date.UTC(2026, 0, 5);
  const rows = (n: number, temperature: number, from = T) => Array.from({ length: n }, (_, i) => ({ ts: from + i * 1000, temperature, extra: null }));
  const stored = async (id: string) => (await s.queryObservations(id, { limit: 100 })).observations.map((o) => [o.ts, o.temperature]).reverse();

  before(async () => {
    pdb = await createTestDatabase();
    s = new PostgresStore({ connectionString: pdb.url });
    await s.migrate();
    for (const id of ['w-1', 'w-2', 'w-3', 'w-race']) await s.createDevice({ id, tenantId: 'T', groupId: 'G', solution: 'w', deviceType: 'VirtualDevice', domainInfo: {} });
  });
  after(async () => {
    await s.close();
    await pdb.drop();
  });

  it('a batch overlapping stored rows replaces them and keeps the rest; latest follows the newest', async () => {
    await s.insertObservations('w-1', batchOf(rows(4, 1))); // span free: COPY
    await s.insertObservations('w-1', batchOf(rows(3, 2, T + 2000))); // overlaps the last two: merge
    assert.deepEqual(await stored('w-1'), [
      [T, 1],
      [T + 1000, 1],
      [T + 2000, 2],
      [T + 3000, 2],
      [T + 4000, 2],
    ]);
    const latest = (await s.latestObservations('G', 'w')).find((l) => l.deviceId === 'w-1');
    assert.deepEqual([latest?.observation.ts, latest?.observation.temperature], [T + 4000, 2]);
  });

  it('a batch whose COPY meets the rows of a racing upload is merged instead: stored once, the later commit wins', async () => {
    const other = await s.pool.connect();
    try {
      // Another node's upload of the same span, not yet committed: the store sees the span free.
      await other.query('BEGIN');
      await other.query(`INSERT INTO observations (device_pk, ts, temperature, tier) SELECT pk, $1, 9, tier FROM devices WHERE id = 'w-race'`, [T + 1000]);
      const pending = s.insertObservations('w-race', batchOf(rows(3, 5)));
      // Its COPY waits on the unique index for the other transaction (no sleep: ask PostgreSQL,
      // outside that transaction, whose view of pg_stat_activity would stay as it first saw it).
      for (;;) {
        const r = await s.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'COPY%'`);
        if (r.rows[0].n > 0) break;
      }
      await other.query('COMMIT');
      assert.deepEqual(await pending, { written: 3 });
    } finally {
      other.release();
    }
    assert.deepEqual(await stored('w-race'), [
      [T, 5],
      [T + 1000, 5],
      [T + 2000, 5],
    ]);
  });

  it('one failing batch of a group fails alone: the others are stored, it stores nothing', async () => {
    const results = await Promise.allSettled([
      s.insertObservations('w-2', batchOf(rows(3, 1, T + 100_000))),
      s.insertObservations('w-3', batchOf([{ ts: T + 100_000, temperature: 1, extra: { note: 'a\u0000b' } }])),
      s.insertObservations('w-3', batchOf(rows(2, 3, T + 200_000))),
      s.insertObservations('w-nobody', batchOf(rows(2, 3))),
    ]);
    assert.deepEqual(
      results.map((r) => (r.status === 'fulfilled' ? r.value.written : (r.reason as { code?: string }).code)),
      [3, 'VALIDATION_FAILED', 2, 'DEVICE_NOT_FOUND'],
    );
    assert.equal((await stored('w-2')).length, 3);
    assert.deepEqual(await stored('w-3'), [
      [T + 200_000, 3],
      [T + 201_000, 3],
    ]);
  });

  // A device the node has read (as every upload does first) is written in one round trip, its key
  // checked by PostgreSQL rather than looked up; another node may have changed it meanwhile.
  describe('a device whose key the node knows', () => {
    let s2: PostgresStore;
    // Queries sent to PostgreSQL while f runs, on any connection (the pool's, or the one known
    // devices' groups are pipelined on), not counting the heads' PREPARE (once per connection).
    const queriesOf = async (f: () => Promise<unknown>): Promise<number> => {
      let n = 0;
      const proto = pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown };
      const query = proto.query;
      proto.query = function (this: unknown, ...a: unknown[]) {
        if (!(typeof a[0] === 'string' && a[0].startsWith('PREPARE '))) n++;
        return query.apply(this, a);
      };
      try {
        await f();
      } finally {
        proto.query = query;
      }
      return n;
    };
    before(async () => {
      s2 = new PostgresStore({ connectionString: pdb.url });
      for (const id of ['k-1', 'k-2', 'k-gone']) await s.createDevice({ id, tenantId: 'T', groupId: 'G', solution: id === 'k-2' ? 'k2' : 'k', deviceType: 'VirtualDevice', domainInfo: {} });
    });
    after(async () => {
      await s2.close();
    });

    it('is written in one query, and a batch repeating stored times still replaces them', async () => {
      await s.insertObservations('k-1', batchOf(rows(2, 1)));
      assert.ok(await s.getDevice('G', 'k', 'k-1'));
      assert.equal(await queriesOf(() => s.insertObservations('k-1', batchOf(rows(2, 2, T + 10_000)))), 1);
      await s.insertObservations('k-1', batchOf(rows(3, 7, T + 1000))); // repeats T + 1000: the COPY fails, the batch is merged
      const got = await stored('k-1');
      assert.deepEqual(got.slice(0, 4), [
        [T, 1],
        [T + 1000, 7],
        [T + 2000, 7],
        [T + 3000, 7],
      ]);
      assert.equal(new Set(got.map(([ts]) => ts)).size, got.length);
    });

    it('deleted by another node: the upload is refused and stores nothing', async () => {
      assert.ok(await s.getDevice('G', 'k', 'k-gone'));
      assert.equal(await s2.deleteDevice('G', 'k', 'k-gone'), true);
      await assert.rejects(s.insertObservations('k-gone', batchOf(rows(2, 1))), { code: 'DEVICE_NOT_FOUND' });
      const orphans = await s.pool.query('SELECT count(*)::int AS n FROM observations WHERE device_pk NOT IN (SELECT pk FROM devices)');
      assert.equal(orphans.rows[0].n, 0);
    });

    // An upload's device read is answered from the read before (Store.uploadDevice): the writes
    // must then notice a device that is gone or is no longer the one read.
    const make = (id: string, groupId = 'G', solution = 'k', store = s) => store.createDevice({ id, tenantId: `T-${groupId}`, groupId, solution, deviceType: 'VirtualDevice', domainInfo: {} });

    it('uploadDevice answers from the device read before, without a query, in its own group and solution only', async () => {
      await make('u-1');
      assert.ok(await s.getDevice('G', 'k', 'u-1'));
      let ref: unknown;
      assert.equal(
        await queriesOf(async () => {
          ref = await s.uploadDevice('G', 'k', 'u-1');
        }),
        0,
      );
      assert.deepEqual(ref, { id: 'u-1', tenantId: 'T-G', groupId: 'G', solution: 'k', deviceType: 'VirtualDevice', mac: null });
      // Another group or solution reads, and finds nothing: never another account's device.
      assert.equal(await s.uploadDevice('G2', 'k', 'u-1'), null);
      assert.equal(await s.uploadDevice('G', 'k2', 'u-1'), null);
      // A node that never read it reads it.
      assert.ok((await queriesOf(() => s2.uploadDevice('G', 'k', 'u-1'))) >= 1);
    });

    it('remembered, then deleted by another node: the upload is refused and stores nothing', async () => {
      await make('u-gone');
      assert.ok(await s.uploadDevice('G', 'k', 'u-gone'));
      assert.equal(await s2.deleteDevice('G', 'k', 'u-gone'), true);
      assert.ok(await s.uploadDevice('G', 'k', 'u-gone')); // still remembered here: the write decides
      await assert.rejects(s.insertObservations('u-gone', batchOf(rows(2, 1))), { code: 'DEVICE_NOT_FOUND' });
      const orphans = await s.pool.query('SELECT count(*)::int AS n FROM observations WHERE device_pk NOT IN (SELECT pk FROM devices)');
      assert.equal(orphans.rows[0].n, 0);
    });

    it('remembered, then made again under the same id in another group: the upload stores nothing on it', async () => {
      // Both ways a batch is made: from records, and as the upload scanner makes it.
      const forms = {
        'u-moved': () => s.insertObservations('u-moved', batchOf(rows(2, 5, T + 10_000))),
        'u-moved-packed': () => s.insertObservations('u-moved-packed', { ts: Float64Array.of(T + 10_000), temperature: Float64Array.of(5), extra: null, newest: 0 }),
      };
      for (const [id, upload] of Object.entries(forms)) {
        await make(id);
        await s.insertObservations(id, batchOf(rows(1, 1)));
        assert.ok(await s.uploadDevice('G', 'k', id));
        assert.equal(await s2.deleteDevice('G', 'k', id), true);
        await make(id, 'G-other', 'k', s2);
        assert.equal((await s.uploadDevice('G', 'k', id))?.groupId, 'G'); // remembered here
        await assert.rejects(upload(), { code: 'DEVICE_NOT_FOUND' });
        assert.deepEqual(await stored(id), [], id);
        // Forgotten now: the next upload's read finds no such device in this group.
        assert.equal(await s.uploadDevice('G', 'k', id), null);
      }
    });

    it('remembered, then made again under the same id in the same group and solution: the upload is stored on the new device', async () => {
      await make('u-again');
      await s.insertObservations('u-again', batchOf(rows(1, 1)));
      assert.ok(await s.uploadDevice('G', 'k', 'u-again'));
      assert.equal(await s2.deleteDevice('G', 'k', 'u-again'), true);
      await make('u-again', 'G', 'k', s2);
      assert.deepEqual(await s.insertObservations('u-again', batchOf(rows(2, 5, T + 10_000))), { written: 2 });
      assert.deepEqual(await stored('u-again'), [
        [T + 10_000, 5],
        [T + 11_000, 5],
      ]);
      // The new device is read afresh for the next upload.
      assert.ok((await queriesOf(() => s.uploadDevice('G', 'k', 'u-again'))) >= 1);
    });

    it('groups pipelined on one connection: one failing leaves the group written behind it stored, and the connection goes on', async () => {
      const ids = ['p-1', 'p-2', 'p-3'];
      for (const id of ids) await s.createDevice({ id, tenantId: 'T', groupId: 'G', solution: 'k', deviceType: 'VirtualDevice', domainInfo: {} });
      for (const id of ids) await s.insertObservations(id, batchOf(rows(2, 1))); // T and T + 1000; keys known
      // p-1 alone, then p-2 and p-3 together, both written before PostgreSQL answers the first:
      // p-1 repeats a stored time, so its COPY fails on the unique index (and it is merged).
      const results = await Promise.all([
        s.insertObservations('p-1', batchOf(rows(2, 5, T + 1000))),
        s.insertObservations('p-2', batchOf(rows(2, 6, T + 10_000))),
        s.insertObservations('p-3', batchOf(rows(2, 7, T + 10_000))),
      ]);
      assert.deepEqual(
        results.map((r) => r.written),
        [2, 2, 2],
      );
      assert.deepEqual(await stored('p-1'), [
        [T, 1],
        [T + 1000, 5],
        [T + 2000, 5],
      ]);
      for (const [id, t] of [
        ['p-2', 6],
        ['p-3', 7],
      ] as const)
        assert.deepEqual(await stored(id), [
          [T, 1],
          [T + 1000, 1],
          [T + 10_000, t],
          [T + 11_000, t],
        ]);
      const tx = await s.pool.query(`SELECT count(DISTINCT o.xmin::text)::int AS n FROM observations o JOIN devices d ON d.pk = o.device_pk WHERE d.id IN ('p-2', 'p-3') AND o.ts >= $1`, [T + 10_000]);
      assert.equal(tx.rows[0].n, 1);
      // Not left inside a failed transaction: the next group goes in one query and is stored.
      assert.equal(await queriesOf(() => s.insertObservations('p-2', batchOf(rows(1, 8, T + 20_000)))), 1);
      assert.deepEqual((await stored('p-2')).at(-1), [T + 20_000, 8]);
    });

    it('the pipelined connection ended by PostgreSQL: the next upload is still written (through the pool, then a new connection)', async () => {
      await s.createDevice({ id: 'p-kill', tenantId: 'T', groupId: 'G', solution: 'k', deviceType: 'VirtualDevice', domainInfo: {} });
      await s.insertObservations('p-kill', batchOf(rows(1, 1)));
      const admin = await s2.pool.connect();
      try {
        const r = await admin.query(
          "SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%reef_group_head_known%'",
        );
        assert.equal(r.rows[0].n, 1);
      } finally {
        admin.release();
      }
      assert.deepEqual(await s.insertObservations('p-kill', batchOf(rows(1, 2, T + 5000))), { written: 1 });
      assert.deepEqual(await s.insertObservations('p-kill', batchOf(rows(1, 3, T + 6000))), { written: 1 });
      assert.deepEqual(await stored('p-kill'), [
        [T, 1],
        [T + 5000, 2],
        [T + 6000, 3],
      ]);
    });

    it("moved to another tier by another node: the rows go to the device's new tier", async () => {
      assert.ok(await s.getDevice('G', 'k2', 'k-2'));
      await s2.setRetention('G', 'k2', 30);
      assert.deepEqual(await s.insertObservations('k-2', batchOf(rows(2, 4))), { written: 2 });
      const r = await s.pool.query("SELECT DISTINCT o.tier FROM observations o JOIN devices d ON d.pk = o.device_pk WHERE d.id = 'k-2'");
      assert.deepEqual(
        r.rows.map((x) => x.tier),
        [30],
      );
      assert.deepEqual(await stored('k-2'), [
        [T, 4],
        [T + 1000, 4],
      ]);
    });
  });

  it("a group's COPY, with its flush markers between every 60 rows, stores each row once and the markers nowhere", async () => {
    // Five batches in one group, 421 rows, a marker before rows 60, 120, … 420 of the group: after
    // 59 + 1 rows one falls between two batches, the others inside batches of 61, 121 and 179 rows,
    // the last running from one month's partition into the next. The group forms while three
    // others hold every writer, each waiting on a device another transaction has locked (five held
    // batches: one group of one, then, a writer being busy, groups of two).
    const ids = ['f-1', 'f-2', 'f-3', 'f-4', 'f-5'];
    const held = ['h-1', 'h-2', 'h-3', 'h-4', 'h-5'];
    for (const id of [...ids, ...held]) await s.createDevice({ id, tenantId: 'T', groupId: 'G', solution: 'f', deviceType: 'VirtualDevice', domainInfo: {} });
    const endOfJanuary = Date.UTC(2026, 1, 1) - 100_000;
    const sizes = [59, 1, 61, 121, 179];
    const batches = sizes.map((n, i) => (i === 4 ? rows(n, 5, endOfJanuary) : rows(n, i + 1, T + 1_000_000).map((r, j) => (j === 0 ? { ...r, extra: { first: true } } : r))));
    const lock = await s.pool.connect();
    let results: InsertResult[];
    try {
      await lock.query('BEGIN');
      await lock.query("SELECT 1 FROM devices WHERE id LIKE 'h-%' FOR UPDATE");
      const holding = held.map((id) => s.insertObservations(id, batchOf(rows(2, 0))));
      const group = Promise.all(ids.map((id, i) => s.insertObservations(id, batchOf(batches[i]!))));
      await lock.query('COMMIT');
      await Promise.all(holding);
      results = await group;
    } finally {
      lock.release();
    }
    assert.deepEqual(
      results.map((r) => r.written),
      sizes,
    );
    for (let i = 0; i < ids.length; i++) {
      const got = (await s.queryObservations(ids[i]!, { limit: 1000 })).observations.reverse();
      assert.deepEqual(got, batches[i], ids[i]);
    }
    // One transaction wrote them all (a failed group is written again batch by batch, one each).
    const r = await s.pool.query(
      `SELECT (SELECT count(DISTINCT o.xmin::text)::int FROM observations o JOIN devices d ON d.pk = o.device_pk WHERE d.id LIKE 'f-%') AS transactions,
              (SELECT count(*)::int FROM obs_copy_flush) AS markers,
              (SELECT count(*)::int FROM observations WHERE device_pk NOT IN (SELECT pk FROM devices)) AS orphans`,
    );
    assert.deepEqual(r.rows[0], { transactions: 1, markers: 0, orphans: 0 });
  });

  it('while a group is written, a lone batch waits and goes in one transaction with the next one', async () => {
    // A group costs PostgreSQL CPU whatever its size (about 0.3 ms one after another, about 1 ms
    // when several ran at once): a second writer starting for every single batch made a group per
    // batch under four uploads in flight.
    const ids = ['g-held', 'g-1', 'g-2'];
    for (const id of ids) await s.createDevice({ id, tenantId: 'T', groupId: 'G', solution: 'g', deviceType: 'VirtualDevice', domainInfo: {} });
    const lock = await s.pool.connect();
    try {
      await lock.query('BEGIN');
      await lock.query("SELECT 1 FROM devices WHERE id = 'g-held' FOR UPDATE");
      const held = s.insertObservations('g-held', batchOf(rows(2, 0)));
      const first = s.insertObservations('g-1', batchOf(rows(3, 1)));
      // The lone batch is not written while the held group keeps a writer: it is still waiting
      // when the next batch comes.
      await new Promise((r) => setImmediate(r));
      const second = s.insertObservations('g-2', batchOf(rows(4, 2)));
      assert.deepEqual(
        (await Promise.all([first, second])).map((r) => r.written),
        [3, 4],
      );
      await lock.query('COMMIT');
      await held;
    } finally {
      lock.release();
    }
    const r = await s.pool.query(`SELECT count(DISTINCT o.xmin::text)::int AS n FROM observations o JOIN devices d ON d.pk = o.device_pk WHERE d.id IN ('g-1', 'g-2')`);
    assert.equal(r.rows[0].n, 1);
  });

  it('free-form fields and missing temperatures go through COPY and merge alike', async () => {
    const batch = [
      { ts: T + 500_000, temperature: null, extra: { tags: ['a'], n: 1.5, s: 'é' } },
      { ts: T + 501_000, temperature: -0.1, extra: null },
    ];
    await s.insertObservations('w-2', batchOf(batch)); // COPY
    const copied = (await s.queryObservations('w-2', { limit: 2 })).observations;
    await s.insertObservations('w-2', batchOf(batch)); // merge
    assert.deepEqual((await s.queryObservations('w-2', { limit: 2 })).observations, copied);
    assert.deepEqual(copied.reverse(), batch);
  });
});

describe('postgres: reads by id', () => {
  let pdb: Awaited<ReturnType<typeof createTestDatabase>>;
  let s: PostgresStore;
  before(async () => {
    pdb = await createTestDatabase();
    s = new PostgresStore({ connectionString: pdb.url });
    await s.migrate();
  });
  after(async () => {
    await s.close();
    await pdb.drop();
  });

  it("a device or template is found by its id's unique index, not by reading its whole solution, even before statistics exist", async () => {
    // A fleet just registered in one solution, not yet analyzed: the state of every new deployment.
    await s.pool.query(`INSERT INTO devices (id, tenant_id, group_id, solution, device_type, domain_info, created_at)
      SELECT 'dev-' || g, 'T', 'G', 'fleet', 'VirtualDevice', '{}', 0 FROM generate_series(1, 500) g`);
    await s.pool.query(`INSERT INTO device_templates (id, group_id, solution, name, sensors, created_at, updated_at)
      SELECT 'tpl-' || g, 'G', 'fleet', 'n', '[]', 0, 0 FROM generate_series(1, 500) g`);
    const c = await s.pool.connect();
    try {
      for (const [table, index] of [
        ['devices', 'devices_id_key'],
        ['device_templates', 'device_templates_id_key'],
      ] as const) {
        await c.query(`PREPARE by_id_${table}(text, text, text) AS SELECT pk FROM ${table} WHERE ${BY_ID_IN_SOLUTION}`);
        // The plan a prepared statement gets for its values, and the one it may keep for any values.
        for (const mode of ['force_custom_plan', 'force_generic_plan']) {
          await c.query(`SET plan_cache_mode = ${mode}`);
          const plan = (await c.query(`EXPLAIN (FORMAT JSON) EXECUTE by_id_${table}('G', 'fleet', '${table === 'devices' ? 'dev' : 'tpl'}-7')`)).rows[0]['QUERY PLAN'][0].Plan;
          assert.equal(plan['Index Name'], index, `${table}, ${mode}: ${JSON.stringify(plan)}`);
        }
      }
    } finally {
      // Closed, not returned: its prepared statements and plan_cache_mode stay out of the store's pool.
      c.release(true);
    }
    // The group and solution still decide: another group's or solution's id is not found.
    assert.equal((await s.getDevice('G', 'fleet', 'dev-7'))?.id, 'dev-7');
    assert.equal(await s.getDevice('H', 'fleet', 'dev-7'), null);
    assert.equal(await s.getDevice('G', 'other', 'dev-7'), null);
  });
});

describe('postgres: the device quota', () => {
  const nodes = twoNodes();
  it("the count starts from the devices a database held before it, and moves with every insert and delete (the store's or not)", async () => {
    // A database as migration 8 left it, with devices of two accounts.
    await nodes.s1.pool.query('CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)');
    for (const m of MIGRATIONS.filter((x) => x.version <= 8)) {
      await nodes.s1.pool.query(m.sql);
      await nodes.s1.pool.query('INSERT INTO schema_migrations VALUES ($1, $2, 0)', [m.version, m.name]);
    }
    await nodes.s1.pool.query(`INSERT INTO devices (id, tenant_id, group_id, solution, device_type, domain_info, created_at)
      SELECT 'old-' || g, CASE WHEN g % 3 = 0 THEN 'B' ELSE 'A' END, 'G', 'fleet', 'VirtualDevice', '{}', 0 FROM generate_series(1, 30) g`);
    await nodes.s1.migrate();
    assert.deepEqual([await nodes.s1.countDevices('A'), await nodes.s1.countDevices('B'), await nodes.s1.countDevices('nobody')], [20, 10, 0]);
    // An operator's bulk SQL is counted too: 20,000 devices of 100 accounts, then some deleted.
    await nodes.s1.pool.query(`INSERT INTO devices (id, tenant_id, group_id, solution, device_type, domain_info, created_at)
      SELECT 'other-' || g, 'Q' || (g % 100), 'H' || (g % 100), 'fleet', 'VirtualDevice', '{}', 0 FROM generate_series(1, 20000) g`);
    await nodes.s1.pool.query("DELETE FROM devices WHERE tenant_id = 'Q7' AND id LIKE 'other-1%'");
    const left = (await nodes.s1.pool.query("SELECT count(*)::int AS n FROM devices WHERE tenant_id = 'Q7'")).rows[0].n as number;
    assert.ok(left > 0 && left < 200);
    assert.equal(await nodes.s1.countDevices('Q7'), left);
    assert.equal(await nodes.s1.countDevices('Q8'), 200);
    assert.equal(await nodes.s2.deleteDevice('G', 'fleet', 'old-1'), true);
    assert.equal(await nodes.s1.countDevices('A'), 19);
  });

  it('two nodes creating devices for one account at its limit never pass it together', async () => {
    await Promise.all([nodes.s1.migrate(), nodes.s2.migrate()]); // done already when the test above ran
    const make = (i: number) => ({ id: `race-${i}`, tenantId: 'R', groupId: 'GR', solution: i % 2 ? 'one' : 'two', deviceType: 'VirtualDevice', domainInfo: {} });
    await nodes.s1.createDevice(make(0), 5);
    // Twenty at once, half through each node, for the four places left; deletes in between free places.
    const racers = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => (i % 2 ? nodes.s1 : nodes.s2).createDevice(make(i + 1), 5)));
    assert.equal(racers.filter((r) => r.status === 'fulfilled').length, 4);
    for (const r of racers) if (r.status === 'rejected') assert.equal((r.reason as { code?: string }).code, 'QUOTA_EXCEEDED');
    assert.equal(await nodes.s1.countDevices('R'), 5);
    assert.equal((await nodes.s2.listDevices('GR', 'one')).length + (await nodes.s2.listDevices('GR', 'two')).length, 5);
    // Creates and deletes of one account's devices in one solution, at once on two nodes: no deadlock, the count right.
    const ones = (await nodes.s1.listDevices('GR', 'one')).map((d) => d.id);
    const mixed = await Promise.allSettled([
      ...ones.map((id, i) => (i % 2 ? nodes.s1 : nodes.s2).deleteDevice('GR', 'one', id)),
      ...Array.from({ length: 6 }, (_, i) => (i % 2 ? nodes.s2 : nodes.s1).createDevice(make(100 + 2 * i + 1), 5)),
    ]);
    for (const r of mixed) if (r.status === 'rejected') assert.equal((r.reason as { code?: string }).code, 'QUOTA_EXCEEDED');
    const stored = (await nodes.s2.listDevices('GR', 'one')).length + (await nodes.s2.listDevices('GR', 'two')).length;
    assert.ok(stored <= 5, `${stored} devices`);
    assert.equal(await nodes.s1.countDevices('R'), stored);
  });
});
