// What every aggregate of the SQLite store (accounts.ts, devices.ts, ...) shares: the main
// thread's connection, and `run`, which settles a call as a promise with driver errors translated
// (errors.ts) after first writing any observations still queued on this thread (writer.ts).
import type Database from 'better-sqlite3';

export type Row = Record<string, any>;

export interface SqliteContext {
  readonly db: Database.Database;
  run<T>(f: () => T): Promise<T>;
}

export interface SqliteOptions {
  /** File path, or ':memory:'. */
  file: string;
  /**
   * FULL fsyncs every commit, so an acknowledged upload survives a power cut; NORMAL survives a
   * process crash only (SQLite docs, "WAL mode and synchronous").
   */
  synchronous?: 'FULL' | 'NORMAL';
  /**
   * Commit observation uploads on a writer thread with its own connection (writer-thread.ts), so
   * parsing the next uploads overlaps the commit's fsync. Files only; default true.
   */
  writerThread?: boolean;
  /**
   * Blocks a bucketed read aggregates per turn of the event loop (BUCKET_CHUNK by default; tests
   * make it small to cross chunk boundaries often).
   */
  bucketChunk?: number;
}
