// The dev kit panel: a NICDevKit selected in sandbox, reached through the gateway's HTTP bridge
// (docs/coap.md): read the sensor now, set the kit's unit (°C/°F), start and stop a live observe
// (Server-Sent Events from the bridge), and the kit's clock (seed §4.4). On open it reads the kit's
// temperature, unit and clock; every action shows what the kit answered (its CoAP code and
// payload), and the unit confirmation is the kit's own `?cfg` answer ("<epoch>,<C|F>", docs/device.md).
// The kit's errors and deadlines are shown as the bridge words them.
import { deviceMac, NetworkError, type CoapResponse } from '../../src/sdk/index.ts';
import { ApiError, type Connection, type Device } from './api.ts';
import { addCollapse, el, firstSelected, fmtTime, isDevKit, shortId, zoneLabel } from './format.ts';
import type { PanelContext } from './panels.ts';

/** The bridge's JSON form of a kit's CoAP response (the fields the panel reads). */
export type KitResponse = Pick<CoapResponse, 'code' | 'contentFormat' | 'payload' | 'reading'> & Partial<Pick<CoapResponse, 'codeName' | 'payloadEncoding' | 'observe'>>;

const SENSOR = 'arduino/temp';
/**
 * How long the panel waits for the kit: past the gateway's own deadline (5 s) with room for the
 * network, far short of the SDK's default (35 s) — a dead kit is said to be so at once.
 */
const KIT_DEADLINE_MS = 10_000;

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

/** The unit in the kit's `GET ?cfg` answer, "<epoch>,<C|F>" (older firmware: just "C" or "F"). */
export function cfgUnit(r: KitResponse | undefined): 'C' | 'F' | null {
  const m = /(?:^|,)\s*°?([CF])\s*$/i.exec(r?.payload ?? '');
  return m ? (m[1]!.toUpperCase() as 'C' | 'F') : null;
}

/** "2.05 Content: 1764000000,21.50,C": what the kit answered, as a person can read it. */
export function answerText(r: KitResponse): string {
  const code = `${r.code}${r.codeName ? ` ${r.codeName}` : ''}`;
  if (r.payload === null || r.payload === undefined || r.payload === '') return `${code} (no payload)`;
  if (r.payloadEncoding !== 'base64') return `${code}: ${r.payload}`;
  // Binary payloads (the 4-byte clock, CBOR readings) as their bytes.
  const b = atob(r.payload);
  const hex = Array.from(b, (ch) => ch.charCodeAt(0).toString(16).padStart(2, '0')).join(' ');
  return `${code}: ${hex} (${b.length} bytes)`;
}

export class DevKitPanel {
  private device: Device | null = null;
  private observing: AbortController | null = null;
  /** The latest action: an older action's outcome does not overwrite a newer one's status. */
  private op = 0;
  private out!: { value: HTMLElement; when: HTMLElement; unit: HTMLElement; clock: HTMLElement; status: HTMLElement; answer: HTMLElement; log: HTMLOListElement; observe: HTMLButtonElement };

  constructor(
    private readonly root: HTMLElement,
    private readonly conn: Connection,
    private readonly ctx: PanelContext,
  ) {}

  /** Shows the panel for the first selected dev kit, hides it otherwise. */
  update(): void {
    const d = firstSelected(this.ctx);
    const kit = d && isDevKit(d) ? d : null;
    if (kit?.id === this.device?.id) return;
    this.stopObserve();
    this.device = kit;
    this.root.hidden = !kit;
    if (kit) {
      this.render(kit);
      void this.readAll();
    } else this.root.replaceChildren();
  }

  /** On open: the kit's temperature, unit and clock, one after the other (one kit, one request at a time). */
  private async readAll(): Promise<void> {
    const d = this.device;
    if (!d) return;
    const op = ++this.op;
    const steps: [string, string, (r: KitResponse) => void][] = [
      ['Reading the sensor', `${SENSOR}?sens`, (r) => this.showReading(r)],
      ["Reading the kit's unit", `${SENSOR}?cfg`, (r) => this.showCfg(r)],
      ["Reading the kit's clock", 'system/time', (r) => this.showClock(r)],
    ];
    for (const [what, resource, show] of steps) {
      // The user's own action takes over: its answers are not overwritten by the opening reads.
      if (this.device !== d || op !== this.op) return;
      const r = await this.run(what, () => this.kit('GET', resource), op);
      // An offline kit or a deadline: the next reads would fail the same way.
      if (r === undefined) return;
      if (this.device === d && op === this.op) show(r);
    }
    if (this.device === d && op === this.op) this.out.status.textContent = 'Read the kit: temperature, unit and clock.';
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
    const answer = el('p', { id: 'kit-answer', class: 'muted mono kit-answer', 'aria-live': 'polite' });
    this.out = { value, when, unit, clock, status, answer, log, observe };
    const mac = deviceMac(d) ?? '';
    this.root.replaceChildren(
      el('h2', { id: 'devkit-h' }, `Dev kit ${shortId(d.id)}`, el('span', { class: 'count mono' }, mac ? ` · ${mac}` : '')),
      el('dl', { class: 'kv' }, el('dt', {}, 'Temperature'), value, el('dt', {}, 'Read at'), when, el('dt', {}, 'Kit unit'), unit, el('dt', {}, 'Kit clock'), clock),
      el(
        'div',
        { class: 'row' },
        btn('Read now', () => void this.read(), { id: 'kit-read' }),
        btn('Kit unit °C', () => void this.setUnit('C'), { id: 'kit-set-c' }),
        btn('Kit unit °F', () => void this.setUnit('F'), { id: 'kit-set-f' }),
        btn('Read clock', () => void this.readClock(), { id: 'kit-clock-btn' }),
        observe,
      ),
      status,
      answer,
      log,
    );
    addCollapse(this.root);
  }

  private kit(method: 'GET' | 'PUT', resource: string): Promise<KitResponse> {
    const id = this.device!.id;
    const c = this.conn.client;
    const opts = { timeoutMs: KIT_DEADLINE_MS };
    return (method === 'GET' ? c.coapGet(id, resource, opts) : c.coapPut(id, resource, undefined, opts)).catch((e: unknown) => {
      if (e instanceof NetworkError && e.timedOut) throw new ApiError('device', `No answer from the kit within ${KIT_DEADLINE_MS / 1000} s: it may be offline or out of reach.`);
      throw this.conn.explain(e);
    });
  }

  /** The value shown is the last one the kit gave: after a failed read it is marked as such. */
  private markStale(stale: boolean): void {
    const { value, when } = this.out;
    value.classList.toggle('stale-value', stale);
    value.title = stale ? 'The last value the kit gave: it did not answer since' : '';
    when.dataset.stale = String(stale);
    const note = when.querySelector('.stale-note');
    if (stale && !note && value.textContent !== '—') when.append(el('span', { class: 'stale-note' }, ' (no answer since)'));
    if (!stale) note?.remove();
  }

  private async run<T>(what: string, fn: () => Promise<T>, op = ++this.op): Promise<T | undefined> {
    const { status } = this.out;
    const mine = () => op === this.op;
    if (mine()) {
      status.classList.remove('error-text');
      status.textContent = `${what}…`;
    }
    try {
      const r = await fn();
      if (mine()) status.textContent = '';
      return r;
    } catch (err) {
      if (mine()) {
        this.markStale(true);
        status.classList.add('error-text');
        status.textContent = `${what} failed: ${err instanceof ApiError ? err.message : String(err)}`;
      }
      return undefined;
    }
  }

  private kitAnswered(r: KitResponse): KitResponse {
    this.out.answer.textContent = `The kit answered ${answerText(r)}`;
    return r;
  }

  private showReading(r: KitResponse): KitResponse {
    this.kitAnswered(r);
    this.markStale(false);
    if (r.reading) {
      this.out.value.textContent = `${r.reading.value.toFixed(2)} °${r.reading.unit}`;
      this.out.unit.textContent = `°${r.reading.unit}`;
      this.out.when.textContent = `${fmtTime(r.reading.epoch * 1000)} ${zoneLabel(r.reading.epoch * 1000)}`;
    } else if (r.payload !== null) this.out.value.textContent = r.payload;
    return r;
  }

  private showCfg(r: KitResponse): KitResponse {
    this.kitAnswered(r);
    const u = cfgUnit(r);
    this.out.unit.textContent = u ? `°${u}` : (r.payload ?? '—');
    return r;
  }

  private showClock(r: KitResponse): KitResponse {
    this.kitAnswered(r);
    const epoch = r.reading?.epoch ?? clockEpoch(r);
    this.out.clock.textContent = epoch !== null ? `${fmtTime(epoch * 1000)} ${zoneLabel(epoch * 1000)} (epoch ${epoch})` : (r.payload ?? '—');
    return r;
  }

  async read(): Promise<void> {
    await this.run('Reading the sensor', async () => this.showReading(await this.kit('GET', `${SENSOR}?sens`)));
  }

  /** PUT ?cfg=U, then the kit's own ?cfg answer is what the panel shows (not what was asked). */
  async setUnit(u: 'C' | 'F'): Promise<void> {
    const op = ++this.op;
    const put = await this.run(`Setting the kit to °${u}`, () => this.kit('PUT', `${SENSOR}?cfg=${u}`), op);
    if (!put) return;
    this.kitAnswered(put);
    const cfg = await this.run('Reading the unit back', () => this.kit('GET', `${SENSOR}?cfg`), op);
    if (!cfg) return;
    this.showCfg(cfg);
    const now = cfgUnit(cfg);
    if (op !== this.op) return;
    const { status } = this.out;
    if (now === u) status.textContent = `The kit answered ${put.code}${put.codeName ? ` ${put.codeName}` : ''} and now reports in °${now} (its ?cfg reads “${cfg.payload}”).`;
    else {
      status.classList.add('error-text');
      status.textContent = `The kit answered ${put.code} but its ?cfg reads “${cfg.payload ?? ''}”: it reports in ${now ? `°${now}` : 'an unknown unit'}, not °${u}.`;
    }
  }

  async readClock(): Promise<void> {
    await this.run("Reading the kit's clock", async () => this.showClock(await this.kit('GET', 'system/time')));
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
