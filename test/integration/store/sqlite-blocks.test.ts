// The SQLite store keeps observations in per-device blocks (src/store/sqlite/blocks.ts). What a
// user relies on is that this changes nothing they can see: every reading is kept, one per device
// and millisecond, the last written wins, and every read answers what a plain list of readings
// would. Here random uploads — overlapping earlier ones, unsorted, repeating timestamps, with and
// without free fields, one reading at a time and thousands at once — go through the store (writer
// thread and in-memory), a retention cut falls inside blocks, and every read is compared with a
// model: a Map from timestamp to reading. The blocks' own rules (no overlap, ascending, bounded) are
// checked on the table after each step.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { pageJson } from '../../../src/core/observation-json.ts';
import type { ObservationRecord } from '../../../src/core/types.ts';
import { BLOCK_MAX, blockStatements, decodeBlock, insertBlocks, type BlockRow } from '../../../src/store/sqlite/blocks.ts';
import { MIGRATIONS } from '../../../src/store/sqlite/migrations.ts';
import { SqliteStore } from '../../../src/store/sqlite/sqlite-store.ts';
import { batchOf } from '../../../src/core/observation-batch.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-blocks-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const DAY = 86_400_000;

/** A seeded generator, so that a failure can be reproduced. */
function random(seed: number) {
  return () => {
    seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) | 0;
    return (seed >>> 0) / 2 ** 32;
  };
}

async function setup(file: string) {
  // Bucketed reads aggregate two blocks per turn here: buckets cross chunk boundaries often.
  const store = new SqliteStore({ file, bucketChunk: 2 });
  await store.migrate();
  const groupId = 'G-blocks';
  await store.createAccount({ tenantId: 'TNBLOCKS', name: 'b', groupId, clientId: `c-${path.basename(path.dirname(file))}-${file.length}`, secretHash: 'scrypt$x', disabled: false, createdAt: 0 });
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const d = await store.createDevice({ id: `00000000-0000-4000-8000-00000000000${i}`, tenantId: 'TNBLOCKS', groupId, solution: 'blocks', deviceType: 'V', domainInfo: {} } as never);
    ids.push(d.id);
  }
  return { store, groupId, ids };
}

/** The blocks' own rules, read from the table: ascending inside, no overlap between, bounded size. */
function checkBlocks(file: string) {
  if (file === ':memory:') return;
  const db = new Database(file, { readonly: true });
  try {
    const rows = db.prepare('SELECT device_pk, first_ts, last_ts, n, ts, t, extra FROM obs_blocks ORDER BY device_pk, first_ts').raw(true).all() as [number, ...BlockRow][];
    let prev: [number, number] | null = null;
    for (const [pk, ...block] of rows) {
      const [first, last, n] = block;
      assert.ok(n >= 1 && n <= BLOCK_MAX, `block size ${n}`);
      const v = decodeBlock(block).ts;
      assert.equal(v.length, n);
      assert.equal(v[0], first);
      assert.equal(v[n - 1], last);
      for (let i = 1; i < n; i++) assert.ok(v[i]! > v[i - 1]!, 'ascending inside a block');
      if (prev && prev[0] === pk) assert.ok(first > prev[1], `blocks of device ${pk} overlap: ${first} <= ${prev[1]}`);
      prev = [pk, last];
    }
  } finally {
    db.close();
  }
}

for (const where of ['file (writer thread)', 'in memory'] as const) {
  describe(`sqlite blocks: random uploads read back as a plain list would (${where})`, () => {
    it('pages, cursors, ranges, tags, buckets, solution-wide pages, counts and a retention cut', async () => {
      const file = where === 'in memory' ? ':memory:' : path.join(fs.mkdtempSync(path.join(dir, 'f-')), 'reef.db');
      const { store, groupId, ids } = await setup(file);
      const rand = random(where === 'in memory' ? 7 : 11);
      const models = ids.map(() => new Map<number, ObservationRecord>());
      const span = 40_000; // ms: readings land on a small range so uploads overlap often
      const base = Date.now() - 5 * DAY; // retention below cuts inside the stored range

      const upload = async (k: number) => {
        const shape = rand();
        // One reading, a short run, a long run (several blocks), or scattered over the whole range.
        const n = shape < 0.3 ? 1 : shape < 0.6 ? 1 + Math.floor(rand() * 40) : shape < 0.8 ? 500 + Math.floor(rand() * 2500) : 1 + Math.floor(rand() * 300);
        const start = base + Math.floor(rand() * span);
        const scattered = shape >= 0.8;
        const batch: ObservationRecord[] = [];
        for (let i = 0; i < n; i++) {
          const ts = scattered ? base + Math.floor(rand() * span) : start + i * (1 + Math.floor(rand() * 3));
          const temperature = rand() < 0.1 ? null : Math.round(rand() * 1e6) / 1e4 - 30;
          const extra = rand() < 0.1 ? { tags: rand() < 0.5 ? ['hot'] : ['cold'], humidity: Math.floor(rand() * 100) } : null;
          batch.push({ ts, temperature, extra });
        }
        if (rand() < 0.2) batch.reverse();
        if (rand() < 0.2 && n > 1) batch.push({ ...batch[0]!, temperature: 99.5 }); // a repeat, given last: it wins
        await store.insertObservations(ids[k]!, batchOf(batch));
        for (const o of batch) models[k]!.set(o.ts, o);
      };

      const newestFirst = (k: number) => [...models[k]!.values()].sort((a, b) => b.ts - a.ts);

      const compare = async () => {
        checkBlocks(file);
        for (let k = 0; k < ids.length; k++) {
          const all = newestFirst(k);
          assert.deepEqual((await store.queryObservations(ids[k]!, { limit: 100_000 })).observations, all);
          // Keyset pages of random sizes: each page is the model's next slice, the cursor its last.
          let before: number | undefined;
          let seen = 0;
          for (;;) {
            const limit = 1 + Math.floor(rand() * 700);
            const q = { limit, ...(before === undefined ? {} : { before }) };
            const page = await store.queryObservations(ids[k]!, q);
            assert.deepEqual(page.observations, all.slice(seen, seen + limit));
            assert.deepEqual(await store.observationPageJson(ids[k]!, q), { json: pageJson(page.observations), nextBefore: page.nextBefore });
            seen += page.observations.length;
            if (page.nextBefore === null) break;
            assert.equal(page.nextBefore, all[seen - 1]!.ts);
            before = page.nextBefore;
          }
          assert.equal(seen, all.length);
          // A range, and a tag.
          const from = base + Math.floor(rand() * span);
          const to = from + Math.floor(rand() * span);
          assert.deepEqual(
            (await store.queryObservations(ids[k]!, { limit: 100_000, from, to })).observations,
            all.filter((o) => o.ts >= from && o.ts < to),
          );
          const hot = all.filter((o) => (o.extra?.tags as string[] | undefined)?.includes('hot'));
          assert.deepEqual((await store.queryObservations(ids[k]!, { limit: 100_000, tag: 'hot' })).observations, hot);
          // Buckets against the model.
          const size = 1000 + Math.floor(rand() * 5000);
          const buckets = new Map<number, ObservationRecord[]>();
          for (const o of [...all].reverse()) {
            if (o.ts < from || o.ts >= to) continue;
            const b = Math.trunc((o.ts - from) / size) * size + from;
            buckets.set(b, [...(buckets.get(b) ?? []), o]);
          }
          const got = await store.bucketObservations(ids[k]!, { from, to, bucketMs: size });
          assert.deepEqual(
            got.map((b) => [b.ts, b.count, b.min, b.max]),
            [...buckets].map(([b, os]) => {
              const ts = os.map((o) => o.temperature).filter((t): t is number => t !== null);
              return [b, os.length, ts.length ? Math.min(...ts) : null, ts.length ? Math.max(...ts) : null];
            }),
          );
          for (const b of got) {
            const ts = buckets
              .get(b.ts)!
              .map((o) => o.temperature)
              .filter((t): t is number => t !== null);
            if (!ts.length) assert.equal(b.avg, null);
            else assert.ok(Math.abs(b.avg! - ts.reduce((a, c) => a + c, 0) / ts.length) < 1e-9);
          }
        }
        // Solution-wide pages: devices in order, each newest first, every reading once.
        const want = ids.flatMap((id, k) => newestFirst(k).map((o) => ({ deviceId: id, observation: o })));
        const got: typeof want = [];
        let cursor: { device: number; ts: number } | undefined;
        for (;;) {
          const page = await store.querySolutionObservations(groupId, 'blocks', { limit: 1 + Math.floor(rand() * 900), ...(cursor ? { after: cursor } : {}) });
          got.push(...page.rows);
          if (!page.next) break;
          cursor = page.next;
        }
        assert.deepEqual(got, want);
        const counts = await store.countObservationsByTenant();
        assert.equal(counts.get('TNBLOCKS') ?? 0, want.length);
      };

      for (let round = 0; round < 6; round++) {
        for (let u = 0; u < 25; u++) await upload(Math.floor(rand() * ids.length));
        await compare();
      }
      // Retention: a cut inside the stored range removes exactly the readings before it.
      const now = base + span / 2 + 4 * DAY;
      await store.setRetention(groupId, 'blocks', 4);
      const cutoff = now - 4 * DAY;
      let expect = 0;
      for (const m of models) {
        for (const ts of [...m.keys()]) {
          if (ts < cutoff) {
            m.delete(ts);
            expect++;
          }
        }
      }
      assert.equal((await store.maintain(now)).rowsDeleted, expect);
      await compare();
      for (let u = 0; u < 20; u++) await upload(Math.floor(rand() * ids.length));
      for (const m of models) for (const ts of [...m.keys()]) if (ts < cutoff) m.delete(ts);
      await store.maintain(now);
      await compare();
      // Deleting a device deletes its readings and no other's.
      await store.deleteDevice(groupId, 'blocks', ids[1]!);
      ids.splice(1, 1);
      models.splice(1, 1);
      await compare();
      await store.close();
    });
  });
}

describe('sqlite blocks: every number reads back exactly, whichever form it is written in', () => {
  it('periodic, irregular and far-apart timestamps; decimal, awkward and missing temperatures', () => {
    const db = new Database(':memory:');
    db.function('reef_observation_json', { varargs: true }, () => null);
    for (const m of MIGRATIONS) {
      db.exec(m.sql);
      m.run?.(db);
    }
    const st = blockStatements(db);
    const t0 = Date.UTC(2026, 0, 1);
    const cases: [string, number[], number[]][] = [
      ['periodic, 4 decimals', [0, 1, 2, 3].map((i) => t0 + i * 1000), [21.5, -12.3456, 0, 2147.4836]],
      ['irregular, whole and none', [t0, t0 + 7, t0 + 8, t0 + 100_000], [20, Number.NaN, -40, 1e6]],
      ['gaps beyond 32 bits of ms', [t0 - 10 * 365 * 86_400_000, t0, t0 + 1], [0.1, 0.2, 0.3]],
      ['awkward doubles', [1, 2, 3, 4, 5, 6, 7, 8], [1 / 3, 5e-324, -0, 1e21, 0.1 + 0.2, 2 ** 53 + 2, -1.7976931348623157e308, 1e-7]],
      ['too many decimals for 32 bits', [10, 20, 30], [2147.483648, 1.0000001, 12345.678901]],
      ['one reading', [t0], [Number.NaN]],
      ['one reading, before 1970', [-86_400_001], [-273.15]],
    ];
    for (const [pk, [name, ts, t]] of cases.entries()) {
      insertBlocks(st, pk + 1, { n: ts.length, ts: Float64Array.from(ts), t: Float64Array.from(t), extra: null });
      const row = db
        .prepare('SELECT first_ts, last_ts, n, ts, t, extra FROM obs_blocks WHERE device_pk = ?')
        .raw(true)
        .get(pk + 1) as BlockRow;
      const back = decodeBlock(row);
      assert.deepEqual([...back.ts], ts, name);
      // Object.is per value: -0 stays -0, NaN (none) stays NaN.
      assert.ok(
        t.every((v, i) => Object.is(back.t[i], v)),
        `${name}: ${[...back.t]}`,
      );
      // Periodic readings of a few decimals (the common case) take 4 bytes each, the times 16 in all.
      if (pk === 0) assert.deepEqual([row[3].length, row[4].length], [16, 4 + 4 * 4]);
    }
    db.close();
  });
});

describe('sqlite blocks: readings with large free fields', () => {
  it('read back whole, one upload at a time, while no block that others joined holds much more than 64 KiB of their text', async () => {
    const file = path.join(fs.mkdtempSync(path.join(dir, 'x-')), 'reef.db');
    const { store, ids } = await setup(file);
    const t0 = Date.UTC(2026, 0, 1);
    const pad = (i: number) => `${i}`.padEnd(20_000, 'x');
    // One reading per upload, as a device reports: each would join the device's last block.
    for (let i = 0; i < 40; i++) await store.insertObservations(ids[0]!, batchOf([{ ts: t0 + i * 1000, temperature: i, extra: { pad: pad(i) } }]));
    const back = await store.queryObservations(ids[0]!, { limit: 100 });
    assert.equal(back.observations.length, 40);
    assert.deepEqual(
      back.observations.map((o) => o.extra?.pad),
      Array.from({ length: 40 }, (_, i) => pad(39 - i)),
    );
    await store.close();
    checkBlocks(file);
    const db = new Database(file, { readonly: true });
    try {
      const blocks = db.prepare('SELECT n, length(extra) AS bytes FROM obs_blocks').all() as { n: number; bytes: number }[];
      // A block stops taking readings at 64 KiB of text: it ends below that plus one reading's.
      for (const b of blocks) assert.ok(b.bytes < 64 * 1024 + 21_000, `a block of ${b.n} readings holds ${b.bytes} bytes of free fields`);
      assert.equal(
        blocks.reduce((s, b) => s + b.n, 0),
        40,
      );
    } finally {
      db.close();
    }
  });
});
