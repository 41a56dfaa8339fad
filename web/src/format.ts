// Units, ages and small DOM helpers shared by the panels.
import { deviceMac } from '../../src/sdk/index.ts';
import type { Device } from './api.ts';

export type Unit = 'C' | 'F';

export function toUnit(celsius: number, unit: Unit): number {
  return unit === 'F' ? celsius * 9 / 5 + 32 : celsius;
}

export function fmtTemp(celsius: number | null | undefined, unit: Unit, digits = 1): string {
  if (celsius === null || celsius === undefined || !Number.isFinite(celsius)) return '—';
  return `${toUnit(celsius, unit).toFixed(digits)} °${unit}`;
}

/** "12 s ago", "3 min ago", "2 h ago", "4 d ago". */
export function fmtAge(ts: number | null | undefined, now = Date.now()): string {
  if (!ts) return '—';
  const s = Math.max(0, Math.round((now - ts) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

export function fmtTime(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function shortId(id: string): string {
  return id.slice(0, 8);
}

/** The MAC (provisioningInfo.ssniMacAddress, the seed's vendorMacAddress, or wire §1 domainInfo.nic_macID) or the location. */
export function whereOf(d: Device): string {
  const mac = deviceMac(d);
  if (mac) return mac;
  const l = d.domainInfo?.location;
  if (l && Number.isFinite(l.latitude) && Number.isFinite(l.longitude)) return `${l.latitude.toFixed(3)}, ${l.longitude.toFixed(3)}`;
  return '';
}

export function isDevKit(d: Device): boolean {
  return d.deviceType === 'NICDevKit' || d.deviceType === 'MILLI' || !!d.provisioningInfo;
}

/** Blue (cold) → teal → yellow → red (hot) over [lo, hi]. */
export function tempColour(c: number | null, lo: number, hi: number): string {
  if (c === null) return '#8a8f98';
  const t = hi > lo ? Math.min(1, Math.max(0, (c - lo) / (hi - lo))) : 0.5;
  const hue = 240 - 240 * t;
  return `hsl(${hue.toFixed(0)} 75% 45%)`;
}

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
}

export function $(id: string): HTMLElement {
  const e = document.getElementById(id);
  if (!e) throw new Error(`#${id} missing`);
  return e;
}
