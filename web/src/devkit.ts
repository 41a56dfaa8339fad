// The dev kit panel: a NICDevKit selected in sandbox, reached through the gateway's HTTP bridge
// (docs/coap.md): read the sensor now, set the kit's unit (°C/°F), start and stop a live observe
// (Server-Sent Events from the bridge), and the kit's clock (seed §4.4). The kit's errors and
// deadlines are shown as the bridge words them.
import { deviceMac, type CoapResponse } from '../../src/sdk/index.ts';
import { ApiError, type Connection, type Device } from './api.ts';
import { el, fmtTime, isDevKit, shortId } from './format.ts';
import type { PanelContext } from './panels.ts';

/** The bridge's JSON form of a kit's CoAP response (the fields the panel reads). */
export type KitResponse = Pick<CoapResponse, 'code' | 'contentFormat' | 'payload' | 'reading'> & Partial<Pick<CoapResponse, 'codeName' | 'payloadEncoding' | 'observe'>>;

const SENSOR = 'arduino/temp';

/** The kit's clock: a 4-byte big-endian epoch (content-format 42) or decimal text (docs/coap.md). */
export function clockEpoch(r: KitResponse): number | null {
  if (!r.payload) return null;
  if (r.payloadEncoding === 'base64') {
    const b = atob(r.payload);
    if (b.length < 1 || b.length > 6) return null;
    let v = 0;
    for (let i = 0; i < b.length; i++) v = v * 256 + b.charCodeAt(i);
    return v;
  }
  const t = r.payload.trim();
  return /^\d+$/.test(t) ? Number(t) : null;
}

export class DevKitPanel {
  private device: Device | null = null;
  private observing: AbortController | null = null;
  private out!: { value: HTMLElement; when: HTMLElement; unit: HTMLElement; clock: HTMLElement; status: HTMLElement; log: HTMLOListElement; observe: HTMLButtonElement };

  constructor(private readonly root: HTMLElement, private readonly conn: Connection, private readonly ctx: PanelContext) {}

  /** Shows the panel for the first selected dev kit, hides it otherwise. */
  update(): void {
    const sel = this.ctx.selected()[0];
    const d = this.ctx.devices().find((x) => x.id === sel) ?? null;
    const kit = d && isDevKit(d) ? d : null;
    if (kit?.id === this.device?.id) return;
    this.stopObserve();
    this.device = kit;
    this.root.hidden = !kit;
    if (kit) this.render(kit);
    else this.root.replaceChildren();
  }

  event(): void {}

  destroy(): void {
    this.stopObserve();
    this.device = null;
    this.root.hidden = true;
    this.root.replaceChildren();
  }

  private render(d: Device): void {
    const btn = (label: string, fn: () => void, attrs: Record<string, string> = {}) => {
      const b = el('button', { type: 'button', ...attrs }, label);
      b.addEventListener('click', fn);
      return b;
    };
    const value = el('dd', { class: 'big', id: 'kit-value' }, '—');
    const when = el('dd', { id: 'kit-when' }, '—');
    const unit = el('dd', { id: 'kit-unit' }, '—');
    const clock = el('dd', { id: 'kit-clock' }, '—');
    const status = el('p', { id: 'kit-status', role: 'status', 'aria-live': 'polite', class: 'kit-status' });
    const log = el('ol', { class: 'log', 'aria-label': 'Observed readings', reversed: '' });
    const observe = btn('Start observing', () => (this.observing ? this.stopObserve() : void this.startObserve()), { 'aria-pressed': 'false', id: 'kit-observe' });
    this.out = { value, when, unit, clock, status, log, observe };
    const mac = deviceMac(d) ?? '';
    this.root.replaceChildren(
      el('h2', { id: 'devkit-h' }, `Dev kit ${shortId(d.id)}`, el('span', { class: 'count mono' }, mac ? ` · ${mac}` : '')),
      el('dl', { class: 'kv' }, el('dt', {}, 'Temperature'), value, el('dt', {}, 'Read at'), when, el('dt', {}, 'Kit unit'), unit, el('dt', {}, 'Kit clock'), clock),
      el('div', { class: 'row' },
        btn('Read now', () => void this.read(), { id: 'kit-read' }),
        btn('Kit unit °C', () => void this.setUnit('C'), { id: 'kit-set-c' }),
        btn('Kit unit °F', () => void this.setUnit('F'), { id: 'kit-set-f' }),
        btn('Read clock', () => void this.readClock(), { id: 'kit-clock-btn' }),
        observe,
      ),
      status,
      log,
    );
  }

  private kit(method: 'GET' | 'PUT', resource: string): Promise<KitResponse> {
    const id = this.device!.id;
    return this.conn.sdk((c) => (method === 'GET' ? c.coapGet(id, resource) : c.coapPut(id, resource)));
  }

  private async run<T>(what: string, fn: () => Promise<T>): Promise<T | undefined> {
    const { status } = this.out;
    status.classList.remove('error-text');
    status.textContent = `${what}…`;
    try {
      const r = await fn();
      status.textContent = '';
      return r;
    } catch (err) {
      status.classList.add('error-text');
      status.textContent = `${what} failed: ${err instanceof ApiError ? err.message : String(err)}`;
      return undefined;
    }
  }

  private showReading(r: KitResponse): void {
    if (r.reading) {
      this.out.value.textContent = `${r.reading.value.toFixed(2)} °${r.reading.unit}`;
      this.out.unit.textContent = `°${r.reading.unit}`;
      this.out.when.textContent = fmtTime(r.reading.epoch * 1000);
    } else if (r.payload !== null) this.out.value.textContent = r.payload;
  }

  async read(): Promise<void> {
    const r = await this.run('Reading the sensor', () => this.kit('GET', `${SENSOR}?sens`));
    if (r) this.showReading(r);
  }

  async setUnit(u: 'C' | 'F'): Promise<void> {
    const r = await this.run(`Setting the kit to °${u}`, () => this.kit('PUT', `${SENSOR}?cfg=${u}`));
    if (!r) return;
    const cfg = await this.run('Reading the unit', () => this.kit('GET', `${SENSOR}?cfg`));
    const shown = (cfg?.payload ?? '').trim().toUpperCase().replace(/^°/, '');
    this.out.unit.textContent = shown === 'C' || shown === 'F' ? `°${shown}` : `°${u}`;
    this.out.status.textContent = `The kit now reports in °${u}.`;
  }

  async readClock(): Promise<void> {
    const r = await this.run("Reading the kit's clock", () => this.kit('GET', 'system/time'));
    if (!r) return;
    const epoch = r.reading?.epoch ?? clockEpoch(r);
    this.out.clock.textContent = epoch !== null ? `${fmtTime(epoch * 1000)} (epoch ${epoch})` : r.payload ?? '—';
  }

  private async startObserve(): Promise<void> {
    if (!this.device) return;
    const ac = new AbortController();
    this.observing = ac;
    this.out.observe.textContent = 'Stop observing';
    this.out.observe.setAttribute('aria-pressed', 'true');
    this.out.status.classList.remove('error-text');
    this.out.status.textContent = 'Observing: readings appear as the kit sends them.';
    try {
      let ended: string | null = null;
      const stream = this.conn.client.coapObserve(this.device.id, `${SENSOR}?sens`, { signal: ac.signal, onEnd: (reason) => (ended = reason) });
      for await (const r of stream) {
        this.showReading(r);
        if (r.reading) {
          this.out.log.prepend(el('li', {}, `${fmtTime(r.reading.epoch * 1000)}  ${r.reading.value.toFixed(2)} °${r.reading.unit}`));
          while (this.out.log.children.length > 50) this.out.log.lastElementChild!.remove();
        }
      }
      if (ended !== null && ended !== 'stopped') {
        this.out.status.classList.add('error-text');
        this.out.status.textContent = `Observing ended: ${ended}`;
      }
    } catch (err) {
      if (!ac.signal.aborted) {
        this.out.status.classList.add('error-text');
        const e = this.conn.explain(err);
        this.out.status.textContent = `Observing failed: ${(e as Error).message}`;
      }
    } finally {
      if (this.observing === ac) this.resetObserve();
    }
  }

  private resetObserve(): void {
    this.observing = null;
    if (!this.out) return;
    this.out.observe.textContent = 'Start observing';
    this.out.observe.setAttribute('aria-pressed', 'false');
  }

  stopObserve(): void {
    if (!this.observing) return;
    this.observing.abort();
    this.resetObserve();
    if (this.out) this.out.status.textContent = 'Stopped observing.';
  }
}
