// CSV of the plotted devices' observations in the visible range: every observation (not buckets),
// oldest first, in both units so a spreadsheet needs no conversion.
import { temperatureOf, type Connection } from './api.ts';

function cell(v: unknown): string {
  if (v === null || v === undefined) return '';
  const s = typeof v === 'object' ? JSON.stringify(v) : String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function toCsv(rows: { deviceId: string; timestamp: string; temperature: number | null }[]): string {
  const lines = ['device_id,timestamp,temperature_c,temperature_f'];
  for (const r of rows) {
    const c = r.temperature;
    lines.push([r.deviceId, r.timestamp, c === null ? '' : String(c), c === null ? '' : (c * 9 / 5 + 32).toFixed(4).replace(/\.?0+$/, '')].map(cell).join(','));
  }
  return lines.join('\r\n') + '\r\n';
}

export async function downloadCsv(conn: Connection, deviceIds: string[], from: Date, to: Date): Promise<void> {
  const rows: { deviceId: string; timestamp: string; temperature: number | null }[] = [];
  for (const id of deviceIds) {
    for (const o of await conn.range(id, from, to)) rows.push({ deviceId: id, timestamp: o.timestamp, temperature: temperatureOf(o) });
  }
  const blob = new Blob([toCsv(rows)], { type: 'text/csv;charset=utf-8' });
  const a = document.createElement('a');
  const stamp = (d: Date) => d.toISOString().slice(0, 19).replace(/[:T]/g, '-');
  a.href = URL.createObjectURL(blob);
  a.download = `reef-${conn.solution}-${stamp(from)}_${stamp(to)}.csv`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}
