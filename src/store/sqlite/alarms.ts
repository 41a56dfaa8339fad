// Alarms (src/alarms, docs/alarms.md): rules, alarms with their history (a JSON document per
// alarm beside the columns its queries filter on), evaluation state and webhook deliveries.
import type { AlarmEvalState, AlarmRecord, AlarmRuleRecord, AlarmStatus, DeliveryStatus, WebhookDeliveryRecord } from '../../core/alarms.ts';
import type { AlarmQuery, RaiseItem } from '../store.ts';
import type { Row, SqliteContext } from './context.ts';

function ruleFromRow(r: Row): AlarmRuleRecord {
  return { id: r.id, groupId: r.group_id, tenantId: r.tenant_id, solution: r.solution, deviceId: r.device_id ?? null, spec: JSON.parse(r.spec), createdAt: r.created_at, updatedAt: r.updated_at };
}

export class SqliteAlarms {
  constructor(private readonly c: SqliteContext) {}

  createAlarmRule(r: AlarmRuleRecord) {
    return this.c.run(() => {
      this.c.db
        .prepare('INSERT INTO alarm_rules (id, group_id, tenant_id, solution, device_id, spec, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
        .run(r.id, r.groupId, r.tenantId, r.solution, r.deviceId, JSON.stringify(r.spec), r.createdAt, r.updatedAt);
    });
  }
  updateAlarmRule(r: AlarmRuleRecord) {
    return this.c.run(
      () =>
        this.c.db
          .prepare('UPDATE alarm_rules SET device_id = ?, spec = ?, updated_at = ? WHERE id = ? AND group_id = ? AND solution = ?')
          .run(r.deviceId, JSON.stringify(r.spec), r.updatedAt, r.id, r.groupId, r.solution).changes > 0,
    );
  }
  deleteAlarmRule(groupId: string, solution: string, id: string) {
    return this.c.run(() =>
      this.c.db.transaction(() => {
        const n = this.c.db.prepare('DELETE FROM alarm_rules WHERE id = ? AND group_id = ? AND solution = ?').run(id, groupId, solution).changes;
        if (n) this.c.db.prepare('DELETE FROM alarm_states WHERE rule_id = ?').run(id);
        return n > 0;
      })(),
    );
  }
  getAlarmRule(groupId: string, solution: string, id: string) {
    return this.c.run(() => {
      const r = this.c.db.prepare('SELECT * FROM alarm_rules WHERE id = ? AND group_id = ? AND solution = ?').get(id, groupId, solution) as Row | undefined;
      return r ? ruleFromRow(r) : null;
    });
  }
  listAlarmRules(groupId: string, solution: string) {
    return this.c.run(() => (this.c.db.prepare('SELECT * FROM alarm_rules WHERE group_id = ? AND solution = ? ORDER BY created_at, id').all(groupId, solution) as Row[]).map(ruleFromRow));
  }
  countGroupObjects(groupId: string) {
    return this.c.run(
      () =>
        this.c.db
          .prepare(
            `SELECT (SELECT count(*) FROM solutions WHERE group_id = @g) AS solutions, (SELECT count(*) FROM device_templates WHERE group_id = @g) AS templates,
                    (SELECT count(*) FROM alarm_rules WHERE group_id = @g) AS alarmRules`,
          )
          .get({ g: groupId }) as { solutions: number; templates: number; alarmRules: number },
    );
  }
  countAlarmRules(groupId: string, solution: string) {
    return this.c.run(() => this.c.db.prepare('SELECT count(*) FROM alarm_rules WHERE group_id = ? AND solution = ?').pluck().get(groupId, solution) as number);
  }
  allAlarmRules() {
    return this.c.run(() => (this.c.db.prepare('SELECT * FROM alarm_rules ORDER BY created_at, id').all() as Row[]).map(ruleFromRow));
  }
  insertAlarm(a: AlarmRecord) {
    return this.c.run(
      () =>
        this.c.db
          .prepare(`INSERT INTO alarms (id, group_id, solution, device_id, rule_id, status, raised_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                       ON CONFLICT (rule_id, device_id) WHERE status IN ('raised', 'acknowledged') DO NOTHING`)
          .run(a.id, a.groupId, a.solution, a.deviceId, a.ruleId, a.status, a.raisedAt, JSON.stringify(a)).changes > 0,
    );
  }
  raiseAlarms(items: readonly RaiseItem[]) {
    return this.c.run(() =>
      this.c.db.transaction(() =>
        items.map(({ alarm: a, state, delivery: d }) => {
          const inserted =
            this.c.db
              .prepare(`INSERT INTO alarms (id, group_id, solution, device_id, rule_id, status, raised_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                       ON CONFLICT (rule_id, device_id) WHERE status IN ('raised', 'acknowledged') DO NOTHING`)
              .run(a.id, a.groupId, a.solution, a.deviceId, a.ruleId, a.status, a.raisedAt, JSON.stringify(a)).changes > 0;
          if (!inserted) return false;
          this.c.db
            .prepare('INSERT INTO alarm_states (rule_id, device_id, state) VALUES (?, ?, ?) ON CONFLICT (rule_id, device_id) DO UPDATE SET state = excluded.state')
            .run(a.ruleId, a.deviceId, JSON.stringify(state));
          if (d) {
            this.c.db
              .prepare('INSERT INTO alarm_deliveries (id, group_id, solution, status, next_at, created_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?)')
              .run(d.id, d.groupId, d.solution, d.status, d.nextAt, d.createdAt, JSON.stringify(d));
          }
          return true;
        }),
      )(),
    );
  }
  updateAlarm(a: AlarmRecord, expect: AlarmStatus) {
    return this.c.run(() => this.c.db.prepare('UPDATE alarms SET status = ?, doc = ? WHERE id = ? AND status = ?').run(a.status, JSON.stringify(a), a.id, expect).changes > 0);
  }
  updateAlarms(items: readonly { alarm: AlarmRecord; expect: AlarmStatus }[]) {
    return this.c.run(() =>
      this.c.db.transaction(() => {
        const st = this.c.db.prepare('UPDATE alarms SET status = ?, doc = ? WHERE id = ? AND status = ?');
        return items.map(({ alarm: a, expect }) => st.run(a.status, JSON.stringify(a), a.id, expect).changes > 0);
      })(),
    );
  }
  getAlarm(groupId: string, solution: string, id: string) {
    return this.c.run(() => {
      const r = this.c.db.prepare('SELECT doc FROM alarms WHERE id = ? AND group_id = ? AND solution = ?').pluck().get(id, groupId, solution) as string | undefined;
      return r ? (JSON.parse(r) as AlarmRecord) : null;
    });
  }
  listAlarms(groupId: string, solution: string, q: AlarmQuery) {
    return this.c.run(() => {
      const where = ['group_id = @g', 'solution = @s'];
      const args: Record<string, unknown> = { g: groupId, s: solution, limit: q.limit };
      if (q.deviceId !== undefined) {
        where.push('device_id = @d');
        args.d = q.deviceId;
      }
      if (q.ruleId !== undefined) {
        where.push('rule_id = @r');
        args.r = q.ruleId;
      }
      if (q.statuses?.length) {
        where.push(`status IN (${q.statuses.map((_, i) => `@st${i}`).join(', ')})`);
        for (const [i, st] of q.statuses.entries()) args[`st${i}`] = st;
      }
      if (q.after) {
        where.push('(raised_at < @ar OR (raised_at = @ar AND id < @ai))');
        args.ar = q.after.raisedAt;
        args.ai = q.after.id;
      }
      const rows = this.c.db
        .prepare(`SELECT doc FROM alarms WHERE ${where.join(' AND ')} ORDER BY raised_at DESC, id DESC LIMIT @limit`)
        .pluck()
        .all(args) as string[];
      return rows.map((d) => JSON.parse(d) as AlarmRecord);
    });
  }
  activeAlarms() {
    return this.c.run(() => (this.c.db.prepare("SELECT doc FROM alarms WHERE status IN ('raised', 'acknowledged')").pluck().all() as string[]).map((d) => JSON.parse(d) as AlarmRecord));
  }
  activeAlarmCounts(groupId: string, solution: string) {
    return this.c.run(() =>
      (
        this.c.db
          .prepare(`SELECT device_id AS d, count(*) AS n FROM alarms WHERE group_id = ? AND solution = ? AND status IN ('raised', 'acknowledged')
                        GROUP BY device_id ORDER BY device_id`)
          .all(groupId, solution) as Row[]
      ).map((r) => ({ deviceId: r.d as string, count: r.n as number })),
    );
  }
  listAlarmStates() {
    return this.c.run(() =>
      (this.c.db.prepare('SELECT rule_id, device_id, state FROM alarm_states').all() as Row[]).map((r) => ({
        ruleId: r.rule_id as string,
        deviceId: r.device_id as string,
        state: JSON.parse(r.state) as AlarmEvalState,
      })),
    );
  }
  setAlarmState(ruleId: string, deviceId: string, state: AlarmEvalState | null) {
    return this.c.run(() => {
      if (state === null) this.c.db.prepare('DELETE FROM alarm_states WHERE rule_id = ? AND device_id = ?').run(ruleId, deviceId);
      else {
        this.c.db
          .prepare('INSERT INTO alarm_states (rule_id, device_id, state) VALUES (?, ?, ?) ON CONFLICT (rule_id, device_id) DO UPDATE SET state = excluded.state')
          .run(ruleId, deviceId, JSON.stringify(state));
      }
    });
  }
  insertDelivery(d: WebhookDeliveryRecord) {
    return this.c.run(() => {
      this.c.db
        .prepare('INSERT INTO alarm_deliveries (id, group_id, solution, status, next_at, created_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?)')
        .run(d.id, d.groupId, d.solution, d.status, d.nextAt, d.createdAt, JSON.stringify(d));
    });
  }
  updateDelivery(d: WebhookDeliveryRecord) {
    return this.c.run(() => {
      this.c.db.prepare('UPDATE alarm_deliveries SET status = ?, next_at = ?, doc = ? WHERE id = ?').run(d.status, d.nextAt, JSON.stringify(d), d.id);
    });
  }
  getDelivery(groupId: string, solution: string, id: string) {
    return this.c.run(() => {
      const r = this.c.db.prepare('SELECT doc FROM alarm_deliveries WHERE id = ? AND group_id = ? AND solution = ?').pluck().get(id, groupId, solution) as string | undefined;
      return r ? (JSON.parse(r) as WebhookDeliveryRecord) : null;
    });
  }
  dueDeliveries(now: number, limit: number) {
    return this.c.run(() =>
      (this.c.db.prepare("SELECT doc FROM alarm_deliveries WHERE status = 'pending' AND next_at <= ? ORDER BY next_at, id LIMIT ?").pluck().all(now, limit) as string[]).map(
        (d) => JSON.parse(d) as WebhookDeliveryRecord,
      ),
    );
  }
  listDeliveries(groupId: string, solution: string, status: DeliveryStatus, limit: number, before?: { createdAt: number; id: string }) {
    return this.c.run(() => {
      const rows = before
        ? this.c.db
            .prepare(`SELECT doc FROM alarm_deliveries WHERE group_id = ? AND solution = ? AND status = ? AND (created_at < ? OR (created_at = ? AND id < ?))
                           ORDER BY created_at DESC, id DESC LIMIT ?`)
            .pluck()
            .all(groupId, solution, status, before.createdAt, before.createdAt, before.id, limit)
        : this.c.db
            .prepare('SELECT doc FROM alarm_deliveries WHERE group_id = ? AND solution = ? AND status = ? ORDER BY created_at DESC, id DESC LIMIT ?')
            .pluck()
            .all(groupId, solution, status, limit);
      return (rows as string[]).map((d) => JSON.parse(d) as WebhookDeliveryRecord);
    });
  }
}
