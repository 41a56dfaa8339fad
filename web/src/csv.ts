// CSV of the plotted devices' observations in the visible range: every observation (not buckets),
// oldest first. Temperature comes in both units so a spreadsheet needs no conversion; any other
// field is one column named by its path.
import type { Connection } from './api.ts';
import { TEMPERATURE, valueAt } from './fields.ts';

function cell(v: unknown): string {
  if (v === null || v === undefined) return '';
  const s = typeof v === 'object' ? JSON.stringify(v) : String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function toCsv(rows: { deviceId: string; timestamp: string; value: number | null }[], field = TEMPERATURE): string {
  const temp = field === TEMPERATURE;
  const lines = [temp ? 'device_id,timestamp,temperature_c,temperature_f' : `device_id,timestamp,${cell(field)}`];
  for (const r of rows) {
    const c = r.value;
    const values = temp ? [c === null ? '' : String(c), c === null ? '' : ((c * 9) / 5 + 32).toFixed(4).replace(/\.?0+$/, '')] : [c === null ? '' : String(c)];
    lines.push([r.deviceId, r.timestamp, ...values].map(cell).join(','));
  }
  return lines.join('\r\n') + '\r\n';
}

export async function downloadCsv(conn: Connection, deviceIds: string[], from: Date, to: Date, field = TEMPERATURE): Promise<void> {
  const rows: { deviceId: string; timestamp: string; value: number | null }[] = [];
  for (const id of deviceIds) {
    for (const o of await conn.range(id, from, to)) rows.push({ deviceId: id, timestamp: o.timestamp, value: valueAt(o, field) });
  }
  const blob = new Blob([toCsv(rows, field)], { type: 'text/csv;charset=utf-8' });
  const a = document.createElement('a');
  const stamp = (d: Date) => d.toISOString().slice(0, 19).replace(/[:T]/g, '-');
  a.href = URL.createObjectURL(blob);
  a.download = `reef-${conn.solution}${field === TEMPERATURE ? '' : `-${field}`}-${stamp(from)}_${stamp(to)}.csv`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}
