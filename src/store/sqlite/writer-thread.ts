// The SQLite store's observation writer: a worker thread with its own connection to the
// database file that commits observation batches, so the main thread parses and validates the next
// uploads while this one waits for the commit's fsync (synchronous=FULL). Everything queued while a
// commit was under way goes into the next transaction: one fsync for many uploads (group commit).
// The main side is writer.ts, which starts this file (through tsx, see startWriterThread) and sends
// ready rows (timestamps and temperatures in typed arrays, the latest row already rendered).
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { blockStatements, type HandedBatch, storeBatch } from './blocks.ts';

/** What the main side sends: a group of batches to commit, or the request to close. */
export type ToWriter = { close: true } | { batches: (HandedBatch & { deviceId: string })[] };
/** What it answers: per batch the rows written, -1 for a device that does not exist, or the driver's error. */
export type FromWriter = { closed: true } | { results: (number | { code: string; message: string })[] };

const port = parentPort!;
const { file, synchronous } = workerData as { file: string; synchronous: 'FULL' | 'NORMAL' };
const db = new Database(file);
db.pragma('journal_mode = WAL');
db.pragma(`synchronous = ${synchronous}`);
db.pragma('busy_timeout = 5000');

// The same statements as the main thread's (blocks.ts): readings go into the device's blocks, and
// the latest row only moves forward in time.
const devicePk = db.prepare('SELECT pk FROM devices WHERE id = ?').pluck();
const blocks = blockStatements(db);

/** One batch: the rows written, or -1 when the device does not exist. */
function write(b: HandedBatch & { deviceId: string }): number {
  const pk = devicePk.get(b.deviceId) as number | undefined;
  if (pk === undefined) return -1;
  if (!b.ts.length) return 0;
  storeBatch(blocks, pk, b);
  return b.ts.length;
}

const error = (e: unknown) => ({ code: (e as { code?: string })?.code ?? '', message: (e as Error)?.message ?? String(e) });

port.on('message', (m: ToWriter) => {
  if ('close' in m) {
    db.close();
    port.postMessage({ closed: true } satisfies FromWriter);
    return;
  }
  // The whole group in one transaction; if it fails, each batch alone, so one bad batch fails
  // only its own upload and each stays all or nothing.
  let results: FromWriter & { results: unknown };
  try {
    results = { results: db.transaction(() => m.batches.map(write)).immediate() };
  } catch {
    results = {
      results: m.batches.map((b) => {
        try {
          return db.transaction(() => write(b)).immediate();
        } catch (e2) {
          return error(e2);
        }
      }),
    };
  }
  port.postMessage(results);
});
