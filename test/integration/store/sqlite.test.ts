import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { storeConformance } from './conformance/index.ts';
import { COUNT_TENANT_DEVICES, SqliteStore } from '../../../src/store/sqlite/sqlite-store.ts';
import { batchOf } from '../../../src/core/observation-batch.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-sqlite-'));

storeConformance('sqlite', {
  async open() {
    const s = new SqliteStore({ file: path.join(dir, 'reef.db') });
    await s.migrate();
    return s;
  },
  async cleanup() {
    fs.rmSync(dir, { recursive: true, force: true });
  },
});

// The SQLite store commits uploads on a writer thread, several at a time (group commit): what a
// caller relies on is that every acknowledged batch is stored — also when more is queued than one
// group takes — that the data is there for a fresh connection (on disk, not only in the thread),
// and that closing the store waits for what is still being written.
describe('sqlite: group commit on the writer thread', () => {
  it('75,000 observations handed in at once are all acknowledged, stored, and visible to another connection', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'reef-sqlite-group-')), 'reef.db');
    const store = new SqliteStore({ file });
    await store.migrate();
    const ids = Array.from({ length: 30 }, () => randomUUID());
    for (const id of ids) await store.createDevice({ id, tenantId: 'T', groupId: 'G', solution: 's', deviceType: 'VirtualDevice', domainInfo: {} });
    const t0 = Date.UTC(2026, 0, 1);
    const pending = ids.map((id, d) => store.insertObservations(id, batchOf(Array.from({ length: 2500 }, (_, i) => ({ ts: t0 + i * 1000, temperature: d + i / 1000, extra: null })))));
    // close() right away: it must wait for the queued and in-flight groups, not drop them.
    const closed = store.close();
    assert.deepEqual(
      (await Promise.all(pending)).map((r) => r.written),
      ids.map(() => 2500),
    );
    await closed;
    const db = new Database(file, { readonly: true });
    try {
      assert.equal((db.prepare('SELECT sum(n) AS n FROM obs_blocks').get() as { n: number }).n, 75_000);
      assert.equal((db.prepare('SELECT count(*) AS n FROM latest').get() as { n: number }).n, 30);
    } finally {
      db.close();
    }
  });

  it('if the writer thread dies, uploads go on being stored on the main thread', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'reef-sqlite-writer-')), 'reef.db');
    const store = new SqliteStore({ file });
    await store.migrate();
    const id = randomUUID();
    await store.createDevice({ id, tenantId: 'T', groupId: 'G', solution: 's', deviceType: 'VirtualDevice', domainInfo: {} });
    const t0 = Date.UTC(2026, 0, 1);
    await store.insertObservations(id, batchOf([{ ts: t0, temperature: 1, extra: null }]));
    // The thread is private; ending it from outside stands for a crash of the thread.
    const writer = (store as unknown as { writes: { thread: import('node:worker_threads').Worker } }).writes.thread;
    await writer.terminate();
    assert.deepEqual(await store.insertObservations(id, batchOf([{ ts: t0 + 1, temperature: 2, extra: null }])), { written: 1 });
    assert.deepEqual(
      (await store.queryObservations(id, { limit: 10 })).observations.map((o) => o.temperature),
      [2, 1],
    );
    await store.close();
  });
});

describe('sqlite: the writer thread dying with groups in flight', () => {
  it('every upload settles: stored and acknowledged, or refused as STORE_UNAVAILABLE and not half stored', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'reef-sqlite-writer2-')), 'reef.db');
    const store = new SqliteStore({ file });
    await store.migrate();
    const ids = Array.from({ length: 60 }, () => randomUUID());
    for (const id of ids) await store.createDevice({ id, tenantId: 'T', groupId: 'G', solution: 's', deviceType: 'VirtualDevice', domainInfo: {} });
    const t0 = Date.UTC(2026, 0, 1);
    await store.insertObservations(ids[0]!, batchOf([{ ts: t0 - 1000, temperature: 0, extra: null }])); // the writer thread is up
    const writer = (store as unknown as { writes: { thread: import('node:worker_threads').Worker } }).writes.thread;
    // 60 uploads of 2,500: three groups (50,000 observations at most), two handed to the thread and
    // one waiting; then the thread ends (as a crash would).
    const pending = ids.map((id) => store.insertObservations(id, batchOf(Array.from({ length: 2500 }, (_, i) => ({ ts: t0 + i * 1000, temperature: i, extra: null })))));
    await new Promise((r) => setImmediate(r));
    await writer.terminate();
    const outcomes = await Promise.allSettled(pending);
    for (const [k, o] of outcomes.entries()) {
      const stored = (await store.queryObservations(ids[k]!, { limit: 10_000, from: t0 })).observations.length;
      if (o.status === 'fulfilled') assert.equal(stored, 2500, 'an acknowledged upload is stored whole');
      else {
        assert.equal((o.reason as { code?: string }).code, 'STORE_UNAVAILABLE');
        assert.ok(stored === 0 || stored === 2500, `a refused upload is all or nothing (${stored})`);
      }
    }
    assert.ok(
      outcomes.some((o) => o.status === 'fulfilled'),
      'the uploads behind the lost groups are stored on the main thread',
    );
    assert.deepEqual(await store.insertObservations(ids[1]!, batchOf([{ ts: t0 + 1e9, temperature: 1, extra: null }])), { written: 1 });
    await store.close();
  });
});

// Latest of all is remembered per solution until the database changes: a change by any
// connection must show at once — the writer thread, another process's connection, this one's own.
describe('sqlite: remembered latest of all', () => {
  it('shows uploads, another connection’s writes and its own deletes at once', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'reef-sqlite-latest-')), 'reef.db');
    const store = new SqliteStore({ file });
    await store.migrate();
    const other = new SqliteStore({ file, writerThread: false });
    await other.migrate();
    try {
      const [a, b] = [randomUUID(), randomUUID()];
      for (const id of [a, b]) await store.createDevice({ id, tenantId: 'T', groupId: 'G', solution: 's', deviceType: 'VirtualDevice', domainInfo: {} });
      const t0 = Date.UTC(2026, 0, 1);
      const temps = async () =>
        (JSON.parse((await store.latestObservationsJson('G', 's')).toString()) as { deviceId: string; observations: { temperature: number }[] }[]).map((g) => [
          g.deviceId,
          g.observations[0]!.temperature,
        ]);
      assert.deepEqual(await temps(), []);
      await store.insertObservations(a, batchOf([{ ts: t0, temperature: 1, extra: null }])); // the writer thread
      assert.deepEqual(await temps(), [[a, 1]]);
      assert.deepEqual(await temps(), [[a, 1]]); // remembered, same answer
      await other.insertObservations(b, batchOf([{ ts: t0, temperature: 2, extra: null }])); // another connection (as another process)
      assert.deepEqual(await temps(), [
        [a, 1],
        [b, 2],
      ]);
      await other.insertObservations(a, batchOf([{ ts: t0 + 1, temperature: 3, extra: null }]));
      assert.deepEqual(await temps(), [
        [a, 3],
        [b, 2],
      ]);
      assert.equal(await store.deleteDevice('G', 's', b), true); // this connection's own write
      assert.deepEqual(await temps(), [[a, 3]]);
    } finally {
      await other.close();
      await store.close();
    }
  });
});

describe('sqlite: the device quota', () => {
  it("an account's devices are a kept count, one row read, moved by every insert and delete (the store's or not)", async () => {
    const quotaDir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-sqlite-quota-'));
    const file = path.join(quotaDir, 'reef.db');
    const s = new SqliteStore({ file });
    await s.migrate();
    try {
      for (let i = 0; i < 30; i++) await s.createDevice({ id: `q-${i}`, tenantId: i % 3 ? 'A' : 'B', groupId: 'G', solution: 's', deviceType: 'VirtualDevice', domainInfo: {} });
      assert.equal(await s.countDevices('A'), 20);
      assert.equal(await s.countDevices('B'), 10);
      assert.equal(await s.countDevices('C'), 0);
      const db = new Database(file);
      try {
        // Rows written by another hand (an operator's SQL) are counted all the same.
        db.prepare("INSERT INTO devices (id, tenant_id, group_id, solution, device_type, domain_info, created_at) VALUES ('raw', 'C', 'G', 's', 'V', '{}', 0)").run();
        db.prepare("DELETE FROM devices WHERE id IN ('q-1', 'q-2', 'q-3')").run();
        const plan = (db.prepare(`EXPLAIN QUERY PLAN ${COUNT_TENANT_DEVICES}`).all('A') as { detail: string }[]).map((r) => r.detail).join('; ');
        assert.match(plan, /^SEARCH device_counts USING PRIMARY KEY \(tenant_id=\?\)$/, plan);
      } finally {
        db.close();
      }
      assert.deepEqual([await s.countDevices('A'), await s.countDevices('B'), await s.countDevices('C')], [18, 9, 1]);
    } finally {
      await s.close();
      fs.rmSync(quotaDir, { recursive: true, force: true });
    }
  });
});
