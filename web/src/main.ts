// The Reef browser app: connect, devices (table + map), plot (ranges, zoom, live, °C/°F, compare,
// CSV), the latest reading of every device, and the dev kit and simulation panels.
import './style.css';
import { ApiError, Connection, normaliseEndpoint, temperatureOf, type Device, type Observation } from './api.ts';
import { $, el, fmtAge, fmtTemp, shortId, type Unit } from './format.ts';
import { DeviceMap } from './map.ts';
import { PALETTE, PlotView, type Series } from './plot.ts';
import { DeviceTable, type Latest } from './table.ts';
import { downloadCsv } from './csv.ts';
import { mountPanels, type Panels } from './panels.ts';

type Preset = '1h' | '24h' | '7d';
const PRESET_SECONDS: Record<Preset, number> = { '1h': 3600, '24h': 86400, '7d': 7 * 86400 };
/** Up to this span the plot shows every observation; beyond it, per-bucket min/avg/max. */
const RAW_MAX_SECONDS = 86400;
const TARGET_BUCKETS = 1500;
const MAX_COMPARE = PALETTE.length;

const state = {
  conn: null as Connection | null,
  devices: [] as Device[],
  latest: new Map<string, Latest>(),
  selected: [] as string[],
  unit: (localStorage.getItem('reef.unit') === 'F' ? 'F' : 'C') as Unit,
  // The last preset is remembered between visits.
  range: { preset: (['1h', '24h', '7d'] as const).find((p) => p === localStorage.getItem('reef.range')) ?? '24h' } as { preset: Preset } | { from: number; to: number },
  stopEvents: null as null | (() => void),
  load: null as AbortController | null,
  zoom: null as [number, number] | null,
  generation: 0,
};

const form = $('connect') as HTMLFormElement;
const endpointIn = $('endpoint') as HTMLInputElement;
const idIn = $('client-id') as HTMLInputElement;
const secretIn = $('client-secret') as HTMLInputElement;
const solutionIn = $('solution') as HTMLInputElement;
const connectBtn = $('connect-btn') as HTMLButtonElement;
const disconnectBtn = $('disconnect-btn') as HTMLButtonElement;
const statusEl = $('status');
const messageEl = $('message');
const main = $('main');

const ctx = {
  latest: state.latest,
  selected: () => state.selected,
  unit: () => state.unit,
  select: (id: string, mode: 'only' | 'toggle') => select(id, mode),
};
const table = new DeviceTable($('devices') as HTMLTableElement, $('filter') as HTMLInputElement, ctx);
const map = new DeviceMap($('map'), $('map-fig'), $('map-legend'), ctx);
const plot = new PlotView($('plot'), $('plot-info'), $('readout'));
let panels: Panels | null = null;

// Remembered between visits: everything but the secret.
endpointIn.value = localStorage.getItem('reef.endpoint') ?? '';
idIn.value = localStorage.getItem('reef.clientId') ?? '';
solutionIn.value = localStorage.getItem('reef.solution') ?? 'sandbox';
endpointIn.placeholder = location.origin;
($(`unit-${state.unit.toLowerCase()}`) as HTMLInputElement).checked = true;

function showMessage(text: string, kind: 'error' | 'info' = 'error'): void {
  messageEl.textContent = text;
  messageEl.className = `message ${kind}`;
  messageEl.hidden = !text;
}

function explain(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  return `Something went wrong: ${(e as Error)?.message ?? String(e)}`;
}

form.addEventListener('submit', (e) => {
  e.preventDefault();
  void connect();
});
disconnectBtn.addEventListener('click', () => disconnect());

async function connect(): Promise<void> {
  const clientId = idIn.value.trim();
  const secret = secretIn.value;
  const solution = solutionIn.value.trim();
  const missing = [!clientId && 'client id', !secret && 'client secret', !solution && 'solution'].filter(Boolean);
  if (missing.length) {
    showMessage(`Enter the ${missing.join(', ')}.`);
    (!clientId ? idIn : !secret ? secretIn : solutionIn).focus();
    return;
  }
  disconnect(false);
  const conn = new Connection(normaliseEndpoint(endpointIn.value), clientId, secret, solution);
  connectBtn.disabled = true;
  statusEl.textContent = 'Connecting…';
  showMessage('');
  try {
    await conn.accessToken();
    const [devices, latest] = await Promise.all([conn.devices(), conn.latest()]);
    localStorage.setItem('reef.endpoint', endpointIn.value.trim());
    localStorage.setItem('reef.clientId', clientId);
    localStorage.setItem('reef.solution', solution);
    state.conn = conn;
    state.generation++;
    secretIn.value = '';
    connectBtn.hidden = true;
    disconnectBtn.hidden = false;
    for (const input of [endpointIn, idIn, secretIn, solutionIn]) input.disabled = true;
    statusEl.textContent = `Connected to ${solution} at ${conn.endpoint}`;
    document.body.classList.add('connected');
    main.hidden = false;
    for (const g of latest) noteLatest(g.deviceId, g.observations);
    setDevices(devices);
    panels = mountPanels(conn, {
      devices: () => state.devices,
      selected: () => state.selected,
      unit: () => state.unit,
      message: showMessage,
      reloadDevices: reloadSoon,
      reloadPlot: () => void loadPlot(),
      alarmsChanged: () => {
        table.refresh();
        plot.redraw();
      },
    });
    panels.update();
    state.stopEvents = conn.events({
      observations: (g) => onLive(g.deviceId, g.observations),
      device: reloadSoon,
      state: (live) => document.body.classList.toggle('stream-down', !live),
      other: (type, data) => panels?.event(type, data),
    });
    if (devices.length) select(pickFirst(devices), 'only');
  } catch (err) {
    statusEl.textContent = '';
    showMessage(explain(err));
    if (err instanceof ApiError && err.kind === 'credentials') secretIn.focus();
    if (err instanceof ApiError && err.kind === 'solution') solutionIn.focus();
  } finally {
    connectBtn.disabled = false;
  }
}

function pickFirst(devices: Device[]): string {
  // The device with the freshest reading is the most interesting one to show first.
  let best = devices[0]!.id;
  let ts = -1;
  for (const d of devices) {
    const l = state.latest.get(d.id);
    if (l && l.ts > ts) [best, ts] = [d.id, l.ts];
  }
  return best;
}

function disconnect(reset = true): void {
  state.stopEvents?.();
  state.stopEvents = null;
  state.load?.abort();
  state.conn = null;
  state.devices = [];
  state.latest.clear();
  state.selected = [];
  panels?.destroy();
  panels = null;
  if (!reset) return;
  for (const input of [endpointIn, idIn, secretIn, solutionIn]) input.disabled = false;
  connectBtn.hidden = false;
  disconnectBtn.hidden = true;
  main.hidden = true;
  document.body.classList.remove('connected');
  statusEl.textContent = 'Disconnected.';
  showMessage('');
  secretIn.focus();
}

function setDevices(devices: Device[]): void {
  state.devices = devices;
  state.selected = state.selected.filter((id) => devices.some((d) => d.id === id));
  $('device-count').textContent = `(${devices.length})`;
  table.setDevices(devices);
  map.setDevices(devices);
  renderLatest();
  if (!devices.length) {
    const sol = state.conn?.solution ?? '';
    showMessage(
      sol === 'StudioSimulation'
        ? 'No devices found in StudioSimulation. Start a simulation below to create virtual devices.'
        : `No devices found in ${sol}.${sol === 'sandbox' ? ' Dev kits appear here once provisioned to your account.' : ''}`,
      'info',
    );
  } else if (messageEl.classList.contains('info')) showMessage('');
  panels?.update();
}

// Device events come in bursts (a simulation creates hundreds): one reload per burst.
let reloadTimer: ReturnType<typeof setTimeout> | undefined;
function reloadSoon(): void {
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(() => void reloadDevices(), 300);
}

async function reloadDevices(): Promise<void> {
  const conn = state.conn;
  if (!conn) return;
  try {
    const [devices, latest] = await Promise.all([conn.devices(), conn.latest()]);
    if (conn !== state.conn) return;
    for (const g of latest) noteLatest(g.deviceId, g.observations);
    setDevices(devices);
    if (!state.selected.length && devices.length) select(pickFirst(devices), 'only');
  } catch (err) {
    showMessage(explain(err));
  }
}

function noteLatest(deviceId: string, obs: Observation[]): void {
  for (const o of obs) {
    const ts = Date.parse(o.timestamp);
    const cur = state.latest.get(deviceId);
    if (Number.isFinite(ts) && (!cur || ts >= cur.ts)) state.latest.set(deviceId, { ts, temp: temperatureOf(o) });
  }
}

// ---- selection and plotting ----

function select(id: string, mode: 'only' | 'toggle'): void {
  if (mode === 'only') state.selected = [id];
  else if (state.selected.includes(id)) state.selected = state.selected.filter((x) => x !== id);
  else state.selected = [...state.selected, id].slice(-MAX_COMPARE);
  table.refresh();
  table.focusRow(id);
  map.refresh();
  panels?.update();
  void loadPlot();
}

function rangeWindow(): [number, number] {
  if ('preset' in state.range) {
    const now = Date.now() / 1000;
    return [now - PRESET_SECONDS[state.range.preset], now];
  }
  return [state.range.from / 1000, state.range.to / 1000];
}

function bucketFor(spanSeconds: number): number {
  const nice = [10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  const want = spanSeconds / TARGET_BUCKETS;
  return (nice.find((n) => n >= want) ?? Math.ceil(want / 86400) * 86400) * 1000;
}

async function fetchSeries(conn: Connection, ids: string[], from: number, to: number, signal: AbortSignal): Promise<Series[]> {
  const span = to - from;
  const f = new Date(from * 1000);
  const t = new Date(to * 1000 + 1);
  return Promise.all(ids.map(async (deviceId): Promise<Series> => {
    if (span <= RAW_MAX_SECONDS) {
      const obs = await conn.range(deviceId, f, t, signal);
      const x: number[] = [];
      const y: (number | null)[] = [];
      for (const o of obs) {
        x.push(Date.parse(o.timestamp) / 1000);
        y.push(temperatureOf(o));
      }
      return { deviceId, bucketed: false, x, y, observations: obs.length };
    }
    const bs = await conn.buckets(deviceId, f, t, bucketFor(span), signal);
    return {
      deviceId,
      bucketed: true,
      x: bs.map((b) => Date.parse(b.timestamp) / 1000),
      y: bs.map((b) => b.avg),
      min: bs.map((b) => b.min),
      max: bs.map((b) => b.max),
      observations: bs.reduce((n, b) => n + b.count, 0),
    };
  }));
}

async function loadPlot(): Promise<void> {
  const conn = state.conn;
  if (!conn) return;
  state.load?.abort();
  const ac = new AbortController();
  state.load = ac;
  const ids = [...state.selected];
  const [from, to] = rangeWindow();
  state.zoom = null;
  $('reset-zoom').hidden = true;
  $('plot-title').textContent = ids.length ? `— ${ids.map(shortId).join(', ')}` : '';
  const info = $('plot-info');
  info.setAttribute('aria-busy', 'true');
  info.dataset.state = 'loading';
  try {
    const series = await fetchSeries(conn, ids, from, to, ac.signal);
    if (ac.signal.aborted) return;
    plot.set(series, [from, to], state.unit);
    info.dataset.state = 'ready';
    info.dataset.devices = ids.join(',');
    legend(ids);
  } catch (err) {
    if ((err as Error).name === 'AbortError') return;
    info.dataset.state = 'error';
    showMessage(explain(err));
  } finally {
    if (state.load === ac) info.removeAttribute('aria-busy');
  }
}

function legend(ids: string[]): void {
  const box = $('plot-legend');
  box.replaceChildren(...ids.map((id, i) => el('li', {}, el('span', { class: 'swatch', style: `background:${PALETTE[i % PALETTE.length]}` }), `${shortId(id)} `, el('span', { class: 'muted' }, state.devices.find((d) => d.id === id)?.deviceType ?? ''))));
}

// When the user zooms into a bucketed view far enough, the zoomed window is fetched raw.
let refineTimer: ReturnType<typeof setTimeout> | undefined;
plot.onZoom = (range) => {
  state.zoom = range;
  $('reset-zoom').hidden = !range;
  clearTimeout(refineTimer);
  if (!range || $('plot-info').dataset.bucketed !== 'true') return;
  const [a, b] = range;
  if (b - a > RAW_MAX_SECONDS) return;
  refineTimer = setTimeout(async () => {
    const conn = state.conn;
    if (!conn) return;
    const ac = new AbortController();
    try {
      const detail = await fetchSeries(conn, state.selected, a, b, ac.signal);
      if (state.zoom && state.zoom[0] === a && state.zoom[1] === b) plot.refine(detail, [a, b]);
    } catch (err) {
      showMessage(explain(err));
    }
  }, 250);
};

$('reset-zoom').addEventListener('click', () => plot.resetZoom());

for (const b of document.querySelectorAll<HTMLButtonElement>('[data-range]')) {
  b.addEventListener('click', () => {
    state.range = { preset: b.dataset.range as Preset };
    localStorage.setItem('reef.range', state.range.preset);
    markRange();
    void loadPlot();
  });
}

function markRange(): void {
  for (const b of document.querySelectorAll<HTMLButtonElement>('[data-range]')) {
    b.setAttribute('aria-pressed', String('preset' in state.range && state.range.preset === b.dataset.range));
  }
  ($('custom') as HTMLDetailsElement).classList.toggle('active', !('preset' in state.range));
}

const fromIn = $('from') as HTMLInputElement;
const toIn = $('to') as HTMLInputElement;
function localInput(ms: number): string {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60_000);
  return d.toISOString().slice(0, 19);
}
$('custom').addEventListener('toggle', () => {
  if (!fromIn.value) {
    const [a, b] = rangeWindow();
    fromIn.value = localInput(a * 1000);
    toIn.value = localInput(b * 1000);
  }
});
$('custom-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const from = new Date(fromIn.value).getTime();
  const to = new Date(toIn.value).getTime();
  if (!Number.isFinite(from) || !Number.isFinite(to) || from >= to) {
    showMessage('The custom range needs a start before its end.');
    fromIn.focus();
    return;
  }
  showMessage('');
  state.range = { from, to };
  markRange();
  void loadPlot();
});

for (const r of document.querySelectorAll<HTMLInputElement>('input[name="unit"]')) {
  r.addEventListener('change', () => {
    if (!r.checked) return;
    state.unit = r.value === 'F' ? 'F' : 'C';
    localStorage.setItem('reef.unit', state.unit);
    plot.setUnit(state.unit);
    table.refresh();
    map.refresh();
    renderLatest();
    panels?.update();
  });
}

$('csv').addEventListener('click', async () => {
  const conn = state.conn;
  if (!conn || !state.selected.length) {
    showMessage('Choose a device to download its observations.', 'info');
    return;
  }
  const [a, b] = state.zoom ?? rangeWindow();
  const btn = $('csv') as HTMLButtonElement;
  btn.disabled = true;
  try {
    await downloadCsv(conn, state.selected, new Date(a * 1000), new Date(b * 1000 + 1));
  } catch (err) {
    showMessage(explain(err));
  } finally {
    btn.disabled = false;
  }
});

// ---- live ----

function onLive(deviceId: string, obs: Observation[]): void {
  noteLatest(deviceId, obs);
  panels?.observations(deviceId, obs.length);
  scheduleRefresh();
  if (!($('live') as HTMLInputElement).checked || !state.selected.includes(deviceId)) return;
  const info = $('plot-info');
  if (info.dataset.state !== 'ready' || !info.dataset.devices?.split(',').includes(deviceId)) return;
  const points = obs.map((o) => ({ x: Date.parse(o.timestamp) / 1000, y: temperatureOf(o) })).filter((p) => Number.isFinite(p.x));
  if ('preset' in state.range) plot.append(deviceId, points, rangeWindow());
  else {
    const [a, b] = rangeWindow();
    const inside = points.filter((p) => p.x >= a && p.x <= b);
    if (inside.length) plot.append(deviceId, inside);
  }
}

let refreshQueued = false;
function scheduleRefresh(): void {
  if (refreshQueued) return;
  refreshQueued = true;
  requestAnimationFrame(() => {
    refreshQueued = false;
    table.refresh();
    map.refresh();
    renderLatest();
  });
}

// ---- latest of all ----

const latestList = $('latest');
const latestItems = new Map<string, HTMLLIElement>();
function renderLatest(): void {
  const now = Date.now();
  const keep = new Set(state.devices.map((d) => d.id));
  for (const [id, li] of latestItems) if (!keep.has(id)) {
    li.remove();
    latestItems.delete(id);
  }
  const sorted = [...state.devices].sort((a, b) => (state.latest.get(b.id)?.ts ?? 0) - (state.latest.get(a.id)?.ts ?? 0) || a.id.localeCompare(b.id));
  for (const d of sorted) {
    let li = latestItems.get(d.id);
    if (!li) {
      const btn = el('button', { type: 'button', class: 'tile', 'aria-label': '' });
      btn.addEventListener('click', () => select(d.id, 'only'));
      li = el('li', { 'data-id': d.id }, btn);
      latestItems.set(d.id, li);
    }
    const l = state.latest.get(d.id);
    const btn = li.firstChild as HTMLButtonElement;
    const temp = fmtTemp(l?.temp, state.unit);
    const age = fmtAge(l?.ts, now);
    btn.replaceChildren(el('span', { class: 'mono' }, shortId(d.id)), el('strong', { class: 'val' }, temp), el('span', { class: 'muted age' }, l ? age : 'no readings'));
    btn.setAttribute('aria-label', `Device ${d.id}: ${l ? `${temp}, ${age}` : 'no readings'}. Plot it.`);
    btn.classList.toggle('stale', !!l && now - l.ts > 3600_000);
    btn.setAttribute('aria-pressed', String(state.selected.includes(d.id)));
  }
  const order = sorted.map((d) => latestItems.get(d.id)!);
  const have = [...latestList.children];
  if (have.length !== order.length || have.some((c, i) => c !== order[i])) {
    // Keep the focused tile where it is: reorder only when focus is outside the list.
    if (!latestList.contains(document.activeElement)) latestList.replaceChildren(...order);
  }
}

setInterval(() => {
  if (!state.conn) return;
  table.tick();
  for (const [id, li] of latestItems) {
    const age = li.querySelector('.age');
    const l = state.latest.get(id);
    if (age && l) age.textContent = fmtAge(l.ts);
  }
}, 5000);

markRange();
if (idIn.value) secretIn.focus();
else idIn.focus();

