// The SQLite store's observation writer: a worker thread with its own connection to the
// database file that commits observation batches, so the main thread parses and validates the next
// uploads while this one waits for the commit's fsync (synchronous=FULL). Everything queued while a
// commit was under way goes into the next transaction: one fsync for many uploads (group commit).
// Plain JavaScript on purpose: worker threads do not inherit tsx's loader, so this file imports
// nothing from the TypeScript sources. The main side is SqliteStore (sqlite-store.ts), which sends
// ready rows (timestamps and temperatures in typed arrays, the latest row already rendered).
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { blockStatements, storeBatch } from './blocks.mjs';

const db = new Database(workerData.file);
db.pragma('journal_mode = WAL');
db.pragma(`synchronous = ${workerData.synchronous}`);
db.pragma('busy_timeout = 5000');

// The same statements as the store's own (blocks.mjs): readings go into the device's blocks, and
// the latest row only moves forward in time.
const devicePk = db.prepare('SELECT pk FROM devices WHERE id = ?').pluck();
const blocks = blockStatements(db);

/**
 * One batch: {deviceId, ts: Float64Array, temperature: Float64Array (NaN = none), extra: string[] | null,
 * newest: index of the newest row, wire: its rendered JSON}. Returns the rows written, or -1 when
 * the device does not exist.
 */
function write(b) {
  const pk = devicePk.get(b.deviceId);
  if (pk === undefined) return -1;
  if (!b.ts.length) return 0;
  storeBatch(blocks, pk, b);
  return b.ts.length;
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
