// Units, ages and small DOM helpers shared by the panels.
import { deviceMac } from '../../src/sdk/index.ts';
import type { Device } from './api.ts';

export type Unit = 'C' | 'F';

export function toUnit(celsius: number, unit: Unit): number {
  return unit === 'F' ? (celsius * 9) / 5 + 32 : celsius;
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

/** Times are shown in the browser's zone or in UTC (the header's switch; remembered). */
export type Zone = 'local' | 'UTC';
let zone: Zone = 'local';

export function setZone(z: Zone): void {
  zone = z;
}

export function getZone(): Zone {
  return zone;
}

const p2 = (n: number) => String(n).padStart(2, '0');

/** The parts of an instant in the chosen zone. */
function parts(ms: number): { y: number; mo: number; d: number; h: number; mi: number; s: number } {
  const d = new Date(ms);
  return zone === 'UTC'
    ? { y: d.getUTCFullYear(), mo: d.getUTCMonth() + 1, d: d.getUTCDate(), h: d.getUTCHours(), mi: d.getUTCMinutes(), s: d.getUTCSeconds() }
    : { y: d.getFullYear(), mo: d.getMonth() + 1, d: d.getDate(), h: d.getHours(), mi: d.getMinutes(), s: d.getSeconds() };
}

/** The one date format of the app: ISO-like, 24 h, in the chosen zone ("2026-11-24 13:05:09"). */
export function fmtTime(ms: number): string {
  const t = parts(ms);
  return `${t.y}-${p2(t.mo)}-${p2(t.d)} ${p2(t.h)}:${p2(t.mi)}:${p2(t.s)}`;
}

/** Axis labels: the date, the time of day, or both, as the tick spacing needs (24 h). */
export function fmtTick(ms: number, stepS: number, withDate: boolean): string {
  const t = parts(ms);
  const date = `${t.y}-${p2(t.mo)}-${p2(t.d)}`;
  if (stepS >= 86400) return date;
  const time = stepS < 60 ? `${p2(t.h)}:${p2(t.mi)}:${p2(t.s)}` : `${p2(t.h)}:${p2(t.mi)}`;
  return withDate ? `${date}\n${time}` : time;
}

/** The zone's name as shown beside every time: "UTC" or "UTC+01:00". */
export function zoneLabel(ms = Date.now(), z: Zone = zone): string {
  if (z === 'UTC') return 'UTC';
  const off = -new Date(ms).getTimezoneOffset();
  if (off === 0) return 'UTC+00:00';
  const a = Math.abs(off);
  return `UTC${off < 0 ? '-' : '+'}${p2(Math.floor(a / 60))}:${p2(a % 60)}`;
}

/** Whole days between two instants' calendar dates in the chosen zone differ. */
export function sameDay(a: number, b: number): boolean {
  const x = parts(a),
    y = parts(b);
  return x.y === y.y && x.mo === y.mo && x.d === y.d;
}

/** A time stamp for the datetime-local inputs of the custom range, in the chosen zone. */
export function toInput(ms: number): string {
  return fmtTime(ms).replace(' ', 'T');
}

/** The instant a datetime-local value names in the chosen zone (NaN when empty or invalid). */
export function fromInput(v: string): number {
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?$/.test(v)) return Number.NaN;
  return zone === 'UTC' ? Date.parse(`${v.length === 16 ? `${v}:00` : v}Z`) : new Date(v).getTime();
}

/** The device a single-device panel shows: the first of the selection, if it is still listed. */
export function firstSelected(ctx: { selected(): string[]; devices(): Device[] }): Device | null {
  const sel = ctx.selected()[0];
  return ctx.devices().find((x) => x.id === sel) ?? null;
}

export function shortId(id: string): string {
  return id.slice(0, 8);
}

/** The device's own name (domainInfo.name), or '' when it has none. */
export function nameOf(d: Device | undefined): string {
  const n = d?.domainInfo?.name;
  return typeof n === 'string' ? n.trim() : '';
}

/** What a person reads for a device: its name, else the first characters of its id. */
export function labelOf(d: Device | undefined, id: string): string {
  return nameOf(d) || shortId(id);
}

/** The MAC (provisioningInfo.ssniMacAddress, the seed's vendorMacAddress, or wire §1 domainInfo.nic_macID) or the location. */
export function whereOf(d: Device): string {
  const mac = deviceMac(d);
  if (mac) return mac;
  const l = d.domainInfo?.location;
  if (l && Number.isFinite(l.latitude) && Number.isFinite(l.longitude)) return `${l.latitude.toFixed(3)}, ${l.longitude.toFixed(3)}`;
  return '';
}

/**
 * A kit's network module: the MILLI device the service lists after each provisioned kit for the
 * original clients (docs/api.md "A kit's network module"). Its series is the kit's, so the app
 * shows the kit alone.
 */
export function isKitModule(d: Device): boolean {
  return d.deviceType === 'MILLI' && !!d.provisioningInfo && typeof d.domainInfo?.kitId === 'string';
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

/**
 * Black or white, whichever contrasts more with `fill` (a tempColour: `hsl(h s% l%)` or `#rrggbb`).
 * One of them always reaches 4.5:1 (WCAG 2.1 §1.4.3) on any colour; white alone fails on the
 * scale's light middle (yellow, green).
 */
export function inkOn(fill: string): '#000' | '#fff' {
  let rgb: number[];
  const h = /^hsl\(([\d.]+) ([\d.]+)% ([\d.]+)%\)$/.exec(fill);
  if (h) {
    const [hue, s, l] = [Number(h[1]), Number(h[2]) / 100, Number(h[3]) / 100];
    const a = s * Math.min(l, 1 - l);
    rgb = [0, 8, 4].map((n) => {
      const k = (n + hue / 30) % 12;
      return l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    });
  } else rgb = [1, 3, 5].map((i) => Number.parseInt(fill.slice(i, i + 2), 16) / 255);
  const lum = rgb.map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)).reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i]!, 0);
  // Contrast with white (1.05 / (L + 0.05)) against contrast with black ((L + 0.05) / 0.05).
  return 1.05 / (lum + 0.05) >= (lum + 0.05) / 0.05 ? '#fff' : '#000';
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

/** A duration in seconds as "10 min", "3 h", "2 d", "1 h 30 min". */
export function fmtSpan(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 2 * 86400) {
    const h = Math.floor(s / 3600),
      m = Math.round((s % 3600) / 60);
    return m ? `${h} h ${m} min` : `${h} h`;
  }
  const d = Math.floor(s / 86400),
    h = Math.round((s % 86400) / 3600);
  return h ? `${d} d ${h} h` : `${d} d`;
}

/**
 * Is a device's latest reading overdue? Expected every `every` ms when the server said so
 * (GET …/cadence: the median gap of its newest readings) or else from its last two readings seen,
 * so it is stale after three missed intervals (at least a minute); with neither, after 15 minutes.
 */
export function isStale(l: { ts: number; prevTs?: number; every?: number } | undefined, now = Date.now()): boolean {
  if (!l) return false;
  const every = l.every !== undefined && l.every > 0 ? l.every : l.prevTs !== undefined && l.ts > l.prevTs ? l.ts - l.prevTs : null;
  const limit = every === null ? 15 * 60_000 : Math.max(60_000, 3 * every);
  return now - l.ts > limit;
}

/**
 * A collapse button on a panel (phones: panels fold away to reach the next one). The state is
 * remembered per panel; the heading stays visible and names the button.
 */
export function addCollapse(panel: HTMLElement): void {
  if (panel.querySelector(':scope > .collapse')) return;
  const h = panel.querySelector('h2');
  const name = (h?.firstChild?.textContent ?? panel.id).trim();
  const key = `reef.collapsed.${panel.id}`;
  const btn = el('button', { type: 'button', class: 'collapse', 'aria-controls': panel.id });
  const set = (c: boolean) => {
    panel.classList.toggle('collapsed', c);
    btn.setAttribute('aria-expanded', String(!c));
    btn.setAttribute('aria-label', `${c ? 'Expand' : 'Collapse'} ${name}`);
    btn.textContent = c ? '▸' : '▾';
  };
  set(localStorage.getItem(key) === '1');
  btn.addEventListener('click', () => {
    const c = !panel.classList.contains('collapsed');
    localStorage.setItem(key, c ? '1' : '0');
    set(c);
  });
  panel.prepend(btn);
}
