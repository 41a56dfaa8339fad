// The Reef browser app: connect (and switch solution while connected), devices (table + map),
// plot (any numeric field, ranges, zoom, live, °C/°F, compare, CSV), the latest reading of every
// device, each device's staleness and each dev kit's reachability, and the dev kit and simulation
// panels. Errors are shown beside the control that caused them.
import './style.css';
import { ApiError, Connection, normaliseEndpoint, type Device, type Observation } from './api.ts';
import { $, addCollapse, el, fromInput, labelOf, setZone, toInput, zoneLabel, type Unit, type Zone } from './format.ts';
import { clearTemplateUnits, quantity, TEMPERATURE, type Quantity } from './fields.ts';
import { DeviceMap } from './map.ts';
import { PALETTE, PlotView } from './plot.ts';
import { DeviceTable, deviceState, type KitState, type Latest } from './table.ts';
import { LatestTiles } from './latest.ts';
import { PlotLoader } from './plot-load.ts';
import { explain, showError } from './problems.ts';
import { installRangeControls, isPreset, rangeWindow as rangeOf, type Range } from './range.ts';
import { mountPanels, type Panels } from './panels.ts';
import { setDeviceTemplates } from './alarms.ts';
import { hideMqtt, showMqtt } from './mqtt-info.ts';
import { DeviceSync, fetchSolution } from './sync.ts';
import { Live } from './live.ts';
import { clearSession, loadSession, saveSession } from './session.ts';
import { AddressView } from './view.ts';

const MAX_COMPARE = PALETTE.length;

const state = {
  conn: null as Connection | null,
  devices: [] as Device[],
  latest: new Map<string, Latest>(),
  kits: new Map<string, KitState>(),
  fields: new Set<string>([TEMPERATURE]),
  field: localStorage.getItem('reef.field') ?? TEMPERATURE,
  selected: [] as string[],
  unit: (localStorage.getItem('reef.unit') === 'F' ? 'F' : 'C') as Unit,
  zone: (localStorage.getItem('reef.zone') === 'UTC' ? 'UTC' : 'local') as Zone,
  // The last preset is remembered between visits.
  range: { preset: ((p) => (isPreset(p) ? p : '24h'))(localStorage.getItem('reef.range')) } as Range,
  stopEvents: null as null | (() => void),
  /** Signed in with a token kept for this tab (no secret): when it expires, the secret is asked again. */
  tokenOnly: null as null | { expiresAt: number },
};
const address = new AddressView({
  conn: () => state.conn,
  selected: () => state.selected,
  field: () => state.field,
  range: () => state.range,
  zoom: () => plotLoad.zoom,
  live: () => live.on,
  map: () => map.viewState(),
  show: (want, zoom) => {
    state.selected = want.slice(0, MAX_COMPARE);
    table.refresh();
    map.refresh();
    renderLatest();
    panels?.update();
    void loadPlot().then(() => {
      if (zoom && state.selected.join() === want.join()) plot.zoomTo(zoom);
    });
  },
  selectFirst: (devices) => select(pickFirst(devices), 'only'),
});
const view0 = address.initial;
if (view0?.field) state.field = view0.field;
if (view0?.range) state.range = view0.range;
setZone(state.zone);

const form = $('connect') as HTMLFormElement;
const endpointIn = $('endpoint') as HTMLInputElement;
const idIn = $('client-id') as HTMLInputElement;
const secretIn = $('client-secret') as HTMLInputElement;
const solutionIn = $('solution') as HTMLInputElement;
const connectBtn = $('connect-btn') as HTMLButtonElement;
const switchBtn = $('switch-btn') as HTMLButtonElement;
const disconnectBtn = $('disconnect-btn') as HTMLButtonElement;
const fieldSel = $('field') as HTMLSelectElement;
const zoneSel = $('zone') as HTMLSelectElement;
const statusEl = $('status');
const messageEl = $('message');
const main = $('main');

const q = (): Quantity => quantity(state.field, state.unit);

const ctx = {
  latest: state.latest,
  kits: state.kits,
  selected: () => state.selected,
  quantity: q,
  select: (id: string, mode: 'only' | 'toggle') => select(id, mode, true),
  stale: (id: string) => {
    const k = deviceState(state.latest.get(id), state.kits.get(id)).key;
    return k === 'stale' || k === 'offline';
  },
  label: (id: string) =>
    labelOf(
      state.devices.find((d) => d.id === id),
      id,
    ),
};
const table = new DeviceTable($('devices') as HTMLTableElement, $('filter') as HTMLInputElement, ctx, $('state-filter') as HTMLSelectElement);
// The count says what is shown: "(1 of 207)" while a filter narrows the list.
table.onCount = (shown, total) => {
  const text = shown === total ? `(${total})` : `(${shown} of ${total})`;
  const c = $('device-count');
  if (c.textContent !== text) c.textContent = text;
};
const map = new DeviceMap($('map'), $('map-fig'), $('map-legend'), ctx);
const plot = new PlotView($('plot'), $('plot-info'), $('readout'));
const plotLoad = new PlotLoader(plot, {
  conn: () => state.conn,
  selected: () => state.selected,
  field: () => state.field,
  range: () => state.range,
  rangeWindow,
  quantity: q,
  device: deviceOf,
  changed: () => saveView(),
});
let panels: Panels | null = null;
const sync = new DeviceSync({
  conn: () => state.conn,
  devices: () => state.devices,
  selected: () => state.selected,
  latest: state.latest,
  kits: state.kits,
  fields: state.fields,
  setDevices: (devices) => setDevices(devices),
  selectFirst: (devices) => select(pickFirst(devices), 'only'),
  fieldsChanged: () => renderFields(),
  kitsChanged: () => {
    table.refresh();
    renderLatest();
  },
  failed: (err) => showMessage(explain(err)),
});
for (const id of ['devices-panel', 'plot-panel', 'latest-panel']) addCollapse($(id));

// Remembered between visits: everything but the secret.
endpointIn.value = localStorage.getItem('reef.endpoint') ?? '';
idIn.value = localStorage.getItem('reef.clientId') ?? '';
solutionIn.value = view0?.solution ?? localStorage.getItem('reef.solution') ?? 'sandbox';
endpointIn.placeholder = location.origin;
($(`unit-${state.unit.toLowerCase()}`) as HTMLInputElement).checked = true;
zoneSel.value = state.zone;

function showMessage(text: string, kind: 'error' | 'info' = 'error'): void {
  messageEl.textContent = text;
  messageEl.className = `message ${kind}`;
  messageEl.hidden = !text;
}

form.addEventListener('submit', (e) => {
  e.preventDefault();
  if (state.conn) void switchSolution(solutionIn.value.trim());
  else void connect();
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
    const token = await conn.accessToken();
    const [devices, latest, cadence] = await fetchSolution(conn);
    localStorage.setItem('reef.endpoint', endpointIn.value.trim());
    localStorage.setItem('reef.clientId', clientId);
    saveSession({ endpoint: conn.endpoint, clientId, token });
    state.tokenOnly = null;
    secretIn.value = '';
    connected(conn, devices, latest, cadence);
  } catch (err) {
    statusEl.textContent = '';
    showMessage(explain(err));
    if (err instanceof ApiError && err.kind === 'credentials') secretIn.focus();
    if (err instanceof ApiError && err.kind === 'solution') solutionIn.focus();
  } finally {
    connectBtn.disabled = false;
  }
}

/** The header and page once signed in. */
function connected(conn: Connection, devices: Device[], latest: Awaited<ReturnType<Connection['latest']>>, cadence: Awaited<ReturnType<Connection['cadence']>>): void {
  connectBtn.hidden = true;
  disconnectBtn.hidden = false;
  switchBtn.hidden = false;
  for (const input of [endpointIn, idIn, secretIn]) input.disabled = true;
  document.body.classList.add('connected');
  main.hidden = false;
  begin(conn, devices, latest, cadence);
}

/**
 * A reload within the token's lifetime connects again without the secret: the token (not the
 * secret) is kept in this tab's sessionStorage (web/src/session.ts, docs/web.md "Reload and share").
 */
async function resume(): Promise<boolean> {
  // Only an address that names a view (what a reload or a bookmark of a connected page has) signs
  // in again by itself; the bare page is the sign-in form.
  const saved = view0?.solution ? loadSession() : null;
  if (!saved) return false;
  const solution = solutionIn.value.trim() || 'sandbox';
  const conn = Connection.withToken(saved.endpoint, saved.clientId, saved.token, solution);
  endpointIn.value = saved.endpoint === location.origin ? '' : saved.endpoint;
  idIn.value = saved.clientId;
  statusEl.textContent = 'Connecting…';
  try {
    const [devices, latest, cadence] = await fetchSolution(conn);
    state.tokenOnly = { expiresAt: saved.expiresAt };
    connected(conn, devices, latest, cadence);
    return true;
  } catch (err) {
    statusEl.textContent = '';
    if (err instanceof ApiError && err.kind === 'credentials') clearSession();
    else showMessage(explain(err));
    return false;
  }
}

/** Shows a solution of a signed-in connection: devices, latest readings, the live stream, the panels. */
function begin(conn: Connection, devices: Device[], latest: { deviceId: string; observations: Observation[] }[], cadence: Awaited<ReturnType<Connection['cadence']>> = []): void {
  state.conn = conn;
  localStorage.setItem('reef.solution', conn.solution);
  solutionIn.value = conn.solution;
  // The full endpoint and client id, never cut: the status line wraps instead (phones).
  statusEl.replaceChildren('Connected to ', el('strong', {}, conn.solution), ' at ', el('span', { class: 'mono' }, conn.endpoint), ' as ', el('span', { class: 'mono' }, conn.clientId));
  sync.note(latest, cadence);
  setDevices(devices);
  state.stopEvents = conn.events({
    observations: (g) => onLive(g.deviceId, g.observations),
    device: sync.reloadSoon,
    state: (up) => {
      // Back after a break: what came meanwhile is fetched (the latest of all and the plot).
      const wasDown = document.body.classList.contains('stream-down');
      document.body.classList.toggle('stream-down', !up);
      if (up && wasDown) {
        sync.reloadSoon();
        if (live.on) void loadPlot(true);
      }
    },
    other: (type, data) => panels?.event(type, data),
  });
  // The plot's requests go first: the panels' own (alarms, templates, MQTT, kits) would otherwise
  // take the browser's few connections to the server ahead of them.
  address.apply(devices);
  panels = mountPanels(conn, {
    devices: () => state.devices,
    selected: () => state.selected,
    unit: () => state.unit,
    reloadDevices: sync.reloadSoon,
    reloadPlot: () => void loadPlot(),
    message: showMessage,
    fields: () => [...state.fields],
    field: () => state.field,
    alarmsActive: showAlarmCount,
    alarmsChanged: () => {
      table.refresh();
      renderLatest();
      map.refresh();
      plot.redraw();
    },
  });
  panels.update();
  void showMqtt(conn, () => state.conn);
  sync.start();
}

/** Active alarms in the header (a link to the panel) and in the tab's title, seen from any tab. */
const BASE_TITLE = document.title;
function showAlarmCount(n: number): void {
  const a = $('alarm-count') as HTMLAnchorElement;
  a.hidden = n === 0;
  a.textContent = `${n} active alarm${n === 1 ? '' : 's'}`;
  document.title = n ? `(${n}) ${BASE_TITLE}` : BASE_TITLE;
}

/** Another solution of the same sign-in: no Disconnect, no secret again. */
async function switchSolution(solution: string): Promise<void> {
  const old = state.conn;
  if (!old) return;
  if (!solution) {
    showMessage('Enter the solution.');
    solutionIn.focus();
    return;
  }
  if (solution === old.solution) return;
  const conn = old.withSolution(solution);
  switchBtn.disabled = true;
  statusEl.textContent = `Switching to ${solution}…`;
  try {
    const [devices, latest, cadence] = await fetchSolution(conn);
    if (state.conn !== old) return;
    showMessage('');
    leave();
    begin(conn, devices, latest, cadence);
  } catch (err) {
    // The old solution stays on screen and live.
    statusEl.replaceChildren(`Still connected to ${old.solution}.`);
    showMessage(explain(err));
    solutionIn.focus();
  } finally {
    switchBtn.disabled = false;
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

/** Stops everything of the current solution (stream, loads, panels, kit polling). */
function leave(): void {
  state.stopEvents?.();
  state.stopEvents = null;
  plotLoad.abort();
  sync.stop();
  state.conn = null;
  state.devices = [];
  state.latest.clear();
  state.kits.clear();
  state.selected = [];
  panels?.destroy();
  panels = null;
  showError($('plot-error'), '');
  // Nothing of the previous solution stays on screen: its plot, legend and fields.
  plot.set([], rangeWindow(), q());
  $('plot-legend').replaceChildren();
  $('plot-title').textContent = '';
  delete $('plot-info').dataset.devices;
  state.fields.clear();
  state.fields.add(TEMPERATURE);
  clearTemplateUnits();
  renderFields();
}

function disconnect(reset = true): void {
  leave();
  if (!reset) return;
  clearSession();
  state.tokenOnly = null;
  address.clear();
  hideMqtt();
  for (const input of [endpointIn, idIn, secretIn, solutionIn]) input.disabled = false;
  connectBtn.hidden = false;
  disconnectBtn.hidden = true;
  switchBtn.hidden = true;
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
  setDeviceTemplates(devices);
  void sync.loadTemplateFields(devices);
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

// ---- fields ----

function renderFields(): void {
  const paths = [...state.fields].sort((a, b) => (a === TEMPERATURE ? -1 : b === TEMPERATURE ? 1 : a.localeCompare(b)));
  // The remembered field when this solution has it, else temperature (the remembered one stays stored).
  const preferred = address.pending?.field ?? localStorage.getItem('reef.field') ?? TEMPERATURE;
  state.field = state.fields.has(preferred) ? preferred : state.fields.has(state.field) ? state.field : TEMPERATURE;
  const label = (p: string) => {
    const qq = quantity(p, state.unit);
    return qq.unit ? `${p} (${qq.unit})` : p;
  };
  if (fieldSel.options.length === paths.length && paths.every((p, i) => fieldSel.options[i]!.value === p && fieldSel.options[i]!.textContent === label(p))) {
    fieldSel.value = state.field;
    return;
  }
  fieldSel.replaceChildren(...paths.map((p) => el('option', { value: p }, label(p))));
  fieldSel.value = state.field;
}

fieldSel.addEventListener('change', () => {
  state.field = fieldSel.value || TEMPERATURE;
  localStorage.setItem('reef.field', state.field);
  saveView();
  refreshViews();
  void loadPlot();
});

function refreshViews(): void {
  table.refresh();
  map.refresh();
  renderLatest();
  $('map-field').textContent = q().name.toLowerCase();
}

// ---- selection and plotting ----

/**
 * `reveal`: the user chose it (a row, a marker, a tile), so the plot is brought into view if it is
 * not (on a phone it is above the list).
 */
function select(id: string, mode: 'only' | 'toggle', reveal = false): void {
  if (mode === 'only') state.selected = [id];
  else if (state.selected.includes(id)) state.selected = state.selected.filter((x) => x !== id);
  else state.selected = [...state.selected, id].slice(-MAX_COMPARE);
  table.refresh();
  table.focusRow(id);
  map.refresh();
  renderLatest();
  panels?.update();
  void loadPlot();
  if (reveal) revealPlot();
}

function revealPlot(): void {
  const r = $('plot').getBoundingClientRect();
  if (r.top >= 0 && r.bottom <= window.innerHeight) return;
  $('plot-panel').scrollIntoView({ block: 'start' });
}

function rangeWindow(): [number, number] {
  return rangeOf(state.range);
}

function loadPlot(keepZoom = false): Promise<void> {
  return plotLoad.reload(keepZoom);
}

function deviceOf(id: string): Device | undefined {
  return state.devices.find((d) => d.id === id);
}

const markRange = installRangeControls({
  get: () => state.range,
  set: (r) => {
    state.range = r;
  },
  changed: () => void loadPlot(),
});

for (const r of document.querySelectorAll<HTMLInputElement>('input[name="unit"]')) {
  r.addEventListener('change', () => {
    if (!r.checked) return;
    state.unit = r.value === 'F' ? 'F' : 'C';
    localStorage.setItem('reef.unit', state.unit);
    plot.setQuantity(q());
    refreshViews();
    panels?.update();
  });
}

/** Times in the browser's zone or UTC: every time on screen follows. */
function showZone(): void {
  zoneSel.options[0]!.textContent = `Local (${zoneLabel(Date.now(), 'local')})`;
  for (const s of document.querySelectorAll('.zone-name')) s.textContent = `(${zoneLabel()})`;
  document.body.dataset.zone = state.zone;
}
const fromIn = $('from') as HTMLInputElement;
const toIn = $('to') as HTMLInputElement;
zoneSel.addEventListener('change', () => {
  // The custom range's inputs keep naming the same instants in the new zone.
  const from = fromInput(fromIn.value),
    to = fromInput(toIn.value);
  state.zone = zoneSel.value === 'UTC' ? 'UTC' : 'local';
  localStorage.setItem('reef.zone', state.zone);
  setZone(state.zone);
  if (Number.isFinite(from)) fromIn.value = toInput(from);
  if (Number.isFinite(to)) toIn.value = toInput(to);
  showZone();
  plot.redraw();
  refreshViews();
  panels?.update();
});

// ---- live ----

const live = new Live({
  plot,
  selected: () => state.selected,
  field: () => state.field,
  range: () => state.range,
  rangeWindow,
  reload: () => void loadPlot(true),
  changed: () => saveView(),
});

function onLive(deviceId: string, obs: Observation[]): void {
  sync.noteLatest(deviceId, obs);
  panels?.observations(deviceId, obs.length);
  scheduleRefresh();
  live.observations(deviceId, obs);
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

const tiles = new LatestTiles($('latest'), {
  devices: () => state.devices,
  latest: state.latest,
  kits: state.kits,
  selected: () => state.selected,
  quantity: q,
  select: (id) => select(id, 'only'),
});
function renderLatest(): void {
  tiles.render();
}

// Relative ages tick every second; only text that changed is touched (no DOM growth on a wall screen).
setInterval(() => {
  if (!state.conn) return;
  const now = Date.now();
  live.tick(now);
  table.tick();
  // A tab signed in with a kept token: when it expires, the secret is asked for again.
  if (state.tokenOnly && now >= state.tokenOnly.expiresAt) {
    disconnect();
    showMessage('The session has ended: enter the client secret to connect again.', 'info');
  } else if (!state.tokenOnly && state.conn) keepSession(state.conn);
  tiles.tick(now);
}, 1000);

function saveView(): void {
  address.save();
}
map.onView = saveView;

/** A renewed token replaces the kept one (about every 30 s it is checked; renewal happens before expiry). */
let lastKeep = 0;
function keepSession(conn: Connection): void {
  const now = Date.now();
  if (now - lastKeep < 30_000) return;
  lastKeep = now;
  void conn.client
    .getToken()
    .then((token) => {
      if (state.conn?.client === conn.client) saveSession({ endpoint: conn.endpoint, clientId: conn.clientId, token });
    })
    .catch(() => {});
}

// The theme can change while the page is open: the plot's canvas takes the new text colour.
matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => plot.redraw());

showZone();
markRange();
if (view0 && view0.live === false) live.box.checked = false;
if (view0?.map) map.setViewState(view0.map);
void resume().then((ok) => {
  if (ok) return;
  if (idIn.value) secretIn.focus();
  else idIn.focus();
});
