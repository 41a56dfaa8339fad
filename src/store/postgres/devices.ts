// Solutions, devices and device templates. A solution's `version` moves whenever one of its
// devices is made, changed or deleted, so callers can cache device lists (Store.solutionVersion).
// A device carries its solution's retention tier (docs/storage.md "PostgreSQL: tiers and partitions").
import { isDeepStrictEqual } from 'node:util';
import { deviceQuotaError, ReefError } from '../../core/errors.ts';
import type { DeviceRecord, DeviceRef, DeviceTemplateRecord, DomainInfo } from '../../core/types.ts';
import { deviceRecordOf, type NewDevice } from '../store.ts';
import type { PostgresConnection, Row } from './connection.ts';

function deviceFromRow(r: Row): DeviceRecord {
  const d: DeviceRecord = {
    id: r.id,
    deviceType: r.device_type,
    domainInfo: r.domain_info,
    tenantId: r.tenant_id,
    groupId: r.group_id,
    solution: r.solution,
    mac: r.mac ?? null,
    createdAt: r.created_at,
  };
  if (r.provisioning_info) d.provisioningInfo = r.provisioning_info;
  return d;
}

const TEMPLATE_COLS = 'id, group_id, solution, name, sensors, created_at, updated_at';

function templateFromRow(r: Row): DeviceTemplateRecord {
  return { id: r.id, name: r.name, sensors: r.sensors, groupId: r.group_id, solution: r.solution, createdAt: Number(r.created_at), updatedAt: Number(r.updated_at) };
}

const DEVICE_COLS = 'id, tenant_id, group_id, solution, device_type, domain_info, provisioning_info, mac, created_at';

/**
 * A device (or device template) of a group's solution by its id ($1 group, $2 solution, $3 id):
 * always a probe of the unique index on id. Written `group_id = $1 AND solution = $2 AND id = $3`,
 * the planner costs devices_by_solution (group_id, solution, pk) and the id index alike (8.29
 * against 8.30, EXPLAIN on PostgreSQL 15) and took the former while the table had no statistics
 * yet, or with statistics that make a tenant look small: each upload then read every device of its
 * solution (918 uploads read 918,000 index entries with 1,000 devices, pg_stat_user_indexes during
 * bench:ingest). IS NOT DISTINCT FROM is never an index condition, so the group and solution can
 * only filter the one row found by id; the columns are NOT NULL, so it means `=` here. Templates
 * have the same two indexes.
 */
export const BY_ID_IN_SOLUTION = 'id = $3 AND (group_id, solution) IS NOT DISTINCT FROM ($1, $2)';

/** An account's devices (the device quota): the count the trigger of migration 9 keeps. */
const COUNT_TENANT_DEVICES = 'SELECT n FROM device_counts WHERE tenant_id = $1';

export class PostgresDevices {
  constructor(private readonly c: PostgresConnection) {}

  async solutionExists(groupId: string, solution: string): Promise<boolean> {
    return (await this.c.q('SELECT 1 FROM solutions WHERE group_id = $1 AND name = $2', [groupId, solution], 'solution-exists')).rowCount! > 0;
  }

  async solutionVersion(groupId: string, solution: string): Promise<number | null> {
    const r = await this.c.q('SELECT version FROM solutions WHERE group_id = $1 AND name = $2', [groupId, solution], 'solution-version');
    return r.rows[0] ? Number(r.rows[0].version) : null;
  }

  async ensureSolution(groupId: string, solution: string): Promise<void> {
    await this.c.q('INSERT INTO solutions (group_id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (group_id, name) DO NOTHING', [groupId, solution, Date.now()], 'ensure-solution');
  }

  async createDevice(d: NewDevice, maxForTenant?: number): Promise<DeviceRecord> {
    const now = Date.now();
    // The solution row is made (or locked, against a concurrent retention change) in the same
    // statement, and the device takes the solution's retention tier.
    const text = `WITH s AS (
         INSERT INTO solutions (group_id, name, created_at, version) VALUES ($3, $4, $9, 1)
         ON CONFLICT (group_id, name) DO UPDATE SET version = solutions.version + 1
         RETURNING retention_days)
       INSERT INTO devices (${DEVICE_COLS}, tier)
       SELECT $1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, COALESCE(s.retention_days, 0) FROM s`;
    const values = [d.id, d.tenantId, d.groupId, d.solution, d.deviceType, JSON.stringify(d.domainInfo), d.provisioningInfo ? JSON.stringify(d.provisioningInfo) : null, d.mac ?? null, now];
    if (maxForTenant === undefined) await this.c.q(text, values);
    else {
      await this.c.tx(async (c) => {
        await c.query(text, values);
        // The insert's trigger has moved the account's count on and holds its row until this
        // transaction ends: the account's creators, on every node, pass here one at a time, and
        // one past the quota is undone. Locks are taken in one order by every device write
        // (solution, then count; deleteDevice too), so two writers never wait on each other.
        const n = (await c.query(COUNT_TENANT_DEVICES, [d.tenantId])).rows[0].n as number;
        if (n > maxForTenant) throw deviceQuotaError(maxForTenant, n - 1, 1);
      });
    }
    return deviceRecordOf(d, now);
  }

  async listTemplates(groupId: string, solution: string): Promise<DeviceTemplateRecord[]> {
    const r = await this.c.q(`SELECT ${TEMPLATE_COLS} FROM device_templates WHERE group_id = $1 AND solution = $2 ORDER BY pk`, [groupId, solution], 'list-templates');
    return r.rows.map(templateFromRow);
  }
  async getTemplate(groupId: string, solution: string, id: string): Promise<DeviceTemplateRecord | null> {
    const r = await this.c.q(`SELECT ${TEMPLATE_COLS} FROM device_templates WHERE ${BY_ID_IN_SOLUTION}`, [groupId, solution, id], 'get-template');
    return r.rows[0] ? templateFromRow(r.rows[0]) : null;
  }
  async createTemplate(t: { id: string; groupId: string; solution: string; name: string; sensors: unknown[] }, maxPerSolution: number): Promise<DeviceTemplateRecord> {
    const now = Date.now();
    return this.c.tx(async (c) => {
      // The solution row, made or locked first, serialises creators of one solution: the count and
      // the insert then agree (no two writers past the cap).
      await c.query('INSERT INTO solutions (group_id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (group_id, name) DO NOTHING', [t.groupId, t.solution, now]);
      await c.query('SELECT 1 FROM solutions WHERE group_id = $1 AND name = $2 FOR UPDATE', [t.groupId, t.solution]);
      const n = (await c.query('SELECT count(*)::int AS n FROM device_templates WHERE group_id = $1 AND solution = $2', [t.groupId, t.solution])).rows[0].n as number;
      if (n >= maxPerSolution) throw new ReefError('TOO_MANY_TEMPLATES', `a solution holds at most ${maxPerSolution} device templates`);
      await c.query('INSERT INTO device_templates (id, group_id, solution, name, sensors, created_at, updated_at) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $6)', [
        t.id,
        t.groupId,
        t.solution,
        t.name,
        JSON.stringify(t.sensors),
        now,
      ]);
      return { ...t, createdAt: now, updatedAt: now };
    });
  }
  async updateTemplate(groupId: string, solution: string, id: string, t: { name: string; sensors: unknown[] }): Promise<DeviceTemplateRecord | null> {
    const r = await this.c.q(
      `UPDATE device_templates SET name = $4, sensors = $5::jsonb, updated_at = $6 WHERE ${BY_ID_IN_SOLUTION} RETURNING ${TEMPLATE_COLS}`,
      [groupId, solution, id, t.name, JSON.stringify(t.sensors), Date.now()],
      'update-template',
    );
    return r.rows[0] ? templateFromRow(r.rows[0]) : null;
  }
  async deleteTemplate(groupId: string, solution: string, id: string): Promise<DeviceTemplateRecord | null> {
    const r = await this.c.q(`DELETE FROM device_templates WHERE ${BY_ID_IN_SOLUTION} RETURNING ${TEMPLATE_COLS}`, [groupId, solution, id], 'delete-template');
    return r.rows[0] ? templateFromRow(r.rows[0]) : null;
  }

  async listDevices(groupId: string, solution: string, deviceType?: string): Promise<DeviceRecord[]> {
    const r =
      deviceType === undefined
        ? await this.c.q(`SELECT ${DEVICE_COLS} FROM devices WHERE group_id = $1 AND solution = $2 ORDER BY pk`, [groupId, solution], 'list-devices')
        : await this.c.q(`SELECT ${DEVICE_COLS} FROM devices WHERE group_id = $1 AND solution = $2 AND device_type = $3 ORDER BY pk`, [groupId, solution, deviceType], 'list-devices-type');
    return r.rows.map(deviceFromRow);
  }
  async countDevices(tenantId: string): Promise<number> {
    const r = await this.c.q(COUNT_TENANT_DEVICES, [tenantId], 'count-devices');
    return (r.rows[0]?.n as number | undefined) ?? 0;
  }
  async getDevice(groupId: string, solution: string, id: string): Promise<DeviceRecord | null> {
    const r = await this.c.q(`SELECT pk, tier, ${DEVICE_COLS} FROM devices WHERE ${BY_ID_IN_SOLUTION}`, [groupId, solution, id], 'get-device');
    const row = r.rows[0];
    if (!row) return null;
    // An upload reads its device first: its group then needs no round trip to learn the key.
    const d = deviceFromRow(row);
    this.c.knowKey(id, row.pk as number, row.tier as number, { id: d.id, tenantId: d.tenantId, groupId: d.groupId, solution: d.solution, deviceType: d.deviceType, mac: d.mac });
    return d;
  }

  /**
   * Store.uploadDevice: the device as getDevice last read it in this group and solution, without a
   * round trip; else getDevice. What it answers cannot go stale unnoticed: its batch is written by
   * GROUP_HEAD_KNOWN only while the device's pk (never reused) is still there, else by GROUP_HEAD
   * only to a device of that group and solution (Pending.owner), and fails with DEVICE_NOT_FOUND
   * when there is none. Deleting the device here, or a retention change, forgets it at once.
   */
  async uploadDevice(groupId: string, solution: string, id: string): Promise<DeviceRef | null> {
    const ref = this.c.keys.get(id)?.ref;
    if (ref && ref.groupId === groupId && ref.solution === solution) return ref;
    return this.getDevice(groupId, solution, id);
  }
  async getDeviceByMac(mac: string): Promise<DeviceRecord | null> {
    const r = await this.c.q(`SELECT ${DEVICE_COLS} FROM devices WHERE mac = $1`, [mac], 'device-by-mac');
    return r.rows[0] ? deviceFromRow(r.rows[0]) : null;
  }
  async deleteDevice(groupId: string, solution: string, id: string): Promise<boolean> {
    return this.c.tx(async (c) => {
      // FOR UPDATE waits for inserts in flight (they hold FOR SHARE) so none leaves orphans behind.
      const r = await c.query(`SELECT pk, tier FROM devices WHERE ${BY_ID_IN_SOLUTION} FOR UPDATE`, [groupId, solution, id]);
      const dev = r.rows[0];
      if (!dev) return false;
      this.c.keys.delete(id);
      await c.query('DELETE FROM observations WHERE tier = $1 AND device_pk = $2', [dev.tier, dev.pk]);
      await c.query('DELETE FROM latest WHERE device_pk = $1', [dev.pk]);
      // The solution before the device: the delete's trigger then locks the account's count last,
      // in the order createDevice takes them (solution, then count), so the two cannot deadlock.
      await c.query('UPDATE solutions SET version = version + 1 WHERE group_id = $1 AND name = $2', [groupId, solution]);
      await c.query('DELETE FROM devices WHERE pk = $1', [dev.pk]);
      return true;
    });
  }

  async updateDevice(groupId: string, solution: string, id: string, expected: DomainInfo, next: { deviceType: string; domainInfo: DomainInfo }): Promise<DeviceRecord | 'missing' | 'changed'> {
    return this.c.tx(async (c) => {
      const r = await c.query(`SELECT pk, ${DEVICE_COLS} FROM devices WHERE ${BY_ID_IN_SOLUTION} FOR UPDATE`, [groupId, solution, id]);
      if (!r.rows[0]) return 'missing';
      // Compared as values: jsonb keeps its own order of keys.
      if (!isDeepStrictEqual(deviceFromRow(r.rows[0]).domainInfo, expected)) return 'changed';
      const u = await c.query(`UPDATE devices SET device_type = $1, domain_info = $2 WHERE pk = $3 RETURNING ${DEVICE_COLS}`, [next.deviceType, JSON.stringify(next.domainInfo), r.rows[0].pk]);
      await c.query('UPDATE solutions SET version = version + 1 WHERE group_id = $1 AND name = $2', [groupId, solution]);
      return deviceFromRow(u.rows[0]);
    });
  }
}
