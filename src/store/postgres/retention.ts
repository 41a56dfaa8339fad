// Retention (docs/storage.md "Retention and upkeep"): a solution keeps its observations for its
// `retention_days`, or forever. Its devices' rows live in that many days' tier of the partitioned
// observations table, so upkeep drops whole expired partitions instead of deleting rows.
import pg from 'pg';
import { ReefError } from '../../core/errors.ts';
import { checkRetention, retentionCutoff } from '../retention.ts';
import type { MaintenanceReport } from '../store.ts';
import { DAY, numArray, type PostgresConnection } from './connection.ts';
import { LOCK_PARTITIONS } from './migrations.ts';

export class PostgresRetention {
  constructor(private readonly c: PostgresConnection) {}

  async setRetention(groupId: string, solution: string, days: number | null): Promise<void> {
    checkRetention(days);
    const tier = days ?? 0;
    try {
      await this.c.tx(async (c) => {
        await c.query('SELECT reef_ensure_tier($1)', [tier]);
        const s = await c.query('UPDATE solutions SET retention_days = $1 WHERE group_id = $2 AND name = $3', [days, groupId, solution]);
        if (s.rowCount === 0) throw new ReefError('SOLUTION_NOT_FOUND');
        // RETURNING sees the new row: the old tier comes from the locked pre-image.
        const moved = await c.query(
          `UPDATE devices d SET tier = $1
           FROM (SELECT pk, tier FROM devices WHERE group_id = $2 AND solution = $3 AND tier <> $1 FOR UPDATE) o
           WHERE d.pk = o.pk RETURNING d.pk, o.tier AS old`,
          [tier, groupId, solution],
        );
        if (moved.rowCount === 0) return;
        this.c.keys.clear();
        // The devices' rows change tier: make the new tier's partitions for their times, then let
        // PostgreSQL move the rows (an UPDATE of the partition key moves them between partitions).
        const pks = moved.rows.map((x) => x.pk as number);
        const olds = [...new Set(moved.rows.map((x) => x.old as number))];
        const dayRows = await c.query('SELECT DISTINCT ts / 86400000 AS day FROM observations WHERE tier = ANY($1::int[]) AND device_pk = ANY($2::bigint[])', [numArray(olds), numArray(pks)]);
        this.c.parts.addTier(tier);
        const need = new Map<number, { tier: number; start: number; end: number }>();
        const now = Date.now();
        for (const x of dayRows.rows) {
          const ts = (x.day as number) * DAY;
          for (const m of this.c.parts.missing([ts], now)) if (m.tier === tier) need.set(m.start, m);
        }
        for (const m of this.c.parts.ahead(now)) if (m.tier === tier) need.set(m.start, m);
        await this.c.ensureRanges([...need.values()], c);
        await c.query('UPDATE observations SET tier = $1 WHERE tier = ANY($2::int[]) AND device_pk = ANY($3::bigint[])', [tier, numArray(olds), numArray(pks)]);
      });
    } finally {
      // The cache may have noted partitions of a transaction that rolled back: read it afresh.
      await this.c.loadPartitions().catch(() => undefined);
    }
  }

  async getRetention(groupId: string, solution: string): Promise<number | null> {
    const r = await this.c.q('SELECT retention_days FROM solutions WHERE group_id = $1 AND name = $2', [groupId, solution]);
    if (!r.rows[0]) throw new ReefError('SOLUTION_NOT_FOUND');
    return r.rows[0].retention_days ?? null;
  }

  async maintain(now = Date.now()): Promise<MaintenanceReport> {
    await this.c.loadPartitions();
    const report: MaintenanceReport = { partitionsCreated: 0, partitionsDropped: 0, rowsDeleted: 0 };
    report.partitionsCreated = await this.c.ensureRanges(this.c.parts.ahead(now));
    for (const tier of this.c.parts.tierList()) {
      if (tier === 0) continue;
      const cutoff = retentionCutoff(now, tier);
      let boundary = cutoff;
      for (const r of this.c.parts.ranges(tier)) {
        if (r.end <= cutoff) {
          const name = `obs_t${tier}_${new Date(r.start).toISOString().slice(0, 10).replace(/-/g, '')}`;
          // DROP takes a brief ACCESS EXCLUSIVE lock on the tier; never queue behind a long
          // reader (which would stall every insert queued behind us): give up, retry next run.
          await this.c.tx(async (c) => {
            await c.query(`SET LOCAL lock_timeout = '2s'`);
            await c.query('SELECT pg_advisory_xact_lock($1)', [LOCK_PARTITIONS.toString()]);
            await c.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(name)}`);
          });
          report.partitionsDropped++;
        } else if (r.start < boundary) boundary = r.start;
      }
      // Out-of-window timestamps live in the default partition: expire those row by row.
      const d = await this.c.q(`DELETE FROM ${pg.escapeIdentifier(`obs_t${tier}_default`)} WHERE ts < $1`, [cutoff]);
      report.rowsDeleted += d.rowCount ?? 0;
      // Every observation of the tier older than `boundary` is gone, so is a latest that old.
      await this.c.q('DELETE FROM latest l USING devices d WHERE d.pk = l.device_pk AND d.tier = $1 AND l.ts < $2', [tier, boundary]);
    }
    await this.c.loadPartitions();
    return report;
  }
}
