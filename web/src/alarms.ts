// Alarms in the app (docs/alarms.md, docs/web.md "Alarms"): a panel listing active alarms first with
// one-click acknowledge, a threshold form for the plotted device, threshold lines on the plot that
// can be dragged to a new value, raised alarms marked on the time axis, and a badge per device in the
// table. The panel follows the live stream (`alarm` and `alarm-rule` events).
import type uPlot from 'uplot';
import { ApiError as SdkApiError, type Alarm, type AlarmRule } from '../../src/sdk/index.ts';
import type { Connection } from './api.ts';
import { el, fmtTime, shortId, type Unit } from './format.ts';

export interface AlarmContext {
  selected: () => string[];
  unit: () => Unit;
  message: (text: string, kind?: 'error' | 'info') => void;
  /** Counts, rules or alarms changed: redraw the table badges and the plot. */
  changed: () => void;
}

/** What the table and the plot read; one panel is mounted at a time. */
const shared = {
  counts: new Map<string, number>(),
  rules: [] as AlarmRule[],
  alarms: [] as Alarm[],
  /** Saves a dragged threshold; set by the mounted panel. */
  save: null as null | ((rule: AlarmRule, threshold: number) => Promise<void>),
};

/** Active alarms of a device (the table's badge). */
export function alarmBadge(deviceId: string): number {
  return shared.counts.get(deviceId) ?? 0;
}

/** What the plot shows: a field and how stored values become shown ones (web/src/fields.ts). */
export interface Shown {
  path: string;
  conv: (v: number) => number;
  isTemperature: boolean;
  unit: string;
}

/** The template each device names (domainInfo.templateId), for the lines of rules per template. */
const templateOf = new Map<string, string>();

/** Notes which template each device of the solution names (called with every device list). */
export function setDeviceTemplates(devices: readonly { id: string; domainInfo?: Record<string, unknown> }[]): void {
  templateOf.clear();
  for (const d of devices) {
    const t = d.domainInfo?.templateId;
    if (typeof t === 'string') templateOf.set(d.id, t);
  }
}

/** A rule's value as stored (temperatures in °C; rules may be written in °F). */
const stored = (v: number, r: AlarmRule) => (r.unit === 'F' ? ((v - 32) * 5) / 9 : v);
/** A shown value back to stored (°F on screen → °C). */
const unshow = (v: number, q: Shown) => (q.isTemperature && q.unit === '°F' ? ((v - 32) * 5) / 9 : v);

/** Threshold lines of the rules on the shown field that watch the plotted devices (stored values). */
function thresholds(deviceIds: string[], q: Shown): { v: number; rule: AlarmRule; key: 'threshold' | 'low' | 'high' }[] {
  const out: { v: number; rule: AlarmRule; key: 'threshold' | 'low' | 'high' }[] = [];
  for (const r of shared.rules) {
    if (!r.enabled || r.field !== q.path) continue;
    if (r.deviceId !== null && !deviceIds.includes(r.deviceId)) continue;
    // A rule per device template: a line only when a plotted device names that template.
    if (r.templateId && !deviceIds.some((id) => templateOf.get(id) === r.templateId)) continue;
    if ((r.condition === 'above' || r.condition === 'below') && r.threshold !== undefined) out.push({ v: stored(r.threshold, r), rule: r, key: 'threshold' });
    if (r.condition === 'outside' && r.low !== undefined && r.high !== undefined) {
      out.push({ v: stored(r.low, r), rule: r, key: 'low' }, { v: stored(r.high, r), rule: r, key: 'high' });
    }
  }
  return out;
}

/** The threshold values drawn for these devices, as shown: the y scale keeps them in view. */
export function alarmThresholds(deviceIds: string[], q: Shown): number[] {
  return thresholds(deviceIds, q).map((l) => q.conv(l.v));
}

const dragging = new WeakMap<uPlot, { q: Shown; deviceIds: string[] }>();

/**
 * The plot's draw hook: dashed threshold lines and a triangle on the time axis at each alarm raised
 * in view. A line of an above/below rule on one device can be dragged to a new value.
 */
export function drawAlarmOverlay(u: uPlot, q: Shown, deviceIds: string[], host: HTMLElement): void {
  const ctx = u.ctx;
  const { left, top, width, height } = u.bbox;
  const lines = thresholds(deviceIds, q);
  host.dataset.thresholds = lines.map((l) => q.conv(l.v).toFixed(2)).join(',');
  // Where each line is, in CSS pixels from the top of the plotting area (what a drag grabs).
  host.dataset.thresholdY = lines.map((l) => u.valToPos(q.conv(l.v), 'y').toFixed(1)).join(',');
  ctx.save();
  ctx.lineWidth = 1.5 * devicePixelRatio;
  ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
  for (const l of lines) {
    const y = u.valToPos(q.conv(l.v), 'y', true);
    if (y < top || y > top + height) continue;
    ctx.strokeStyle = l.rule.condition === 'below' ? '#2a62c9' : '#c0392b';
    ctx.beginPath();
    ctx.moveTo(left, y);
    ctx.lineTo(left + width, y);
    ctx.stroke();
  }
  ctx.setLineDash([]);
  let shown = 0;
  for (const a of shared.alarms) {
    if (!deviceIds.includes(a.deviceId)) continue;
    const x = u.valToPos(Date.parse(a.raisedAt) / 1000, 'x', true);
    if (x < left || x > left + width) continue;
    shown++;
    const s = 6 * devicePixelRatio;
    const base = top + height;
    ctx.fillStyle = a.active ? '#c0392b' : '#8a8f98';
    ctx.beginPath();
    ctx.moveTo(x, base - 2 * s);
    ctx.lineTo(x - s, base);
    ctx.lineTo(x + s, base);
    ctx.closePath();
    ctx.fill();
  }
  host.dataset.alarmMarks = String(shown);
  ctx.restore();
  const known = dragging.get(u);
  dragging.set(u, { q, deviceIds });
  if (!known) installDrag(u);
}

/** Dragging a threshold line (within 6 px of it) moves it; releasing saves the rule. */
function installDrag(u: uPlot): void {
  u.over.addEventListener(
    'mousedown',
    (e) => {
      const { q, deviceIds } = dragging.get(u)!;
      const rect = u.over.getBoundingClientRect();
      const y = e.clientY - rect.top;
      const hit = thresholds(deviceIds, q).find((l) => l.key === 'threshold' && l.rule.deviceId !== null && Math.abs(u.valToPos(q.conv(l.v), 'y') - y) <= 6);
      if (!hit) return;
      // The plot's own drag (zoom) must not start.
      e.stopPropagation();
      e.preventDefault();
      const move = (m: MouseEvent) => {
        const v = unshow(u.posToVal(m.clientY - rect.top, 'y'), q);
        hit.rule.threshold = hit.rule.unit === 'F' ? (v * 9) / 5 + 32 : v;
        u.redraw(false);
      };
      const up = () => {
        window.removeEventListener('mousemove', move);
        window.removeEventListener('mouseup', up);
        void shared.save?.(hit.rule, Math.round(hit.rule.threshold! * 10) / 10);
      };
      window.addEventListener('mousemove', move);
      window.addEventListener('mouseup', up);
    },
    true,
  );
}

const STATUS_TEXT: Record<Alarm['status'], string> = {
  raised: 'raised',
  acknowledged: 'acknowledged',
  'cleared-unacknowledged': 'cleared, not acknowledged',
  cleared: 'cleared',
};

export class AlarmsPanel {
  readonly root: HTMLElement;
  private list: HTMLUListElement;
  private count: HTMLElement;
  private form: HTMLFormElement;
  /** What the form was last built for (device, unit, rule and its version): see renderForm(). */
  private formFor: string | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private destroyed = false;
  /** This panel's own failures, beside it (not part of its heading, so not of its name). */
  private readonly error: HTMLElement;

  constructor(
    private readonly conn: Connection,
    private readonly ctx: AlarmContext,
    before: HTMLElement | null,
  ) {
    this.count = el('span', { class: 'count' });
    this.error = el('p', { class: 'panel-error', role: 'status' });
    this.error.hidden = true;
    this.list = el('ul', { class: 'alarms', 'aria-live': 'polite' });
    this.form = el('form', { class: 'alarm-form', 'aria-label': 'Temperature alarm of the plotted device' });
    this.root = el(
      'section',
      { id: 'alarms-panel', class: 'panel wide', 'aria-labelledby': 'alarms-h' },
      el('div', { class: 'panel-head' }, el('h2', { id: 'alarms-h' }, 'Alarms ', this.count)),
      this.error,
      this.list,
      this.form,
    );
    before?.parentElement?.insertBefore(this.root, before);
    shared.save = (rule, threshold) => this.saveThreshold(rule, threshold);
    this.form.addEventListener('submit', (e) => {
      e.preventDefault();
      void this.submit();
    });
    void this.load();
  }

  destroy(): void {
    this.destroyed = true;
    clearTimeout(this.timer);
    this.root.remove();
    shared.counts.clear();
    shared.rules = [];
    shared.alarms = [];
    shared.save = null;
  }

  /** A live event: reload once per burst. */
  event(type: string): void {
    if (type !== 'alarm' && type !== 'alarm-rule') return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.load(), 150);
  }

  /** The selection or the unit changed: the form follows the plotted device. */
  update(): void {
    this.renderForm();
  }

  /** Loads started; only the newest one's answer is shown (an older one may answer last). */
  private loads = 0;

  async load(): Promise<void> {
    const c = this.conn.client;
    const mine = ++this.loads;
    try {
      const [active, past, rules, counts] = await Promise.all([
        c.listAlarms({ status: 'active', limit: 100 }),
        c.listAlarms({ status: ['cleared-unacknowledged', 'cleared'], limit: 20 }),
        c.listAlarmRules(),
        c.alarmCounts(),
      ]);
      if (this.destroyed || mine !== this.loads) return;
      shared.alarms = [...active.alarms, ...past.alarms];
      shared.rules = rules;
      shared.counts = new Map(counts.map((x) => [x.deviceId, x.active]));
      this.error.hidden = true;
      this.render();
      this.ctx.changed();
    } catch (e) {
      // An answer for a panel already closed (a solution switch, a reconnect) or an older load says
      // nothing about now; a failure of this panel is said in the panel, beside what it concerns,
      // not in the page's message line (which belongs to connecting and the device list).
      if (this.destroyed || mine !== this.loads) return;
      // A service without the alarms component has no such routes: then there is no panel.
      if (e instanceof SdkApiError && e.status === 404 && e.code === 'ROUTE_NOT_FOUND') {
        this.root.hidden = true;
        return;
      }
      this.error.textContent = (this.conn.explain(e) as Error).message;
      this.error.hidden = false;
      return;
    }
  }

  private render(): void {
    const active = shared.alarms.filter((a) => a.active);
    this.count.textContent = `(${active.length} active)`;
    if (!shared.alarms.length) {
      this.list.replaceChildren(el('li', { class: 'muted' }, 'No alarms. Set a threshold for the plotted device below.'));
    } else {
      // Active first (newest first within), then the recently cleared.
      this.list.replaceChildren(...shared.alarms.map((a) => this.item(a)));
    }
    this.renderForm();
  }

  private item(a: Alarm): HTMLLIElement {
    const unit = this.ctx.unit();
    const reading = a.reading
      ? ` at ${a.reading.unit && a.reading.unit !== unit && a.rule.field === 'temperature' ? `${a.reading.value} °${a.reading.unit}` : `${a.reading.value}${a.reading.unit ? ` °${a.reading.unit}` : ''}`}`
      : '';
    const li = el(
      'li',
      { class: `alarm ${a.status} sev-${a.severity}`, 'data-id': a.id, 'data-status': a.status },
      el('span', { class: `badge ${a.active ? 'raised' : 'cleared'}` }, STATUS_TEXT[a.status]),
      el('strong', {}, a.rule.name),
      el('span', { class: 'mono' }, shortId(a.deviceId)),
      el('span', { class: 'muted' }, `${fmtTime(Date.parse(a.raisedAt))}${reading}`),
    );
    if (a.acknowledgedBy) li.append(el('span', { class: 'muted' }, `acknowledged by ${a.acknowledgedBy.name}`));
    if (a.status === 'raised' || a.status === 'cleared-unacknowledged') {
      const b = el('button', { type: 'button', class: 'ack', 'aria-label': `Acknowledge ${a.rule.name} on ${shortId(a.deviceId)}` }, 'Acknowledge');
      b.addEventListener('click', () => void this.acknowledge(a.id, b));
      li.append(b);
    }
    return li;
  }

  private async acknowledge(id: string, b: HTMLButtonElement): Promise<void> {
    b.disabled = true;
    try {
      await this.conn.client.acknowledgeAlarm(id);
      await this.load();
    } catch (e) {
      b.disabled = false;
      this.ctx.message((this.conn.explain(e) as Error).message);
    }
  }

  /** The plotted device's own above/below temperature rule, if it has one. */
  private ruleOf(deviceId: string): AlarmRule | undefined {
    return shared.rules.find((r) => r.deviceId === deviceId && r.field === 'temperature' && (r.condition === 'above' || r.condition === 'below'));
  }

  private renderForm(): void {
    const sel = this.ctx.selected();
    const dev = sel.length === 1 ? sel[0]! : null;
    if (!dev) {
      this.formFor = undefined;
      this.form.replaceChildren(el('p', { class: 'muted' }, 'Plot one device to set its temperature alarm.'));
      return;
    }
    const unit = this.ctx.unit();
    const r = this.ruleOf(dev);
    // The list is rebuilt on every alarm event; the form only when what it shows changed (another
    // device plotted, the unit, the rule saved): a threshold being typed is not wiped by an alarm
    // raised or acknowledged meanwhile.
    const formFor = `${dev} ${unit} ${r ? `${r.id} ${r.updatedAt}` : '-'}`;
    if (formFor === this.formFor) return;
    this.formFor = formFor;
    const value = r?.threshold !== undefined ? (r.unit === unit ? r.threshold : unit === 'F' ? (stored(r.threshold, r) * 9) / 5 + 32 : stored(r.threshold, r)) : null;
    const cond = el('select', { id: 'alarm-condition', name: 'condition' }, el('option', { value: 'above' }, 'above'), el('option', { value: 'below' }, 'below'));
    cond.value = r?.condition ?? 'above';
    this.form.replaceChildren(
      el('label', { for: 'alarm-condition' }, `Alarm when ${shortId(dev)} is`),
      cond,
      el('label', { for: 'alarm-threshold', class: 'sr-only' }, `Threshold in °${unit}`),
      el('input', {
        id: 'alarm-threshold',
        name: 'threshold',
        type: 'number',
        step: '0.1',
        required: '',
        value: value === null ? '' : String(Math.round(value * 10) / 10),
        'aria-describedby': 'alarm-hint',
      }),
      el('span', {}, `°${unit} for`),
      el('label', { for: 'alarm-minutes', class: 'sr-only' }, 'Minutes it must last'),
      el('input', { id: 'alarm-minutes', name: 'minutes', type: 'number', min: '0', max: '10080', step: '1', value: String(r ? Math.round(r.durationMs / 60_000) : 10) }),
      el('span', {}, 'min'),
      el('button', { type: 'submit', class: 'primary' }, r ? 'Update alarm' : 'Set alarm'),
      el('small', { id: 'alarm-hint', class: 'muted' }, r ? 'Or drag the dashed line on the plot.' : 'The threshold is drawn on the plot.'),
    );
  }

  private async submit(): Promise<void> {
    const dev = this.ctx.selected()[0];
    if (!dev) return;
    const fd = new FormData(this.form);
    const threshold = Number(fd.get('threshold'));
    const minutes = Number(fd.get('minutes'));
    if (!Number.isFinite(threshold) || String(fd.get('threshold')).trim() === '') return this.ctx.message('Type a threshold (a number).');
    const unit = this.ctx.unit();
    const body = { condition: fd.get('condition') as 'above' | 'below', threshold, unit, duration: Math.max(0, Math.round(minutes)) * 60_000, hysteresis: unit === 'F' ? 1 : 0.5, deviceId: dev };
    const c = this.conn.client;
    try {
      const r = this.ruleOf(dev);
      if (r) await c.updateAlarmRule(r.id, { ...body, name: r.name, severity: r.severity, webhook: r.webhook ? { url: r.webhook.url } : null });
      else await c.createAlarmRule(body);
      this.ctx.message('Alarm saved.', 'info');
      await this.load();
    } catch (e) {
      this.ctx.message((this.conn.explain(e) as Error).message);
    }
  }

  private async saveThreshold(rule: AlarmRule, threshold: number): Promise<void> {
    try {
      // A rule read from the API may be sent back changed (PUT replaces it).
      await this.conn.client.updateAlarmRule(rule.id, { ...rule, threshold });
      this.ctx.message(`Threshold set to ${threshold}${rule.unit ? ` °${rule.unit}` : ''}.`, 'info');
    } catch (e) {
      this.ctx.message((this.conn.explain(e) as Error).message);
    }
    await this.load();
  }
}
