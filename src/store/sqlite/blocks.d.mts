// Types for blocks.mjs (plain JavaScript so the writer thread can import it).
import type Database from 'better-sqlite3';

/** One device's readings as columns: ascending unique timestamps, temperatures (NaN: none), free-field texts. */
export interface Columns {
  n: number;
  ts: Float64Array;
  t: Float64Array;
  extra: (string | null)[] | null;
}
/** A block row as the statements return it (raw): first_ts, last_ts, n, ts, t, extra. */
export type BlockRow = [first: number, last: number, n: number, ts: Buffer, t: Buffer, extra: string | null];
export interface BlockStatements {
  latest: Database.Statement;
  atOrBefore: Database.Statement;
  before: Database.Statement;
  remove: Database.Statement;
  insert: Database.Statement;
}
export const BLOCK_MAX: number;
export function blockStatements(db: Database.Database): BlockStatements;
export function decodeBlock(row: BlockRow): Columns;
export function insertBlocks(st: BlockStatements, pk: number, c: Columns): void;
/** A batch as the store hands it to the writer (sqlite-store.ts packBatch). */
export interface HandedBatch {
  ts: Float64Array;
  temperature: Float64Array;
  extra: (string | null)[] | null;
  newest: number;
  wire: string;
}
export function storeBatch(st: BlockStatements, pk: number, b: HandedBatch): void;
