// The SQLite store's write engine (docs/storage.md "SQLite: the write path"): observation batches
// queue here and are committed in groups, on the writer thread (writer-thread.ts, its own
// connection) for a database file, or on this thread for ':memory:' or after the thread failed.
import { Worker } from 'node:worker_threads';
import { ReefError } from '../../core/errors.ts';
import { observationJsonText } from '../../core/observation-json.ts';
import type { ObservationBatch } from '../../core/observation-batch.ts';
import { type InsertResult, type ManyInsertResult, manyResult } from '../store.ts';
import { blockStatements, storeBatch, type BlockStatements } from './blocks.ts';
import type { SqliteContext, SqliteOptions } from './context.ts';
import type { FromWriter, ToWriter } from './writer-thread.ts';
import { translated } from './errors.ts';
import { writeGroupStarted } from '../../metrics/metrics.ts';

interface Queued {
  deviceId: string;
  batch: ObservationBatch;
  resolve: (r: InsertResult) => void;
  reject: (e: unknown) => void;
}

/**
 * A batch as the writer thread takes it: the numbers as they are, free fields as JSON text, the
 * newest rendered. The typed arrays are copied by postMessage, not moved: the caller still
 * publishes the batch once it is stored (a copy of 16 bytes an observation).
 */
function handed(deviceId: string, batch: ObservationBatch) {
  const { ts, temperature, newest } = batch;
  const n = ts.length;
  let extra: (string | null)[] | null = null;
  if (batch.extra) {
    extra = new Array<string | null>(n);
    for (let i = 0; i < n; i++) {
      const x = batch.extra[i];
      extra[i] = x ? JSON.stringify(x) : null;
    }
  }
  const t = temperature[newest]!;
  return { deviceId, ts, temperature, extra, newest, wire: n ? observationJsonText(ts[newest]!, Number.isNaN(t) ? null : t, extra?.[newest] ?? null) : '' };
}

/**
 * Groups handed to the writer thread at once: the next group waits in the writer's queue while one
 * commits, so the writer starts it without a round trip to this thread (which measured ~0.4 ms
 * per group: the result's message, this thread finishing what it was doing, the next message).
 */
const WRITER_GROUPS = 2;
/** Most observations the writer thread commits in one transaction (see sendToWriter). */
const GROUP_ROWS = 50_000;

/**
 * How the writer thread is started: a worker inherits neither `--import tsx` nor the loader
 * bin/reef.js registers, so a line of JavaScript registers tsx's loader in the new thread and then
 * imports writer-thread.ts through it (the same under `npm start`, bin/reef.js and the tests).
 */
const WRITER_THREAD = `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((tsx) => { tsx.register(); return import(${JSON.stringify(new URL('./writer-thread.ts', import.meta.url).href)}); })`;

export class SqliteWriter {
  private readonly db;
  private readonly devicePk;
  private readonly blocks: BlockStatements;
  private thread: Worker | null = null;
  /**
   * The groups handed to the writer thread, oldest first (at most WRITER_GROUPS): the one it is
   * committing and the one it takes next; further batches wait in `queued`.
   */
  private inFlight: Queued[][] = [];
  /** Each in-flight group's metrics timer (docs/operations.md "Metrics and logs"), in the same order. */
  private timers: (() => void)[] = [];
  private drained: (() => void)[] = [];
  private queued: Queued[] = [];

  constructor(
    private readonly c: SqliteContext,
    private opts: SqliteOptions,
  ) {
    this.db = c.db;
    this.devicePk = c.db.prepare('SELECT pk FROM devices WHERE id = ?').pluck();
    this.blocks = blockStatements(c.db);
  }

  /** Without the writer thread, every other store call first writes what is queued (SqliteStore.run). */
  flushInline(): void {
    if (this.queued.length && !this.thread) this.flushQueued();
  }

  /** Writes what is queued, waits for the writer thread's groups, then stops the thread. */
  async close(): Promise<void> {
    if (this.db.open) this.flushQueued();
    if (this.inFlight.length || this.queued.length) await new Promise<void>((r) => this.drained.push(r));
    const w = this.thread;
    if (w) {
      this.thread = null;
      await new Promise<void>((resolve) => {
        w.once('exit', () => resolve());
        w.once('message', () => void w.terminate());
        w.ref(); // an unreferenced worker would let the event loop end while close() waits
        w.postMessage({ close: true } satisfies ToWriter);
      });
    }
  }

  /**
   * Group commit: batches handed in during one turn of the event loop, or while the previous group
   * was being committed, are written in one transaction: concurrent uploads share one commit and
   * one fsync instead of one each. With a database file the commit runs on the writer thread
   * (writer-thread.ts) while this thread goes on parsing. Each caller's promise settles only after
   * the commit holding its batch (synchronous=FULL: on disk), so a 201 still means stored; each
   * batch stays all or nothing, and one failing batch never fails the others (the group is retried
   * one by one). Without the thread, every other store call first writes what is queued (flushInline).
   */
  insertObservations(deviceId: string, batch: ObservationBatch): Promise<InsertResult> {
    return new Promise((resolve, reject) => {
      this.queued.push({ deviceId, batch, resolve, reject });
      if (this.queued.length === 1 && this.inFlight.length < WRITER_GROUPS) setImmediate(this.flushQueued);
    });
  }

  private readonly flushQueued = (): void => {
    if (!this.queued.length || this.inFlight.length >= WRITER_GROUPS || !this.db.open) {
      if (!this.queued.length && !this.inFlight.length) this.drained.splice(0).forEach((r) => r());
      if (this.queued.length && !this.db.open) this.queued.splice(0).forEach((it) => it.reject(translated(new TypeError('The database connection is not open'))));
      return;
    }
    if (this.opts.writerThread !== false && this.opts.file !== ':memory:') {
      while (this.queued.length && this.inFlight.length < WRITER_GROUPS) this.sendToWriter();
      return;
    }
    const items = this.queued;
    this.queued = [];
    const timer = writeGroupStarted('sqlite', items.length);
    const outcome = (it: Queued): InsertResult | ReefError => {
      const pk = this.devicePk.get(it.deviceId) as number | undefined;
      if (pk === undefined) return new ReefError('DEVICE_NOT_FOUND');
      const n = it.batch.ts.length;
      if (n) this.writeBatch(pk, it.batch);
      return { written: n };
    };
    const settle = (it: Queued, r: InsertResult | ReefError) => (r instanceof ReefError ? it.reject(r) : it.resolve(r));
    let results: (InsertResult | ReefError)[] | null = null;
    try {
      results = this.db.transaction(() => items.map(outcome)).immediate();
    } catch (e) {
      if (items.length === 1) items[0]!.reject(translated(e));
    }
    timer();
    if (results) items.forEach((it, i) => settle(it, results![i]!));
    else if (items.length > 1) {
      for (const it of items) {
        try {
          settle(it, this.db.transaction(() => outcome(it)).immediate());
        } catch (e) {
          it.reject(translated(e));
        }
      }
    }
    this.drained.splice(0).forEach((r) => r());
  };

  private sendToWriter(): void {
    const w = (this.thread ??= this.startWriter());
    // A group holds at most GROUP_ROWS observations (always at least one batch), so one commit
    // stays short and the uploads behind it are not held up by an ever larger transaction.
    let n = 0;
    let rows = 0;
    while (n < this.queued.length && (n === 0 || rows + this.queued[n]!.batch.ts.length <= GROUP_ROWS)) rows += this.queued[n++]!.batch.ts.length;
    const items = this.queued.splice(0, n);
    this.inFlight.push(items);
    this.timers.push(writeGroupStarted('sqlite', items.length));
    const batches = items.map((it) => handed(it.deviceId, it.batch));
    w.ref();
    w.postMessage({ batches } satisfies ToWriter);
  }

  private startWriter(): Worker {
    const w = new Worker(WRITER_THREAD, { eval: true, workerData: { file: this.opts.file, synchronous: this.opts.synchronous ?? 'FULL' } });
    w.on('message', (m: FromWriter) => {
      if (!('results' in m)) return;
      const items = this.inFlight.shift()!;
      this.timers.shift()?.();
      m.results.forEach((r, i) => {
        const it = items[i]!;
        if (typeof r !== 'number') it.reject(translated(Object.assign(new Error(r.message), { code: r.code })));
        else if (r < 0) it.reject(new ReefError('DEVICE_NOT_FOUND'));
        else it.resolve({ written: r });
      });
      if (this.queued.length) this.sendToWriter();
      else if (!this.inFlight.length) {
        w.unref();
        this.drained.splice(0).forEach((r) => r());
      }
    });
    // A writer that dies takes no batch with it silently: what it held is refused with 503 (it may
    // or may not have been committed; re-sending is safe, as the same timestamps replace), and later
    // batches are written on this thread.
    const failed = (e: unknown) => {
      if (this.thread !== w) return; // closed on purpose, or already handled
      this.thread = null;
      this.opts = { ...this.opts, writerThread: false };
      this.timers = [];
      this.inFlight
        .splice(0)
        .flat()
        .forEach((it) => it.reject(new ReefError('STORE_UNAVAILABLE', 'the database writer failed; retry shortly', { retryAfter: 1, cause: e })));
      if (this.queued.length) setImmediate(this.flushQueued);
      else this.drained.splice(0).forEach((r) => r());
    };
    w.on('error', failed);
    w.on('exit', (code) => failed(new Error(`the writer thread exited (code ${code})`)));
    w.unref();
    return w;
  }

  /**
   * Several devices' batches (a simulation tick, the gateway's readings) through the same queue as
   * uploads: every observation write takes this one route. Queued in one turn, they share a group,
   * so a tick is one commit as long as it fits in one (GROUP_ROWS).
   */
  async insertObservationsMany(items: { deviceId: string; batch: ObservationBatch }[]): Promise<ManyInsertResult> {
    return manyResult(items, await Promise.allSettled(items.map((it) => this.insertObservations(it.deviceId, it.batch))));
  }

  /** Stores one device's batch in its blocks and moves its latest row forward; the caller holds a transaction. */
  private writeBatch(pk: number, batch: ObservationBatch): void {
    storeBatch(this.blocks, pk, handed('', batch));
  }
}
