// The device, dev kit and simulation panels, shown when they apply: the device panel (location and
// template) for the selected device, the dev kit panel for a NICDevKit
// selected in sandbox (through the gateway's HTTP bridge, docs/coap.md), the simulation panel in
// StudioSimulation (docs/simulation.md).
import type { NewSimulation, Simulation } from '../../src/sdk/index.ts';
import type { Connection, Device } from './api.ts';
import { ApiError } from './api.ts';
import { $, addCollapse, el, fmtTime, type Unit } from './format.ts';
import { DevicePanel } from './device-edit.ts';
import { DevKitPanel } from './devkit.ts';
import { AlarmsPanel } from './alarms.ts';

export interface PanelContext {
  devices: () => Device[];
  selected: () => string[];
  unit: () => Unit;
  reloadDevices: () => void;
  reloadPlot: () => void;
  /** Shows a message above the panels (alarms panel). */
  message: (text: string, kind?: 'error' | 'info') => void;
  /** Alarm counts, rules or alarms changed: redraw badges and the plot's thresholds. */
  alarmsChanged: () => void;
  /** Numeric fields on offer and the plotted one (the alarm form's field list). */
  fields?: () => string[];
  field?: () => string;
  /** How many alarms are active (the header and the tab title say it). */
  alarmsActive?: (n: number) => void;
}

export interface Panels {
  update(): void;
  event(type: string, data: unknown): void;
  observations(deviceId: string, count: number): void;
  destroy(): void;
}

export type { Simulation };

function msText(ms: number): string {
  for (const [u, n] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['min', 60_000],
    ['s', 1000],
  ] as const)
    if (ms >= n && ms % n === 0) return `${ms / n} ${u}`;
  return `${ms} ms`;
}

const live = (s: Simulation) => s.status === 'running' || s.status === 'backfilling';

class SimulationPanel {
  private sims = new Map<string, Simulation>();
  /** Device id → simulation id, to count live readings (progress events cover the backfill only). */
  private owner = new Map<string, string>();
  private renderQueued = false;
  private list: HTMLUListElement;
  private form: HTMLFormElement;
  private status: HTMLElement;
  /** Failures of this panel's controls, shown beside them (not at the top of the page). */
  private error: HTMLElement;

  constructor(
    private readonly root: HTMLElement,
    private readonly conn: Connection,
    private readonly ctx: PanelContext,
  ) {
    const field = (id: string, label: string, attrs: Record<string, string>, hint = '') =>
      el(
        'div',
        { class: 'field' },
        el('label', { for: id }, label),
        el('input', { id, name: id, ...attrs, ...(hint ? { 'aria-describedby': `${id}-hint` } : {}) }),
        ...(hint ? [el('small', { id: `${id}-hint`, class: 'muted' }, hint)] : []),
      );
    this.form = el(
      'form',
      { class: 'sim-form', 'aria-labelledby': 'sim-h' },
      el(
        'div',
        { class: 'row' },
        field('sim-name', 'Name', { placeholder: 'optional', maxlength: '100' }),
        field('sim-devices', 'Devices', { type: 'number', min: '1', max: '10000', value: '10', required: '' }),
        field('sim-interval', 'Interval', { value: '10s', required: '', spellcheck: 'false' }, '10s, 1m…'),
        field('sim-backfill', 'Backfill', { value: '1d', spellcheck: 'false' }, 'history: 1h, 7d… or empty'),
        field('sim-duration', 'Duration', { placeholder: 'until stopped', spellcheck: 'false' }),
      ),
      el(
        'fieldset',
        { class: 'row area' },
        el('legend', {}, 'Area (a circle)'),
        field('sim-lat', 'Latitude', { type: 'number', step: 'any', min: '-90', max: '90', value: '38.7223', required: '' }),
        field('sim-lon', 'Longitude', { type: 'number', step: 'any', min: '-180', max: '180', value: '-9.1393', required: '' }),
        field('sim-radius', 'Radius (km)', { type: 'number', step: 'any', min: '0.1', max: '5000', value: '20', required: '' }),
      ),
      el('div', { class: 'row' }, el('button', { type: 'submit', class: 'primary', id: 'sim-start', 'aria-describedby': 'sim-error' }, 'Start simulation')),
    );
    this.error = el('p', { id: 'sim-error', class: 'error-text', role: 'alert' });
    this.error.hidden = true;
    this.form.append(this.error);
    this.status = el('p', { class: 'sim-status', role: 'status', 'aria-live': 'polite' });
    this.list = el('ul', { class: 'sims', 'aria-label': 'Simulations' });
    root.replaceChildren(el('h2', { id: 'sim-h' }, 'Simulation'), this.form, this.status, this.list);
    addCollapse(root);
    this.form.addEventListener('submit', (e) => {
      e.preventDefault();
      void this.start();
    });
    void this.refresh();
  }

  private showError(text: string): void {
    this.error.textContent = text;
    this.error.hidden = !text;
  }

  private value(id: string): string {
    return ($(id) as HTMLInputElement).value.trim();
  }

  private async start(): Promise<void> {
    const body: NewSimulation = {
      devices: Number(this.value('sim-devices')),
      interval: this.value('sim-interval'),
      area: { center: { latitude: Number(this.value('sim-lat')), longitude: Number(this.value('sim-lon')) }, radiusKm: Number(this.value('sim-radius')) },
    };
    if (this.value('sim-name')) body.name = this.value('sim-name');
    if (this.value('sim-backfill')) body.backfill = this.value('sim-backfill');
    if (this.value('sim-duration')) body.duration = this.value('sim-duration');
    const btn = $('sim-start') as HTMLButtonElement;
    btn.disabled = true;
    // A new attempt: the previous outcome ("Started … with 8 devices") no longer applies.
    this.showError('');
    this.status.textContent = 'Starting…';
    try {
      const sim = await this.conn.sdk((c) => c.createSimulation(body));
      this.sims.set(sim.id, sim);
      for (const d of sim.deviceIds ?? []) this.owner.set(d, sim.id);
      this.status.textContent = `Started ${sim.name ?? 'a simulation'} with ${sim.devices} devices.`;
      this.render();
      this.ctx.reloadDevices();
    } catch (err) {
      this.status.textContent = '';
      this.showError(`The simulation did not start: ${err instanceof ApiError ? err.message : String(err)}`);
      // Centred, not at the edge: the live plot's legend above may grow by a line afterwards.
      this.error.scrollIntoView({ block: 'center' });
    } finally {
      btn.disabled = false;
    }
  }

  private async stop(id: string): Promise<void> {
    try {
      const sim = await this.conn.sdk((c) => c.stopSimulation(id));
      this.sims.set(sim.id, sim);
      this.status.textContent = `Stopped ${sim.name ?? 'the simulation'}.`;
      this.render();
    } catch (err) {
      this.showError(`The simulation did not stop: ${err instanceof ApiError ? err.message : String(err)}`);
    }
  }

  async refresh(): Promise<void> {
    try {
      const list = await this.conn.sdk((c) => c.listSimulations());
      for (const s of list) this.sims.set(s.id, s);
      this.render();
      // The running ones' device ids, to count their live readings.
      await Promise.all(
        list.filter(live).map(async (s) => {
          const full = await this.conn.sdk((c) => c.getSimulation(s.id));
          for (const d of full.deviceIds ?? []) this.owner.set(d, s.id);
          this.sims.set(s.id, { ...full, observationsProduced: Math.max(full.observationsProduced, this.sims.get(s.id)?.observationsProduced ?? 0) });
        }),
      );
      this.render();
    } catch (err) {
      this.status.textContent = err instanceof ApiError ? `Simulations are not available: ${err.message}` : String(err);
    }
  }

  event(data: unknown): void {
    const s = (data as { status?: Simulation })?.status;
    if (!s || typeof s !== 'object' || !s.id) return;
    const before = this.sims.get(s.id);
    this.sims.set(s.id, s);
    this.render();
    if (before && before.status === 'backfilling' && s.status !== 'backfilling') {
      this.ctx.reloadDevices();
      this.ctx.reloadPlot();
    }
  }

  observations(deviceId: string, count: number): void {
    const s = this.sims.get(this.owner.get(deviceId) ?? '');
    if (!s || !live(s)) return;
    s.observationsProduced += count;
    if (this.renderQueued) return;
    this.renderQueued = true;
    requestAnimationFrame(() => {
      this.renderQueued = false;
      this.render();
    });
  }

  private render(): void {
    const sims = [...this.sims.values()].sort((a, b) => b.startedAt.localeCompare(a.startedAt));
    this.list.replaceChildren(
      ...sims.map((s) => {
        const bf = s.backfill;
        const label = s.name ?? `Simulation ${s.id.slice(0, 8)}`;
        const li = el(
          'li',
          { class: `sim ${s.status}`, 'data-id': s.id, 'data-status': s.status },
          el('div', { class: 'sim-head' }, el('strong', {}, label), el('span', { class: `badge ${s.status}` }, s.status)),
          el(
            'p',
            { class: 'muted' },
            `${s.devices} devices every ${msText(s.params.intervalMs)}` +
              (s.params.backfillMs ? `, ${msText(s.params.backfillMs)} of history` : '') +
              `; started ${fmtTime(Date.parse(s.startedAt))}` +
              (s.endsAt && live(s) ? `, ends ${fmtTime(Date.parse(s.endsAt))}` : ''),
          ),
          el('p', { class: 'sim-count' }, el('span', { class: 'produced' }, s.observationsProduced.toLocaleString()), ' observations produced'),
        );
        if (bf && bf.total > 0) {
          const pct = Math.round((100 * bf.done) / bf.total);
          const id = `bf-${s.id}`;
          li.append(
            el('label', { for: id }, `Backfill ${pct}% (${bf.done.toLocaleString()} of ${bf.total.toLocaleString()})`),
            el('progress', { id, class: 'progress', max: String(bf.total), value: String(bf.done) }),
          );
        }
        if (s.error) li.append(el('p', { class: 'error-text' }, s.error));
        if (live(s)) {
          const b = el('button', { type: 'button', class: 'stop', 'aria-label': `Stop ${label}` }, 'Stop');
          b.addEventListener('click', () => void this.stop(s.id));
          li.append(b);
        }
        return li;
      }),
    );
  }
}

export function mountPanels(conn: Connection, ctx: PanelContext): Panels {
  const simRoot = $('sim-panel');
  const kitRoot = $('devkit-panel');
  const sim = conn.solution === 'StudioSimulation' ? new SimulationPanel(simRoot, conn, ctx) : null;
  simRoot.hidden = !sim;
  const kit = new DevKitPanel(kitRoot, conn, ctx);
  const device = new DevicePanel($('device-panel'), conn, ctx);
  const alarms = new AlarmsPanel(
    conn,
    {
      selected: ctx.selected,
      unit: ctx.unit,
      message: ctx.message,
      changed: ctx.alarmsChanged,
      ...(ctx.fields ? { fields: ctx.fields } : {}),
      ...(ctx.field ? { field: ctx.field } : {}),
      ...(ctx.alarmsActive ? { active: ctx.alarmsActive } : {}),
    },
    document.getElementById('device-panel'),
  );
  return {
    update() {
      device.update();
      kit.update();
      alarms.update();
    },
    event(type, data) {
      if (type === 'simulation') sim?.event(data);
      else if (type === 'alarm' || type === 'alarm-rule') alarms.event(type);
      else kit.event();
    },
    observations(deviceId, count) {
      sim?.observations(deviceId, count);
    },
    destroy() {
      device.destroy();
      kit.destroy();
      alarms.destroy();
      simRoot.hidden = true;
      simRoot.replaceChildren();
    },
  };
}
