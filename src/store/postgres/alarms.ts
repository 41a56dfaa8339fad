// Alarms (src/alarms, docs/alarms.md): rules, alarms with their history (a jsonb document per
// alarm beside the columns its queries filter on), evaluation state and webhook deliveries.
import type { AlarmEvalState, AlarmRecord, AlarmRuleRecord, AlarmStatus, DeliveryStatus, WebhookDeliveryRecord } from '../../core/alarms.ts';
import type { AlarmQuery, RaiseItem } from '../store.ts';
import type { PostgresConnection, Row } from './connection.ts';

function pgRuleFromRow(r: Row): AlarmRuleRecord {
  return { id: r.id, groupId: r.group_id, tenantId: r.tenant_id, solution: r.solution, deviceId: r.device_id ?? null, spec: r.spec, createdAt: r.created_at, updatedAt: r.updated_at };
}

export class PostgresAlarms {
  constructor(private readonly c: PostgresConnection) {}

  async createAlarmRule(r: AlarmRuleRecord): Promise<void> {
    await this.c.q('INSERT INTO alarm_rules (id, group_id, tenant_id, solution, device_id, spec, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)', [
      r.id,
      r.groupId,
      r.tenantId,
      r.solution,
      r.deviceId,
      JSON.stringify(r.spec),
      r.createdAt,
      r.updatedAt,
    ]);
  }
  async updateAlarmRule(r: AlarmRuleRecord): Promise<boolean> {
    const res = await this.c.q('UPDATE alarm_rules SET device_id = $1, spec = $2, updated_at = $3 WHERE id = $4 AND group_id = $5 AND solution = $6', [
      r.deviceId,
      JSON.stringify(r.spec),
      r.updatedAt,
      r.id,
      r.groupId,
      r.solution,
    ]);
    return (res.rowCount ?? 0) > 0;
  }
  async deleteAlarmRule(groupId: string, solution: string, id: string): Promise<boolean> {
    return this.c.tx(async (c) => {
      const res = await c.query('DELETE FROM alarm_rules WHERE id = $1 AND group_id = $2 AND solution = $3', [id, groupId, solution]);
      if (!res.rowCount) return false;
      await c.query('DELETE FROM alarm_states WHERE rule_id = $1', [id]);
      return true;
    });
  }
  async getAlarmRule(groupId: string, solution: string, id: string): Promise<AlarmRuleRecord | null> {
    const r = await this.c.q('SELECT * FROM alarm_rules WHERE id = $1 AND group_id = $2 AND solution = $3', [id, groupId, solution]);
    return r.rows[0] ? pgRuleFromRow(r.rows[0]) : null;
  }
  async listAlarmRules(groupId: string, solution: string): Promise<AlarmRuleRecord[]> {
    const r = await this.c.q('SELECT * FROM alarm_rules WHERE group_id = $1 AND solution = $2 ORDER BY created_at, id', [groupId, solution]);
    return r.rows.map(pgRuleFromRow);
  }
  async countGroupObjects(groupId: string): Promise<{ solutions: number; templates: number; alarmRules: number }> {
    const r = await this.c.q(
      `SELECT (SELECT count(*) FROM solutions WHERE group_id = $1)::int AS solutions, (SELECT count(*) FROM device_templates WHERE group_id = $1)::int AS templates,
              (SELECT count(*) FROM alarm_rules WHERE group_id = $1)::int AS "alarmRules"`,
      [groupId],
    );
    return r.rows[0] as { solutions: number; templates: number; alarmRules: number };
  }
  async countAlarmRules(groupId: string, solution: string): Promise<number> {
    return (await this.c.q('SELECT count(*)::int AS n FROM alarm_rules WHERE group_id = $1 AND solution = $2', [groupId, solution])).rows[0]!.n as number;
  }
  async allAlarmRules(): Promise<AlarmRuleRecord[]> {
    return (await this.c.q('SELECT * FROM alarm_rules ORDER BY created_at, id')).rows.map(pgRuleFromRow);
  }
  async insertAlarm(a: AlarmRecord): Promise<boolean> {
    const r = await this.c.q(
      `INSERT INTO alarms (id, group_id, solution, device_id, rule_id, status, raised_at, doc) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                            ON CONFLICT (rule_id, device_id) WHERE status IN ('raised', 'acknowledged') DO NOTHING`,
      [a.id, a.groupId, a.solution, a.deviceId, a.ruleId, a.status, a.raisedAt, JSON.stringify(a)],
    );
    return (r.rowCount ?? 0) > 0;
  }
  async raiseAlarms(items: readonly RaiseItem[]): Promise<boolean[]> {
    if (!items.length) return [];
    return this.c.tx(async (c) => {
      const out: boolean[] = [];
      for (const { alarm: a, state, delivery: d } of items) {
        const r = await c.query(
          `INSERT INTO alarms (id, group_id, solution, device_id, rule_id, status, raised_at, doc) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                            ON CONFLICT (rule_id, device_id) WHERE status IN ('raised', 'acknowledged') DO NOTHING`,
          [a.id, a.groupId, a.solution, a.deviceId, a.ruleId, a.status, a.raisedAt, JSON.stringify(a)],
        );
        const inserted = (r.rowCount ?? 0) > 0;
        out.push(inserted);
        if (!inserted) continue;
        await c.query('INSERT INTO alarm_states (rule_id, device_id, state) VALUES ($1, $2, $3) ON CONFLICT (rule_id, device_id) DO UPDATE SET state = excluded.state', [
          a.ruleId,
          a.deviceId,
          JSON.stringify(state),
        ]);
        if (d) {
          await c.query('INSERT INTO alarm_deliveries (id, group_id, solution, status, next_at, created_at, doc) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
            d.id,
            d.groupId,
            d.solution,
            d.status,
            d.nextAt,
            d.createdAt,
            JSON.stringify(d),
          ]);
        }
      }
      return out;
    });
  }
  async updateAlarm(a: AlarmRecord, expect: AlarmStatus): Promise<boolean> {
    const r = await this.c.q('UPDATE alarms SET status = $1, doc = $2 WHERE id = $3 AND status = $4', [a.status, JSON.stringify(a), a.id, expect]);
    return (r.rowCount ?? 0) > 0;
  }
  async updateAlarms(items: readonly { alarm: AlarmRecord; expect: AlarmStatus }[]): Promise<boolean[]> {
    if (!items.length) return [];
    return this.c.tx(async (c) => {
      const out: boolean[] = [];
      for (const { alarm: a, expect } of items) {
        const r = await c.query('UPDATE alarms SET status = $1, doc = $2 WHERE id = $3 AND status = $4', [a.status, JSON.stringify(a), a.id, expect]);
        out.push((r.rowCount ?? 0) > 0);
      }
      return out;
    });
  }
  async getAlarm(groupId: string, solution: string, id: string): Promise<AlarmRecord | null> {
    const r = await this.c.q('SELECT doc FROM alarms WHERE id = $1 AND group_id = $2 AND solution = $3', [id, groupId, solution]);
    return r.rows[0] ? (r.rows[0].doc as AlarmRecord) : null;
  }
  async listAlarms(groupId: string, solution: string, q: AlarmQuery): Promise<AlarmRecord[]> {
    const args: unknown[] = [groupId, solution];
    const where = ['group_id = $1', 'solution = $2'];
    if (q.deviceId !== undefined) where.push(`device_id = $${args.push(q.deviceId)}`);
    if (q.ruleId !== undefined) where.push(`rule_id = $${args.push(q.ruleId)}`);
    if (q.statuses?.length) where.push(`status = ANY($${args.push(q.statuses)}::text[])`);
    if (q.after) where.push(`(raised_at, id) < ($${args.push(q.after.raisedAt)}::bigint, $${args.push(q.after.id)}::text COLLATE "C")`);
    const r = await this.c.q(`SELECT doc FROM alarms WHERE ${where.join(' AND ')} ORDER BY raised_at DESC, id DESC LIMIT $${args.push(q.limit)}`, args);
    return r.rows.map((x) => x.doc as AlarmRecord);
  }
  async activeAlarms(): Promise<AlarmRecord[]> {
    return (await this.c.q("SELECT doc FROM alarms WHERE status IN ('raised', 'acknowledged')")).rows.map((x) => x.doc as AlarmRecord);
  }
  async activeAlarmCounts(groupId: string, solution: string): Promise<{ deviceId: string; count: number }[]> {
    const r = await this.c.q(
      `SELECT device_id AS d, count(*)::int AS n FROM alarms WHERE group_id = $1 AND solution = $2 AND status IN ('raised', 'acknowledged')
                            GROUP BY device_id ORDER BY device_id`,
      [groupId, solution],
    );
    return r.rows.map((x) => ({ deviceId: x.d as string, count: x.n as number }));
  }
  async listAlarmStates(): Promise<{ ruleId: string; deviceId: string; state: AlarmEvalState }[]> {
    return (await this.c.q('SELECT rule_id, device_id, state FROM alarm_states')).rows.map((x) => ({ ruleId: x.rule_id, deviceId: x.device_id, state: x.state as AlarmEvalState }));
  }
  async setAlarmState(ruleId: string, deviceId: string, state: AlarmEvalState | null): Promise<void> {
    if (state === null) await this.c.q('DELETE FROM alarm_states WHERE rule_id = $1 AND device_id = $2', [ruleId, deviceId]);
    else {
      await this.c.q('INSERT INTO alarm_states (rule_id, device_id, state) VALUES ($1, $2, $3) ON CONFLICT (rule_id, device_id) DO UPDATE SET state = excluded.state', [
        ruleId,
        deviceId,
        JSON.stringify(state),
      ]);
    }
  }
  async insertDelivery(d: WebhookDeliveryRecord): Promise<void> {
    await this.c.q('INSERT INTO alarm_deliveries (id, group_id, solution, status, next_at, created_at, doc) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      d.id,
      d.groupId,
      d.solution,
      d.status,
      d.nextAt,
      d.createdAt,
      JSON.stringify(d),
    ]);
  }
  async updateDelivery(d: WebhookDeliveryRecord): Promise<void> {
    await this.c.q('UPDATE alarm_deliveries SET status = $1, next_at = $2, doc = $3 WHERE id = $4', [d.status, d.nextAt, JSON.stringify(d), d.id]);
  }
  async getDelivery(groupId: string, solution: string, id: string): Promise<WebhookDeliveryRecord | null> {
    const r = await this.c.q('SELECT doc FROM alarm_deliveries WHERE id = $1 AND group_id = $2 AND solution = $3', [id, groupId, solution]);
    return r.rows[0] ? (r.rows[0].doc as WebhookDeliveryRecord) : null;
  }
  async dueDeliveries(now: number, limit: number): Promise<WebhookDeliveryRecord[]> {
    const r = await this.c.q("SELECT doc FROM alarm_deliveries WHERE status = 'pending' AND next_at <= $1 ORDER BY next_at, id LIMIT $2", [now, limit]);
    return r.rows.map((x) => x.doc as WebhookDeliveryRecord);
  }
  async listDeliveries(groupId: string, solution: string, status: DeliveryStatus, limit: number, before?: { createdAt: number; id: string }): Promise<WebhookDeliveryRecord[]> {
    const r = before
      ? await this.c.q(
          `SELECT doc FROM alarm_deliveries WHERE group_id = $1 AND solution = $2 AND status = $3 AND (created_at, id) < ($4::bigint, $5::text COLLATE "C")
                      ORDER BY created_at DESC, id DESC LIMIT $6`,
          [groupId, solution, status, before.createdAt, before.id, limit],
        )
      : await this.c.q('SELECT doc FROM alarm_deliveries WHERE group_id = $1 AND solution = $2 AND status = $3 ORDER BY created_at DESC, id DESC LIMIT $4', [groupId, solution, status, limit]);
    return r.rows.map((x) => x.doc as WebhookDeliveryRecord);
  }
}
