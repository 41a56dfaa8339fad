// Solutions, devices and device templates. A solution's `version` moves whenever one of its
// devices is made, changed or deleted, so callers can cache device lists (Store.solutionVersion).
import { isDeepStrictEqual } from 'node:util';
import { deviceQuotaError, ReefError } from '../../core/errors.ts';
import type { DeviceRecord, DeviceTemplateRecord, DomainInfo } from '../../core/types.ts';
import { deviceRecordOf, type NewDevice } from '../store.ts';
import type { Row, SqliteContext } from './context.ts';

/** An account's devices (the device quota): the count the triggers of migration 12 keep. */
export const COUNT_TENANT_DEVICES = 'SELECT n FROM device_counts WHERE tenant_id = ?';

function deviceFromRow(r: Row): DeviceRecord {
  const d: DeviceRecord = {
    id: r.id,
    deviceType: r.device_type,
    domainInfo: JSON.parse(r.domain_info),
    tenantId: r.tenant_id,
    groupId: r.group_id,
    solution: r.solution,
    mac: r.mac ?? null,
    createdAt: r.created_at,
  };
  if (r.provisioning_info) d.provisioningInfo = JSON.parse(r.provisioning_info);
  return d;
}

function templateFromRow(r: Row): DeviceTemplateRecord {
  return { id: r.id, name: r.name, sensors: JSON.parse(r.sensors), groupId: r.group_id, solution: r.solution, createdAt: r.created_at, updatedAt: r.updated_at };
}

function statements(c: SqliteContext) {
  const p = (sql: string) => c.db.prepare(sql);
  return {
    solutionExists: p('SELECT 1 FROM solutions WHERE group_id = ? AND name = ?'),
    ensureSolution: p('INSERT INTO solutions (group_id, name, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING'),
    bumpSolution: p('UPDATE solutions SET version = version + 1 WHERE group_id = ? AND name = ?'),
    solutionVersion: p('SELECT version FROM solutions WHERE group_id = ? AND name = ?').pluck(),
    insertDevice: p(`INSERT INTO devices (id, tenant_id, group_id, solution, device_type, domain_info, provisioning_info, mac, created_at)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    listDevices: p('SELECT * FROM devices WHERE group_id = ? AND solution = ? ORDER BY pk'),
    listDevicesByType: p('SELECT * FROM devices WHERE group_id = ? AND solution = ? AND device_type = ? ORDER BY pk'),
    getDevice: p('SELECT * FROM devices WHERE group_id = ? AND solution = ? AND id = ?'),
    deviceByMac: p('SELECT * FROM devices WHERE mac = ?'),
    countTenantDevices: p(COUNT_TENANT_DEVICES).pluck(),
    // A device goes with its observations (docs/storage.md "SQLite: blocks") and its latest row.
    deleteObs: p('DELETE FROM obs_blocks WHERE device_pk = ?'),
    deleteLatest: p('DELETE FROM latest WHERE device_pk = ?'),
    deleteDevice: p('DELETE FROM devices WHERE pk = ?'),
    updateDevice: p('UPDATE devices SET device_type = ?, domain_info = ? WHERE pk = ?'),
    listTemplates: p('SELECT * FROM device_templates WHERE group_id = ? AND solution = ? ORDER BY pk'),
    getTemplate: p('SELECT * FROM device_templates WHERE group_id = ? AND solution = ? AND id = ?'),
    countTemplates: p('SELECT count(*) FROM device_templates WHERE group_id = ? AND solution = ?').pluck(),
    insertTemplate: p('INSERT INTO device_templates (id, group_id, solution, name, sensors, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)'),
    updateTemplate: p('UPDATE device_templates SET name = ?, sensors = ?, updated_at = ? WHERE group_id = ? AND solution = ? AND id = ?'),
    deleteTemplate: p('DELETE FROM device_templates WHERE group_id = ? AND solution = ? AND id = ?'),
  };
}

export class SqliteDevices {
  private readonly s: ReturnType<typeof statements>;
  private readonly db;
  constructor(private readonly c: SqliteContext) {
    this.s = statements(c);
    this.db = c.db;
  }

  solutionExists(groupId: string, solution: string) {
    return this.c.run(() => this.s.solutionExists.get(groupId, solution) !== undefined);
  }
  solutionVersion(groupId: string, solution: string) {
    return this.c.run(() => (this.s.solutionVersion.get(groupId, solution) as number | undefined) ?? null);
  }
  ensureSolution(groupId: string, solution: string) {
    return this.c.run(() => {
      this.s.ensureSolution.run(groupId, solution, Date.now());
    });
  }

  createDevice(d: NewDevice, maxForTenant?: number) {
    return this.c.run(() => {
      const now = Date.now();
      // BEGIN IMMEDIATE: the account's count and the insert see the same devices (no two creators past the quota).
      const tx = this.db.transaction(() => {
        if (maxForTenant !== undefined) {
          const have = this.tenantDevices(d.tenantId);
          if (have + 1 > maxForTenant) throw deviceQuotaError(maxForTenant, have, 1);
        }
        this.s.ensureSolution.run(d.groupId, d.solution, now);
        this.s.bumpSolution.run(d.groupId, d.solution);
        this.s.insertDevice.run(
          d.id,
          d.tenantId,
          d.groupId,
          d.solution,
          d.deviceType,
          JSON.stringify(d.domainInfo),
          d.provisioningInfo ? JSON.stringify(d.provisioningInfo) : null,
          d.mac ?? null,
          now,
        );
      });
      tx.immediate();
      return deviceRecordOf(d, now);
    });
  }
  listTemplates(groupId: string, solution: string) {
    return this.c.run(() => (this.s.listTemplates.all(groupId, solution) as Row[]).map(templateFromRow));
  }
  getTemplate(groupId: string, solution: string, id: string) {
    return this.c.run(() => {
      const r = this.s.getTemplate.get(groupId, solution, id) as Row | undefined;
      return r ? templateFromRow(r) : null;
    });
  }
  createTemplate(t: { id: string; groupId: string; solution: string; name: string; sensors: unknown[] }, maxPerSolution: number) {
    return this.c.run(() => {
      const now = Date.now();
      // BEGIN IMMEDIATE: the count and the insert see the same solution (no two writers past the cap).
      this.db
        .transaction(() => {
          if ((this.s.countTemplates.get(t.groupId, t.solution) as number) >= maxPerSolution) {
            throw new ReefError('TOO_MANY_TEMPLATES', `a solution holds at most ${maxPerSolution} device templates`);
          }
          this.s.ensureSolution.run(t.groupId, t.solution, now);
          this.s.insertTemplate.run(t.id, t.groupId, t.solution, t.name, JSON.stringify(t.sensors), now, now);
        })
        .immediate();
      return { ...t, createdAt: now, updatedAt: now };
    });
  }
  updateTemplate(groupId: string, solution: string, id: string, t: { name: string; sensors: unknown[] }) {
    return this.c.run(() => {
      if (this.s.updateTemplate.run(t.name, JSON.stringify(t.sensors), Date.now(), groupId, solution, id).changes === 0) return null;
      return templateFromRow(this.s.getTemplate.get(groupId, solution, id) as Row);
    });
  }
  deleteTemplate(groupId: string, solution: string, id: string) {
    return this.c.run(() => {
      const r = this.s.getTemplate.get(groupId, solution, id) as Row | undefined;
      if (!r || this.s.deleteTemplate.run(groupId, solution, id).changes === 0) return null;
      return templateFromRow(r);
    });
  }
  listDevices(groupId: string, solution: string, deviceType?: string) {
    return this.c.run(() => {
      const rows = (deviceType === undefined ? this.s.listDevices.all(groupId, solution) : this.s.listDevicesByType.all(groupId, solution, deviceType)) as Row[];
      return rows.map(deviceFromRow);
    });
  }
  countDevices(tenantId: string) {
    return this.c.run(() => this.tenantDevices(tenantId));
  }
  /** The account's kept device count (no row before its first device). */
  private tenantDevices(tenantId: string): number {
    return (this.s.countTenantDevices.get(tenantId) as number | undefined) ?? 0;
  }
  getDevice(groupId: string, solution: string, id: string) {
    return this.c.run(() => {
      const r = this.s.getDevice.get(groupId, solution, id) as Row | undefined;
      return r ? deviceFromRow(r) : null;
    });
  }
  getDeviceByMac(mac: string) {
    return this.c.run(() => {
      const r = this.s.deviceByMac.get(mac) as Row | undefined;
      return r ? deviceFromRow(r) : null;
    });
  }
  deleteDevice(groupId: string, solution: string, id: string) {
    return this.c.run(() => {
      const r = this.s.getDevice.get(groupId, solution, id) as Row | undefined;
      if (!r) return false;
      this.db
        .transaction(() => {
          this.s.deleteObs.run(r.pk);
          this.s.deleteLatest.run(r.pk);
          this.s.deleteDevice.run(r.pk);
          this.s.bumpSolution.run(groupId, solution);
        })
        .immediate();
      return true;
    });
  }

  updateDevice(groupId: string, solution: string, id: string, expected: DomainInfo, next: { deviceType: string; domainInfo: DomainInfo }) {
    return this.c.run(() =>
      this.db
        .transaction((): DeviceRecord | 'missing' | 'changed' => {
          const r = this.s.getDevice.get(groupId, solution, id) as Row | undefined;
          if (!r) return 'missing';
          const now = deviceFromRow(r);
          if (!isDeepStrictEqual(now.domainInfo, expected)) return 'changed';
          const text = JSON.stringify(next.domainInfo);
          this.s.updateDevice.run(next.deviceType, text, r.pk);
          this.s.bumpSolution.run(groupId, solution);
          return deviceFromRow({ ...r, device_type: next.deviceType, domain_info: text });
        })
        .immediate(),
    );
  }
}
