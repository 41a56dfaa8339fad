// The SQLite store's observation writer (issue 18): a worker thread with its own connection to the
// database file that commits observation batches, so the main thread parses and validates the next
// uploads while this one waits for the commit's fsync (synchronous=FULL). Everything queued while a
// commit was under way goes into the next transaction: one fsync for many uploads (group commit).
// Plain JavaScript on purpose: worker threads do not inherit tsx's loader, so this file imports
// nothing from the TypeScript sources. The main side is SqliteStore (sqlite-store.ts), which sends
// ready rows (timestamps and temperatures in typed arrays, the latest row already rendered).
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { blockStatements, normalize, writeBlocks } from './blocks.mjs';

const db = new Database(workerData.file);
db.pragma('journal_mode = WAL');
db.pragma(`synchronous = ${workerData.synchronous}`);
db.pragma('busy_timeout = 5000');

// The same statements as the store's own (sqlite-store.ts, blocks.mjs): readings go into the
// device's blocks, and the latest row only moves forward in time.
const devicePk = db.prepare('SELECT pk FROM devices WHERE id = ?').pluck();
const blocks = blockStatements(db);
const upsertLatest = db.prepare(`INSERT INTO latest (device_pk, ts, temperature, extra, wire, item)
  VALUES (@pk, @ts, @t, @extra, @wire, '{"deviceId":"' || (SELECT id FROM devices WHERE pk = @pk) || '","observations":[' || @wire || ']}')
  ON CONFLICT (device_pk) DO UPDATE SET ts = excluded.ts, temperature = excluded.temperature, extra = excluded.extra, wire = excluded.wire, item = excluded.item
  WHERE excluded.ts >= latest.ts`);

/**
 * One batch: {deviceId, ts: Float64Array, temperature: Float64Array (NaN = none), extra: string[] | null,
 * newest: index of the newest row, wire: its rendered JSON}. Returns the rows written, or -1 when
 * the device does not exist.
 */
function write(b) {
  const pk = devicePk.get(b.deviceId);
  if (pk === undefined) return -1;
  const n = b.ts.length;
  if (!n) return 0;
  const { ts, temperature, extra } = b;
  writeBlocks(blocks, pk, normalize(ts, temperature, extra));
  const k = b.newest;
  const t = temperature[k];
  upsertLatest.run({ pk, ts: ts[k], t: t === t ? t : null, extra: extra === null ? null : extra[k], wire: b.wire });
  return n;
}

const error = (e) => ({ code: e?.code ?? '', message: e?.message ?? String(e) });

parentPort.on('message', (m) => {
  if (m.close) {
    db.close();
    parentPort.postMessage({ closed: true });
    return;
  }
  // The whole group in one transaction; if it fails, each batch alone, so one bad batch fails
  // only its own upload and each stays all or nothing.
  let results;
  try {
    results = db.transaction(() => m.batches.map(write)).immediate();
  } catch (e) {
    results = m.batches.map((b) => {
      try {
        return db.transaction(() => write(b)).immediate();
      } catch (e2) {
        return error(e2);
      }
    });
  }
  parentPort.postMessage({ id: m.id, results });
});
