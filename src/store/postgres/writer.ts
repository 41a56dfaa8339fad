// The PostgreSQL store's group writer (docs/storage.md "PostgreSQL: the write path"): observation
// batches queue here and are written in groups, one transaction each, by binary COPY (copy.ts)
// where a batch's time span is free and by an unnest upsert where it is not; groups of devices
// whose keys the node knows go in one round trip on a pipelined connection of their own.
import pg from 'pg';
import { ReefError } from '../../core/errors.ts';
import { lastWins, type ObservationBatch } from '../../core/observation-batch.ts';
import type { DeviceRef } from '../../core/types.ts';
import { type InsertResult, type ManyInsertResult, manyResult } from '../store.ts';
import { numArray, textArray, type PostgresConnection } from './connection.ts';
import { COPY_BATCH, copyAndCommitMessage, copyInAndCommit, type CopyRows, jsonbExtras, sendCopy } from './copy.ts';
import { isUnavailable, translate } from './errors.ts';
import { writeGroupStarted } from '../../metrics/metrics.ts';

// Concurrent uploads are written in groups, one transaction per group (group commit: one WAL
// flush for many batches), each batch still settling on its own. A group is three statements.
// The head finds (and share-locks, against a concurrent delete or retention change) each batch's
// device, moves each device's latest forward, and asks whether any stored row of the device lies
// in the batch's time span. Batches whose span is free go in together by one binary COPY
// (no statement per row, no per-row conflict check; see COPY_BATCH for how it inserts); the
// others are merged by an unnest upsert each (an upload of the same device and timestamp
// replaces). Two nodes racing one device into the same span both see it free: the second COPY
// meets the first's rows in the unique index, and its batches are redone one by one as merges.
// A batch whose device the node had read by group and solution (Pending.owner) is written only to a
// device of that group and solution: one made again under the same id elsewhere is not it.
const GROUP_HEAD = `
WITH u AS (
  SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::float8[], $6::text[], $7::text[], $8::text[]) WITH ORDINALITY AS u(id, lo, hi, nts, nt, nx, g, s, i)
),
d AS (
  SELECT u.i, v.pk, v.tier, u.lo, u.hi, u.nts, u.nt, u.nx FROM u JOIN devices v ON v.id = u.id COLLATE "C"
    AND (u.g IS NULL OR (v.group_id = u.g COLLATE "C" AND v.solution = u.s COLLATE "C")) FOR SHARE OF v
),
l AS (
  INSERT INTO latest (device_pk, ts, temperature, extra)
  SELECT pk, nts, nt, nx::jsonb FROM d ORDER BY pk
  ON CONFLICT (device_pk) DO UPDATE SET ts = excluded.ts, temperature = excluded.temperature, extra = excluded.extra
  WHERE excluded.ts >= latest.ts
)
SELECT d.i, d.pk, d.tier, EXISTS (SELECT 1 FROM observations o WHERE o.tier = d.tier AND o.device_pk = d.pk AND o.ts >= d.lo AND o.ts <= d.hi) AS taken FROM d`;

/**
 * A group's transaction starts with the head's plan fixed: PostgreSQL plans a prepared statement
 * anew on each run while it judges a plan for the actual values cheaper, and the head's EXISTS over
 * the partitioned observations table was planned for every group, partitions and all (7 % of
 * PostgreSQL's CPU during uploads, perf). The generic plan prunes partitions as it runs.
 * Without sequential scans, too: the generic plan cannot know a group names a handful of devices,
 * and with a thousand devices it hashed the whole devices table for every group (EXPLAIN ANALYZE:
 * a seq scan of 1,000 rows against an index probe per batch); a partition analyzed while nearly
 * empty would likewise be scanned whole until analyzed again. Every probe of the head is by key.
 */
const WRITE_SETTINGS = 'SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL enable_seqscan = off';
const BEGIN_WRITE = `BEGIN; ${WRITE_SETTINGS}`;

/**
 * The head of a group whose devices' keys (pk, tier) the node knows (from the route's device read
 * or an earlier group): sent in the same query as the COPY and COMMIT, one round trip for the group.
 * It locks the devices and moves their latest as GROUP_HEAD does, and fails the transaction, before
 * the COPY runs, when any device is gone or in another tier than the node thought (another node
 * deleted it or changed its solution's retention): the node forgets those keys and writes the group
 * the two-round-trip way. It does not ask whether a batch's span is taken: a batch repeating a stored
 * (device, time) fails the COPY on the unique index, and the group is written again batch by batch,
 * merging (writeGroup). A free span, the usual upload, pays nothing for the check.
 */
const GROUP_HEAD_KNOWN = `
WITH u AS (
  SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[], $4::bigint[], $5::float8[], $6::text[]) AS u(id, pk, tier, nts, nt, nx)
),
d AS (
  SELECT u.pk, u.nts, u.nt, u.nx FROM u JOIN devices v ON v.id = u.id COLLATE "C" AND v.pk = u.pk AND v.tier = u.tier FOR SHARE OF v
),
l AS (
  INSERT INTO latest (device_pk, ts, temperature, extra)
  SELECT pk, nts, nt, nx::jsonb FROM d ORDER BY pk
  ON CONFLICT (device_pk) DO UPDATE SET ts = excluded.ts, temperature = excluded.temperature, extra = excluded.extra
  WHERE excluded.ts >= latest.ts
)
SELECT reef_expect_devices((SELECT count(*) FROM d), cardinality($1::text[]))`;

/** The group heads, prepared once per connection (SQL PREPARE, so that EXECUTE can share a round trip with BEGIN). */
const PREPARE_HEADS = `PREPARE reef_group_head(text[], bigint[], bigint[], bigint[], float8[], text[], text[], text[]) AS ${GROUP_HEAD};
PREPARE reef_group_head_known(text[], bigint[], int[], bigint[], float8[], text[]) AS ${GROUP_HEAD_KNOWN}`;
/** A device's key changed since the node learnt it (GROUP_HEAD_KNOWN's check). */
function isKeyChanged(e: unknown): boolean {
  const cause = (e instanceof ReefError ? e.cause : e) as { code?: string } | undefined;
  return cause?.code === 'RF001';
}

/**
 * Groups in flight at once per node, and a group's size. Groups of devices whose keys the node
 * knows (the usual upload) are pipelined on one connection (PostgresStore.pipelined); the others
 * each take a pooled connection. Three, not two: with four uploads in flight on two shared cores, a
 * third group keeps PostgreSQL working while one commits and the node parses; the machine's cores
 * were busy 1.63–1.70 of 2 against 1.50–1.60 with two, and uploads were faster in 4 of 5
 * alternated pairs. Four did no better than three.
 */
const WRITERS = 3;
const GROUP_BATCHES = 64;
/**
 * While a group is being written, another starts only with at least this many batches: a group
 * costs PostgreSQL CPU whatever its size (the head, the COPY's setup, the commit's WAL flush: about
 * 0.3 ms one after another, and about 1 ms when groups ran at once on pooled connections), and with
 * four uploads in flight and a writer free for each, every group held one batch (1,000 groups per
 * million rows). A lone batch waits for the group in flight, whose end pumps again, and goes with
 * the batches that arrived meanwhile: half as many groups. On pooled connections PostgreSQL spent
 * 2.29–2.57 µs per observation uploaded against 2.56–3.11; pipelined, 1.63–1.67 against 1.82–1.97
 * (docs/performance.md, "PostgreSQL: groups, binary COPY, one pipelined connection").
 */
const MIN_EXTRA_GROUP = 2;
const GROUP_ROWS = 100_000;

/** A batch waiting for its group: its rows (repeated timestamps collapsed), and what the head needs. */
interface Pending {
  deviceId: string;
  /**
   * The device as the node last read it (Store.uploadDevice may have answered the upload from that
   * read): the batch is written to no device of another group or solution. Undefined when unknown.
   */
  owner: DeviceRef | undefined;
  batch: ObservationBatch;
  /** The caller's count (before repeated timestamps were collapsed). */
  written: number;
  from: number;
  to: number;
  newestTs: number;
  newestT: number | null;
  /** The newest row's free-form fields as JSON, or null. */
  newestX: string | null;
  resolve(r: InsertResult): void;
  reject(e: unknown): void;
}

const MERGE_BATCH = `
INSERT INTO observations (device_pk, ts, temperature, extra, tier)
SELECT $1::bigint, u.ts, u.t, NULLIF(u.x, 'null'::jsonb), $2::int
FROM ROWS FROM (unnest($3::bigint[]), unnest($4::float8[]), jsonb_array_elements($5::jsonb)) AS u(ts, t, x)
ON CONFLICT (device_pk, ts, tier) DO UPDATE SET temperature = excluded.temperature, extra = excluded.extra`;

/** A waiting batch's rows for the group's COPY, under its device's key: the typed arrays as they are. */
function copyRowsOf(p: Pending, key: { pk: number; tier: number }): CopyRows {
  const b = p.batch;
  return { pk: key.pk, tier: key.tier, ts: b.ts, temps: b.temperature, extras: b.extra && jsonbExtras(b.extra) };
}

/** A batch's free-form fields as MERGE_BATCH's JSON list; ROWS FROM pads a shorter function with NULLs, so '[]' when none has any. */
function mergeExtras(b: ObservationBatch): string {
  return b.extra ? JSON.stringify(b.extra) : '[]';
}

/**
 * A group head's arguments as SQL literals, comma-separated: the devices, two numbers per batch (its
 * span for GROUP_HEAD, its device's pk and tier for GROUP_HEAD_KNOWN), then each batch's newest row,
 * and with `owners` (GROUP_HEAD) the group and solution each batch's device is expected in.
 */
function headArgs(c: pg.ClientBase, group: Pending[], second: readonly number[], third: readonly number[], owners = false): string {
  const args = [
    textArray(group.map((p) => p.deviceId)),
    numArray(second),
    numArray(third),
    numArray(group.map((p) => p.newestTs)),
    numArray(group.map((p) => p.newestT)),
    textArray(group.map((p) => p.newestX)),
  ];
  if (owners) args.push(textArray(group.map((p) => p.owner?.groupId ?? null)), textArray(group.map((p) => p.owner?.solution ?? null)));
  return args.map((a) => c.escapeLiteral(a)).join(', ');
}

/** Every timestamp of a group, for the partitions it needs. */
function* groupTimestamps(group: Pending[]): Generator<number> {
  for (const p of group) yield* p.batch.ts;
}

/** A COPY met a row already stored (a concurrent upload of the same device and time span). */
function isRowConflict(e: unknown): boolean {
  const cause = (e instanceof ReefError ? e.cause : e) as { code?: string; table?: string } | undefined;
  return cause?.code === '23505' && typeof cause.table === 'string' && cause.table.startsWith('obs_');
}
export class PostgresWriter {
  constructor(private readonly c: PostgresConnection) {}

  /** Batches already accepted are written (or fail); then the pipelined connection ends. */
  async close(): Promise<void> {
    if (this.writers || this.pending.length) await new Promise<void>((r) => this.drained.push(r));
    const writer = this.writer;
    this.writer = null;
    await writer?.then((c) => c.end()).catch(() => {});
  }

  /**
   * Queues one device's batch for a group. ON CONFLICT cannot touch one row twice in a statement,
   * nor COPY add one twice: repeated timestamps are collapsed first, the later one winning, as when
   * the rows are written one after another. The typed arrays go into the COPY as they are.
   */
  async insertObservations(deviceId: string, given: ObservationBatch): Promise<InsertResult> {
    const written = given.ts.length;
    if (!written) {
      await this.c.devicePk(deviceId); // DEVICE_NOT_FOUND as for any batch; nothing to write
      return { written: 0 };
    }
    const batch = lastWins(given);
    const { ts, temperature, extra, newest } = batch;
    let from = ts[0]!;
    let to = from;
    for (let i = 1; i < ts.length; i++) {
      const t = ts[i]!;
      if (t < from) from = t;
      if (t > to) to = t;
    }
    const t = temperature[newest]!;
    const x = extra?.[newest];
    return new Promise((resolve, reject) => {
      this.pending.push({
        deviceId,
        owner: this.c.keys.get(deviceId)?.ref,
        batch,
        written,
        from,
        to,
        newestTs: ts[newest]!,
        newestT: Number.isNaN(t) ? null : t,
        newestX: x ? JSON.stringify(x) : null,
        resolve,
        reject,
      });
      this.pump();
    });
  }

  /** Batches waiting for a group, in call order. */
  private pending: Pending[] = [];
  /** Devices with a batch in a group in flight: their next batch waits, so call order is kept. */
  private readonly busy = new Set<string>();
  private writers = 0;
  private readonly drained: (() => void)[] = [];

  /**
   * Starts a group of the waiting batches (call order, one per device) while fewer than WRITERS
   * are in flight, a second or third one only with MIN_EXTRA_GROUP batches or more: batches that
   * arrive meanwhile join the next group rather than each taking a transaction. Several in flight
   * keep PostgreSQL busy while another group waits on its commit, or, pipelined, is on its way (on
   * pooled connections one writer spent less CPU per row but uploaded more slowly).
   */
  private pump(): void {
    while (this.writers < WRITERS && this.pending.length) {
      const group: Pending[] = [];
      const rest: Pending[] = [];
      const inGroup = new Set<string>();
      let rows = 0;
      for (const p of this.pending) {
        if (group.length < GROUP_BATCHES && rows < GROUP_ROWS && !this.busy.has(p.deviceId) && !inGroup.has(p.deviceId)) {
          group.push(p);
          inGroup.add(p.deviceId);
          rows += p.batch.ts.length;
        } else rest.push(p);
      }
      if (!group.length) return; // every waiting batch's device is in flight: its group's end pumps again
      if (this.writers > 0 && group.length < MIN_EXTRA_GROUP) return; // the group in flight pumps again when it ends
      this.pending = rest;
      this.writers++;
      for (const id of inGroup) this.busy.add(id);
      const timer = writeGroupStarted('postgres', group.length);
      void this.writeGroup(group).finally(() => {
        timer();
        this.writers--;
        for (const id of inGroup) this.busy.delete(id);
        if (!this.writers && !this.pending.length) for (const r of this.drained.splice(0)) r();
        this.pump();
      });
    }
  }

  /**
   * Writes a group and settles each of its batches; never rejects. `fast`: in one round trip when
   * every device's key is known (writeKnown); a group written again batch by batch after a failure
   * takes the head's way, which merges a batch into rows already stored.
   */
  private async writeGroup(group: Pending[], fast = true): Promise<void> {
    try {
      if (!this.c.partsLoaded) await this.c.loadPartitions();
      // Only a batch that no existing range holds whole has timestamps worth looking at one by one.
      const spill = group.filter((p) => !this.c.parts.holds(p.from, p.to));
      if (spill.length) {
        const missing = this.c.parts.missing(groupTimestamps(spill), Date.now());
        if (missing.length) await this.c.ensureRanges(missing);
      }
      const found = (fast && (await this.writeKnown(group))) || (await this.writeTx(group, false));
      await this.learnTiers(group, found);
      for (let i = 0; i < group.length; i++) {
        if (found[i]) group[i]!.resolve({ written: group[i]!.written });
        else group[i]!.reject(new ReefError('DEVICE_NOT_FOUND'));
      }
    } catch (e) {
      if (group.length > 1) {
        // One batch's failure must not fail the others: write them one by one.
        for (const p of group) await this.writeGroup([p], false);
        return;
      }
      const p = group[0]!;
      if (!isRowConflict(e)) return p.reject(e);
      try {
        const found = await this.writeTx(group, true);
        await this.learnTiers(group, found);
        if (found[0]) p.resolve({ written: p.written });
        else p.reject(new ReefError('DEVICE_NOT_FOUND'));
      } catch (e2) {
        p.reject(e2);
      }
    }
  }

  /** Connections (pooled clients) on which the group heads are prepared: PREPARE lasts a session. */
  private readonly headPrepared = new WeakSet<pg.PoolClient>();

  private async prepareHeads(c: pg.PoolClient): Promise<void> {
    if (this.headPrepared.has(c)) return;
    await c.query(PREPARE_HEADS);
    this.headPrepared.add(c);
  }

  /**
   * A group whose every device's key is known, in one round trip: BEGIN, GROUP_HEAD_KNOWN, the COPY
   * and COMMIT in one simple query, the COPY's data behind it (CopyAndCommit). Undefined, having
   * written nothing, when a key is unknown or has changed (forgotten then); a row conflict rejects
   * as the COPY of writeTx does.
   */
  private async writeKnown(group: Pending[]): Promise<({ pk: number; tier: number } | undefined)[] | undefined> {
    const found: { pk: number; tier: number }[] = new Array(group.length);
    for (let i = 0; i < group.length; i++) {
      const k = this.c.keys.get(group[i]!.deviceId);
      if (!k) return undefined;
      found[i] = k;
    }
    const opened = this.pipelined();
    try {
      const c = await opened;
      const args = headArgs(
        c,
        group,
        found.map((k) => k.pk),
        found.map((k) => k.tier),
      );
      const batches = group.map((p, i) => copyRowsOf(p, found[i]!));
      // No BEGIN and COMMIT: the statements of one simple query are one transaction, committed
      // when the last succeeds and rolled back whole when one fails, after which the connection
      // is idle again for the group written behind it (PostgreSQL protocol, "Multiple Statements
      // in a Simple Query"). An explicit transaction would stay open, failed, under the next group.
      await sendCopy(c, copyAndCommitMessage(`${WRITE_SETTINGS}; EXECUTE reef_group_head_known(${args}); ${COPY_BATCH}`, batches));
    } catch (e) {
      if (isUnavailable(e)) {
        // The pipelined connection broke or could not be opened (PostgreSQL restarting, or it
        // ended the connection): the group is written again the two-round-trip way, through the
        // pool, whose head finds the spans taken by a commit that made it before the break, and
        // merges the batch over its own rows.
        if (this.writer === opened) this.writer = null;
        opened.then((c) => c.end()).catch(() => {});
        return undefined;
      }
      if (!isKeyChanged(e)) translate(e);
      for (const p of group) this.c.keys.delete(p.deviceId);
      return undefined;
    }
    return found;
  }

  /**
   * The connection groups of known devices are written on, in pipeline mode: a group's round trip
   * is written as soon as the group forms, behind those still in flight, and PostgreSQL starts it
   * the moment the one before commits. One backend, never waiting on this process between groups:
   * with a pooled connection per group, three backends inserting into the same partitions at once
   * spent a quarter more CPU per row (WAL insertion and buffer locks, and the sleeps and wake-ups
   * around them) and one such connection sat idle for each round trip (docs/performance.md,
   * "PostgreSQL: groups, binary COPY, one pipelined connection"). Opened on first use; a connection that fails fails the groups in
   * flight on it (each is then written again through the pool) and is replaced.
   */
  private pipelined(): Promise<pg.Client> {
    if (this.writer) return this.writer;
    const client = this.c.client({ pipeline: true });
    // Rejects with pg's own error: writeKnown tells a connection that cannot be had from others.
    const opened = (async () => {
      try {
        await client.connect();
        await client.query(PREPARE_HEADS);
        return client;
      } catch (e) {
        client.end().catch(() => {});
        throw e;
      }
    })();
    const forget = () => {
      if (this.writer === opened) this.writer = null;
    };
    // The groups in flight get the error themselves (pg fails every query sent on the connection).
    client.on('error', forget);
    client.on('end', forget);
    opened.catch(forget);
    this.writer = opened;
    return opened;
  }
  private writer: Promise<pg.Client> | null = null;

  /**
   * One transaction: the head, one COPY of the batches whose span is free, a merge for each other
   * one. Two round trips when no batch is merged (the driver alone would need five): the
   * transaction's start and the head go as one simple query (the head prepared once per connection,
   * its arrays sent as literals), and the COPY's data and the COMMIT go with the COPY
   * (CopyAndCommit). With four uploads in
   * flight the groups wait on round trips more than on PostgreSQL's CPU.
   */
  private writeTx(group: Pending[], merge: boolean): Promise<({ pk: number; tier: number } | undefined)[]> {
    return this.c.tx(
      async (c) => {
        await this.prepareHeads(c);
        const args = headArgs(
          c,
          group,
          group.map((p) => p.from),
          group.map((p) => p.to),
          true,
        );
        // A simple query of several statements answers one result per statement: the head's is the last.
        const results = (await c.query(`${BEGIN_WRITE}; EXECUTE reef_group_head(${args})`)) as unknown as pg.QueryResult[];
        const head = results[results.length - 1]!;
        const found: ({ pk: number; tier: number } | undefined)[] = new Array(group.length);
        const batches: CopyRows[] = [];
        for (const d of head.rows as { i: number; pk: number; tier: number; taken: boolean }[]) {
          const p = group[d.i - 1]!;
          found[d.i - 1] = d;
          this.c.knowKey(p.deviceId, d.pk, d.tier);
          if (merge || d.taken) await c.query({ name: 'insert-merge', text: MERGE_BATCH, values: [d.pk, d.tier, numArray(p.batch.ts), numArray(p.batch.temperature), mergeExtras(p.batch)] });
          else batches.push(copyRowsOf(p, d));
        }
        if (batches.length) await copyInAndCommit(c, batches);
        else await c.query('COMMIT');
        return found;
      },
      null,
      true,
    );
  }

  /** A retention tier made by another node: learn it, and make the batches' partitions there (which moves their rows out of its default partition). */
  private async learnTiers(group: Pending[], found: ({ pk: number; tier: number } | undefined)[]): Promise<void> {
    for (let i = 0; i < group.length; i++) {
      const d = found[i];
      if (!d || this.c.parts.hasTier(d.tier)) continue;
      try {
        await this.c.loadPartitions();
        await this.c.ensureRanges(this.c.parts.missing(group[i]!.batch.ts, Date.now()).filter((m) => m.tier === d.tier));
      } catch {
        // The rows are stored (in the tier's default partition); upkeep makes the partitions.
      }
    }
  }

  async insertObservationsMany(items: { deviceId: string; batch: ObservationBatch }[]): Promise<ManyInsertResult> {
    // Queued together, so they share groups (and commits) as far as one batch per device allows.
    return manyResult(items, await Promise.allSettled(items.map((it) => this.insertObservations(it.deviceId, it.batch))));
  }
}
