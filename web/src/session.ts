// What survives a reload: the view in the page's address (solution, devices, field, range or
// Live, zoom, map view: a reload, a bookmark or a link shows the same), and this tab's sign-in as
// a token in sessionStorage until it expires. Never the secret (docs/web.md "Reload and share").
import { decodeJwtClaims } from '../../src/sdk/index.ts';

export interface View {
  solution?: string;
  devices?: string[];
  field?: string;
  range?: { preset: '15m' | '1h' | '6h' | '24h' | '7d' | '30d' } | { from: number; to: number };
  /** Zoomed window, seconds. */
  zoom?: [number, number] | null;
  live?: boolean;
  map?: { lon: number; lat: number; scale: number } | null;
}

const PRESETS = ['15m', '1h', '6h', '24h', '7d', '30d'] as const;
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

/** The address's query for a view: readable keys, ISO times. */
export function writeView(v: View): string {
  const p = new URLSearchParams();
  if (v.solution) p.set('solution', v.solution);
  if (v.devices?.length) p.set('devices', v.devices.join(','));
  if (v.field && v.field !== 'temperature') p.set('field', v.field);
  if (v.range && 'preset' in v.range) p.set('range', v.range.preset);
  else if (v.range) {
    p.set('from', iso(v.range.from));
    p.set('to', iso(v.range.to));
  }
  if (v.zoom) p.set('zoom', `${iso(v.zoom[0] * 1000)}/${iso(v.zoom[1] * 1000)}`);
  if (v.live === false) p.set('live', 'off');
  if (v.map) p.set('map', `${v.map.lat.toFixed(4)},${v.map.lon.toFixed(4)},${Math.round(v.map.scale)}`);
  const s = p.toString();
  return s ? `?${s}` : '';
}

/** The view an address names; null when it names none. Anything malformed is left out. */
export function readView(search: string): View | null {
  const p = new URLSearchParams(search);
  if (![...p.keys()].length) return null;
  const v: View = {};
  const sol = p.get('solution');
  if (sol) v.solution = sol;
  const devs = p.get('devices');
  if (devs) v.devices = devs.split(',').filter(Boolean).slice(0, 8);
  const field = p.get('field');
  if (field) v.field = field;
  const range = p.get('range');
  const preset = PRESETS.find((x) => x === range);
  if (preset) v.range = { preset };
  else {
    const from = Date.parse(p.get('from') ?? ''),
      to = Date.parse(p.get('to') ?? '');
    if (Number.isFinite(from) && Number.isFinite(to) && from < to) v.range = { from, to };
  }
  const zoom = p.get('zoom')?.split('/');
  if (zoom?.length === 2) {
    const a = Date.parse(zoom[0]!) / 1000,
      b = Date.parse(zoom[1]!) / 1000;
    if (Number.isFinite(a) && Number.isFinite(b) && a < b) v.zoom = [a, b];
  }
  if (p.get('live') === 'off') v.live = false;
  const m = p.get('map')?.split(',').map(Number);
  if (m?.length === 3 && m.every(Number.isFinite)) v.map = { lat: m[0]!, lon: m[1]!, scale: m[2]! };
  return v;
}

const KEY = 'reef.session';

export interface Session {
  endpoint: string;
  clientId: string;
  token: string;
  /** Epoch ms after which the token is no use (its `exp`, a minute early). */
  expiresAt: number;
}

/** Keeps this tab's token (with its endpoint and client id) until it expires. */
export function saveSession(s: { endpoint: string; clientId: string; token: string }): void {
  const exp = decodeJwtClaims(s.token)?.exp;
  if (typeof exp !== 'number') return;
  const full: Session = { ...s, expiresAt: exp * 1000 - 60_000 };
  try {
    sessionStorage.setItem(KEY, JSON.stringify(full));
  } catch {
    // Storage refused (private mode, quota): a reload asks for the secret, nothing else changes.
  }
}

/** This tab's kept sign-in, if it has not expired. */
export function loadSession(now = Date.now()): Session | null {
  try {
    const s = JSON.parse(sessionStorage.getItem(KEY) ?? 'null') as Session | null;
    if (s && typeof s.token === 'string' && typeof s.endpoint === 'string' && typeof s.clientId === 'string' && s.expiresAt > now) return s;
    sessionStorage.removeItem(KEY);
  } catch {
    /* nothing kept */
  }
  return null;
}

export function clearSession(): void {
  try {
    sessionStorage.removeItem(KEY);
  } catch {
    /* nothing kept */
  }
}
