// Retention (docs/storage.md "Retention and upkeep"): a solution keeps its observations for its
// `retention_days`, or forever. SQLite has no partitions: upkeep deletes expired blocks, cuts the
// block a cutoff falls inside, and drops a latest row that expired.
import { ReefError } from '../../core/errors.ts';
import { checkRetention, retentionCutoff } from '../retention.ts';
import type { MaintenanceReport } from '../store.ts';
import { blockStatements, decodeBlock, insertBlocks, type BlockRow, type BlockStatements } from './blocks.ts';
import type { Row, SqliteContext } from './context.ts';

function statements(c: SqliteContext) {
  const p = (sql: string) => c.db.prepare(sql);
  return {
    setRetention: p('UPDATE solutions SET retention_days = ? WHERE group_id = ? AND name = ?'),
    getRetention: p('SELECT retention_days AS days FROM solutions WHERE group_id = ? AND name = ?'),
    retentions: p('SELECT group_id, name, retention_days AS days FROM solutions WHERE retention_days IS NOT NULL'),
    // Blocks wholly before the cutoff go; the one a cutoff falls inside is cut.
    // Answers each deleted block's reading count, so the rows gone are counted in the same pass.
    expireObs: p('DELETE FROM obs_blocks WHERE last_ts < ? AND device_pk IN (SELECT pk FROM devices WHERE group_id = ? AND solution = ?) RETURNING n').pluck(),
    straddling: p(`SELECT device_pk, first_ts, last_ts, n, ts, t, extra FROM obs_blocks
                   WHERE first_ts < @cutoff AND last_ts >= @cutoff AND device_pk IN (SELECT pk FROM devices WHERE group_id = @g AND solution = @s)`).raw(true),
    expireLatest: p('DELETE FROM latest WHERE ts < ? AND device_pk IN (SELECT pk FROM devices WHERE group_id = ? AND solution = ?)'),
  };
}

export class SqliteRetention {
  private readonly s: ReturnType<typeof statements>;
  private readonly blocks: BlockStatements;
  private readonly db;
  constructor(private readonly c: SqliteContext) {
    this.s = statements(c);
    this.blocks = blockStatements(c.db);
    this.db = c.db;
  }

  setRetention(groupId: string, solution: string, days: number | null) {
    return this.c.run(() => {
      checkRetention(days);
      if (this.s.setRetention.run(days, groupId, solution).changes === 0) throw new ReefError('SOLUTION_NOT_FOUND');
    });
  }
  getRetention(groupId: string, solution: string) {
    return this.c.run(() => {
      const r = this.s.getRetention.get(groupId, solution) as Row | undefined;
      if (!r) throw new ReefError('SOLUTION_NOT_FOUND');
      return (r.days ?? null) as number | null;
    });
  }
  /** SQLite has no partitions: expired observations are deleted by time range, per solution. */
  maintain(now = Date.now()): Promise<MaintenanceReport> {
    return this.c.run(() => {
      let rowsDeleted = 0;
      for (const r of this.s.retentions.all() as Row[]) {
        const cutoff = retentionCutoff(now, r.days as number);
        this.db
          .transaction(() => {
            for (const n of this.s.expireObs.all(cutoff, r.group_id, r.name) as number[]) rowsDeleted += n;
            for (const row of this.s.straddling.all({ cutoff, g: r.group_id, s: r.name }) as [number, ...BlockRow][]) {
              const [pk, ...block] = row;
              const b = decodeBlock(block as BlockRow);
              let k = 0;
              while (b.ts[k]! < cutoff) k++;
              rowsDeleted += k;
              this.blocks.remove.run(pk, block[0]);
              insertBlocks(this.blocks, pk, { n: b.n - k, ts: b.ts.subarray(k), t: b.t.subarray(k), extra: b.extra === null ? null : b.extra.slice(k) });
            }
            this.s.expireLatest.run(cutoff, r.group_id, r.name);
          })
          .immediate();
      }
      return { partitionsCreated: 0, partitionsDropped: 0, rowsDeleted };
    });
  }
}
