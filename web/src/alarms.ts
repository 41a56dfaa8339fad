// Alarms in the app (docs/alarms.md, docs/web.md "Alarms"): a panel listing active alarms first with
// one-click acknowledge, a threshold form for the plotted device, threshold lines on the plot that
// can be dragged to a new value, raised alarms marked on the time axis, and a badge per device in the
// table. The panel follows the live stream (`alarm` and `alarm-rule` events).
import type uPlot from 'uplot';
import { ApiError as SdkApiError, type Alarm, type AlarmRule, type NewAlarmRule } from '../../src/sdk/index.ts';
import type { Connection } from './api.ts';
import { el, fmtTime, shortId, type Unit } from './format.ts';

export interface AlarmContext {
  selected: () => string[];
  unit: () => Unit;
  message: (text: string, kind?: 'error' | 'info') => void;
  /** Counts, rules or alarms changed: redraw the table badges and the plot. */
  changed: () => void;
  /** The numeric fields the solution's readings offer (the form's field list). */
  fields?: () => string[];
  /** The plotted field. */
  field?: () => string;
  /** How many alarms are active (the header's count and the tab's title). */
  active?: (n: number) => void;
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
    this.form = el('form', { class: 'alarm-form', 'aria-label': 'Alarm rule of the plotted device', novalidate: '' });
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
    this.ctx.active?.(0);
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
    this.ctx.active?.(active.length);
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

  /** The plotted device's own rule on the field (the first, if it has several). */
  private ruleOf(deviceId: string, field: string): AlarmRule | undefined {
    return shared.rules.find((r) => r.deviceId === deviceId && r.field === field);
  }

  /** The field the form is about: the one chosen in it, else the plotted field when numeric rules make sense. */
  private formField(): string {
    const chosen = this.form.querySelector<HTMLSelectElement>('#alarm-field')?.value;
    return chosen || this.ctx.field?.() || 'temperature';
  }

  /**
   * The rule form for the one plotted device: any numeric field, every condition the API has
   * (above, below, outside a range, rate of change, silence), for how long it must hold. Its
   * outcome is said beside it.
   */
  private renderForm(): void {
    const sel = this.ctx.selected();
    const dev = sel.length === 1 ? sel[0]! : null;
    if (!dev) {
      this.formFor = undefined;
      this.form.replaceChildren(el('p', { class: 'muted' }, 'Plot one device to set its alarms.'));
      return;
    }
    const unit = this.ctx.unit();
    const field = this.formField();
    const fields = [...new Set([field, ...(this.ctx.fields?.() ?? ['temperature'])])];
    const r = this.ruleOf(dev, field);
    // The list is rebuilt on every alarm event; the form only when what it shows changed (another
    // device plotted, the unit, the field, the rule saved): what is being typed is not wiped by an
    // alarm raised or acknowledged meanwhile.
    const formFor = `${dev} ${unit} ${field} ${fields.join(',')} ${r ? `${r.id} ${r.updatedAt}` : '-'}`;
    if (formFor === this.formFor) return;
    if (this.formFor?.split(' ')[0] !== dev) this.status.textContent = '';
    this.formFor = formFor;
    const isTemp = field === 'temperature';
    const unitText = isTemp ? ` in °${unit}` : '';
    const shownOf = (v: number | undefined) =>
      v === undefined || r === undefined ? '' : String(Math.round((isTemp && r.unit !== unit ? (unit === 'F' ? (stored(v, r) * 9) / 5 + 32 : stored(v, r)) : v) * 10) / 10);
    const rateOf = (v: number | undefined) =>
      v === undefined || r === undefined ? '' : String(Math.round((isTemp && r.unit && r.unit !== unit ? (unit === 'F' ? (v * 9) / 5 : (v * 5) / 9) : v) * 100) / 100);
    const num = (id: string, label: string, value: string, attrs: Record<string, string> = {}) =>
      el(
        'span',
        { class: 'cond-input', 'data-for': attrs['data-for'] ?? '' },
        el('label', { for: id }, label),
        el('input', { id, name: id.replace('alarm-', ''), type: 'number', step: 'any', value, ...attrs }),
      );
    const fieldSel = el('select', { id: 'alarm-field', name: 'field' }, ...fields.map((f) => el('option', { value: f }, f)));
    fieldSel.value = field;
    fieldSel.addEventListener('change', () => this.renderForm());
    const cond = el(
      'select',
      { id: 'alarm-condition', name: 'condition' },
      el('option', { value: 'above' }, 'above'),
      el('option', { value: 'below' }, 'below'),
      el('option', { value: 'outside' }, 'outside a range'),
      el('option', { value: 'rate' }, 'changing faster than'),
      el('option', { value: 'silence' }, 'silent for'),
    );
    cond.value = r?.condition ?? 'above';
    const direction = el(
      'select',
      { id: 'alarm-direction', name: 'direction' },
      el('option', { value: 'any' }, 'either way'),
      el('option', { value: 'rise' }, 'rising'),
      el('option', { value: 'fall' }, 'falling'),
    );
    direction.value = r?.direction ?? 'any';
    const groups = {
      threshold: num('alarm-threshold', `Threshold${unitText}`, r?.threshold !== undefined ? shownOf(r.threshold) : '', { 'data-for': 'above below' }),
      low: num('alarm-low', `Low${unitText}`, shownOf(r?.low), { 'data-for': 'outside' }),
      high: num('alarm-high', `High${unitText}`, shownOf(r?.high), { 'data-for': 'outside' }),
      rate: num('alarm-rate', `Change per minute${unitText}`, rateOf(r?.ratePerMinute), { 'data-for': 'rate', min: '0' }),
      direction: el('span', { class: 'cond-input', 'data-for': 'rate' }, el('label', { for: 'alarm-direction' }, 'Direction'), direction),
      silence: num('alarm-silence', 'Minutes without readings', r?.silenceMs ? String(Math.round(r.silenceMs / 60_000)) : '15', { 'data-for': 'silence', min: '1' }),
      minutes: num('alarm-minutes', 'Lasting (min)', String(r ? Math.round(r.durationMs / 60_000) : 10), { 'data-for': 'above below outside rate', min: '0', max: '10080', step: '1' }),
    };
    const showFor = () => {
      for (const g of Object.values(groups)) g.hidden = !(g.dataset.for ?? '').split(' ').includes(cond.value);
    };
    cond.addEventListener('change', showFor);
    showFor();
    this.form.replaceChildren(
      el('span', { class: 'cond-input' }, el('label', { for: 'alarm-field' }, `Alarm when ${shortId(dev)}'s`), fieldSel),
      el('span', { class: 'cond-input' }, el('label', { for: 'alarm-condition' }, 'is'), cond),
      ...Object.values(groups),
      el('button', { type: 'submit', class: 'primary' }, r ? 'Update alarm' : 'Set alarm'),
      el('small', { id: 'alarm-hint', class: 'muted' }, r && (r.condition === 'above' || r.condition === 'below') ? 'Or drag the dashed line on the plot.' : 'Thresholds are drawn on the plot.'),
      this.status,
    );
  }

  /** The outcome of a save, beside the form (an error in the error colour). */
  private readonly status = el('p', { id: 'alarm-status', class: 'alarm-status', role: 'status', 'aria-live': 'polite' });

  private say(text: string, error = false): void {
    // The status element is re-attached by renderForm; keep it in the form.
    if (!this.status.isConnected) this.form.append(this.status);
    this.status.textContent = text;
    this.status.classList.toggle('error-text', error);
  }

  private async submit(): Promise<void> {
    const dev = this.ctx.selected()[0];
    if (!dev) return;
    const fd = new FormData(this.form);
    const val = (k: string) => {
      const raw = String(fd.get(k) ?? '').trim();
      return raw === '' ? Number.NaN : Number(raw);
    };
    const field = String(fd.get('field') || 'temperature');
    const condition = fd.get('condition') as AlarmRule['condition'];
    const unit = this.ctx.unit();
    const isTemp = field === 'temperature';
    const body: NewAlarmRule = {
      condition,
      field,
      deviceId: dev,
      unit: isTemp ? unit : null,
      hysteresis: isTemp ? (unit === 'F' ? 1 : 0.5) : 0,
      duration: condition === 'silence' ? 0 : Math.max(0, Math.round(val('minutes') || 0)) * 60_000,
    };
    const need = (k: string, what: string): number | null => {
      const v = val(k);
      if (Number.isFinite(v)) return v;
      this.say(`Type ${what} (a number).`, true);
      return null;
    };
    if (condition === 'above' || condition === 'below') {
      const t = need('threshold', 'a threshold');
      if (t === null) return;
      body.threshold = t;
    } else if (condition === 'outside') {
      const lo = need('low', 'the low end');
      const hi = lo === null ? null : need('high', 'the high end');
      if (lo === null || hi === null) return;
      if (lo >= hi) return this.say('The low end must be below the high end.', true);
      [body.low, body.high] = [lo, hi];
    } else if (condition === 'rate') {
      const rate = need('rate', 'a change per minute');
      if (rate === null) return;
      body.ratePerMinute = rate;
      body.direction = String(fd.get('direction') || 'any') as 'rise' | 'fall' | 'any';
      body.hysteresis = 0;
    } else if (condition === 'silence') {
      const m = need('silence', 'the minutes without readings');
      if (m === null) return;
      body.silence = Math.round(m * 60_000);
      // A silence rule has no value to judge: no unit, hysteresis or duration (docs/alarms.md).
      delete body.hysteresis;
      delete body.duration;
      delete body.unit;
    }
    const c = this.conn.client;
    this.say('Saving…');
    try {
      const r = this.ruleOf(dev, field);
      if (r) await c.updateAlarmRule(r.id, { ...body, name: r.name, severity: r.severity, webhook: r.webhook ? { url: r.webhook.url } : null });
      else await c.createAlarmRule(body);
      await this.load();
      this.say('Alarm saved.');
    } catch (e) {
      this.say((this.conn.explain(e) as Error).message, true);
    }
  }

  private async saveThreshold(rule: AlarmRule, threshold: number): Promise<void> {
    try {
      // A rule read from the API may be sent back changed (PUT replaces it).
      await this.conn.client.updateAlarmRule(rule.id, { ...rule, threshold });
      await this.load();
      this.say(`Threshold set to ${threshold}${rule.unit ? ` °${rule.unit}` : ''}.`);
    } catch (e) {
      this.say((this.conn.explain(e) as Error).message, true);
      await this.load();
    }
  }
}
