// The temperature plot: uPlot (fast on large series), one line per device, a min–max band when the
// data is bucketed. Drag to zoom, wheel to zoom around the pointer, Shift+drag to pan; the keyboard
// moves the read-out point by point (arrows), pans (Shift+arrows) and zooms (+/-).
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { fmtTemp, fmtTime, shortId, toUnit, type Unit } from './format.ts';
import { alarmThresholds, drawAlarmOverlay } from './alarms.ts';

export const PALETTE = ['#127a8a', '#d2562a', '#6b4fbb', '#2f8f3a', '#c0398d', '#8a6d1f', '#2a62c9', '#6d7580'];

/** One device's data in °C, oldest first; x in epoch seconds. */
export interface Series {
  deviceId: string;
  bucketed: boolean;
  x: number[];
  y: (number | null)[];
  min?: (number | null)[];
  max?: (number | null)[];
  /** Observations the points stand for (the sum of bucket counts when bucketed). */
  observations: number;
}

function nearest(xs: number[], t: number): number {
  let lo = 0, hi = xs.length - 1;
  if (hi < 0) return -1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! < t) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && Math.abs(xs[lo - 1]! - t) <= Math.abs(xs[lo]! - t)) return lo - 1;
  return lo;
}

export class PlotView {
  private u: uPlot | null = null;
  private series: Series[] = [];
  private unit: Unit = 'C';
  private window: [number, number] = [0, 1];
  private cursorT: number | null = null;
  private ro: ResizeObserver;
  /** Called with the visible [from, to] in seconds after the user zooms or pans; null when reset. */
  onZoom: (range: [number, number] | null) => void = () => {};

  constructor(
    private readonly host: HTMLElement,
    private readonly info: HTMLElement,
    private readonly readout: HTMLElement,
  ) {
    this.ro = new ResizeObserver(() => this.u?.setSize(this.size()));
    this.ro.observe(host);
    host.addEventListener('keydown', (e) => this.key(e));
    host.addEventListener('wheel', (e) => this.wheel(e), { passive: false });
  }

  private size(): { width: number; height: number } {
    const w = Math.max(280, this.host.clientWidth);
    return { width: w, height: Math.max(220, Math.min(420, Math.round(w * 0.5))) };
  }

  /** New data for the whole view; `window` is the time range asked for, in seconds. */
  set(series: Series[], window: [number, number], unit: Unit): void {
    this.series = series;
    this.window = window;
    this.unit = unit;
    delete this.info.dataset.detail;
    this.build();
  }

  setUnit(unit: Unit): void {
    this.unit = unit;
    const keep = this.u ? ([this.u.scales.x!.min!, this.u.scales.x!.max!] as [number, number]) : null;
    this.build(keep);
  }

  /** Live points of one device, appended; the window slides to `window` when given. */
  append(deviceId: string, points: { x: number; y: number | null }[], window?: [number, number]): void {
    const s = this.series.find((v) => v.deviceId === deviceId);
    if (!s || !points.length) return;
    for (const p of points.sort((a, b) => a.x - b.x)) {
      if (s.x.length && p.x <= s.x[s.x.length - 1]!) continue;
      s.x.push(p.x);
      s.y.push(p.y);
      s.min?.push(p.y);
      s.max?.push(p.y);
      s.observations++;
    }
    if (window) {
      this.window = window;
      for (const v of this.series) {
        let drop = 0;
        while (drop < v.x.length && v.x[drop]! < window[0]) drop++;
        if (drop) {
          v.x.splice(0, drop);
          v.y.splice(0, drop);
          v.min?.splice(0, drop);
          v.max?.splice(0, drop);
          v.observations = v.bucketed ? v.observations : v.x.length;
        }
      }
    }
    const zoomed = this.isZoomed();
    const keep = zoomed && this.u ? ([this.u.scales.x!.min!, this.u.scales.x!.max!] as [number, number]) : null;
    this.build(keep);
  }

  isZoomed(): boolean {
    if (!this.u) return false;
    const { min, max } = this.u.scales.x!;
    return min !== undefined && max !== undefined && (min > this.window[0] + 1 || max < this.window[1] - 1);
  }

  resetZoom(): void {
    this.u?.setScale('x', { min: this.window[0], max: this.window[1] });
  }

  /** Replace one device's data inside the zoomed window with finer data (raw within buckets). */
  refine(detail: Series[], range: [number, number]): void {
    for (const d of detail) {
      const s = this.series.find((v) => v.deviceId === d.deviceId);
      if (!s) continue;
      const before = s.x.findIndex((t) => t >= range[0]);
      const a = before < 0 ? s.x.length : before;
      let b = a;
      while (b < s.x.length && s.x[b]! < range[1]) b++;
      s.x.splice(a, b - a, ...d.x);
      s.y.splice(a, b - a, ...d.y);
      s.min?.splice(a, b - a, ...(d.min ?? d.y));
      s.max?.splice(a, b - a, ...(d.max ?? d.y));
    }
    this.build(range);
    this.info.dataset.detail = 'raw';
  }

  /** Draws again without new data (alarm thresholds changed): the y range follows them. */
  redraw(): void {
    const u = this.u;
    if (!u) return;
    let lo = Infinity;
    let hi = -Infinity;
    for (let i = 1; i < u.data.length; i++) {
      for (const v of u.data[i]!) {
        if (v === null || v === undefined) continue;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
    const [min, max] = this.yRange(Number.isFinite(lo) ? lo : null, Number.isFinite(hi) ? hi : null);
    u.setScale('y', { min: min ?? 0, max: max ?? 1 });
  }

  private yRange(min: number | null, max: number | null): uPlot.Range.MinMax {
    const t = alarmThresholds(this.series.map((s) => s.deviceId), this.unit);
    let lo = min ?? Infinity;
    let hi = max ?? -Infinity;
    for (const v of t) {
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    }
    if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [0, 1];
    return uPlot.rangeNum(lo, hi, 0.1, true);
  }

  points(): number {
    return this.series.reduce((n, s) => n + s.x.length, 0);
  }

  private build(keep: [number, number] | null = null): void {
    const unit = this.unit;
    const conv = (v: number | null) => (v === null ? null : toUnit(v, unit));
    const tables: uPlot.AlignedData[] = [];
    const opts: uPlot.Series[] = [{}];
    const bands: uPlot.Band[] = [];
    let idx = 1;
    this.series.forEach((s, i) => {
      const colour = PALETTE[i % PALETTE.length]!;
      const label = shortId(s.deviceId);
      if (s.bucketed) {
        tables.push([s.x, s.y.map(conv), (s.max ?? s.y).map(conv), (s.min ?? s.y).map(conv)] as uPlot.AlignedData);
        opts.push({ label: `${label} avg`, stroke: colour, width: 1.5, spanGaps: this.series.length > 1, points: { show: false } });
        opts.push({ label: `${label} max`, stroke: colour + '55', width: 0.5, spanGaps: this.series.length > 1, points: { show: false } });
        opts.push({ label: `${label} min`, stroke: colour + '55', width: 0.5, spanGaps: this.series.length > 1, points: { show: false } });
        bands.push({ series: [idx + 1, idx + 2], fill: colour + '26' });
        idx += 3;
      } else {
        tables.push([s.x, s.y.map(conv)] as uPlot.AlignedData);
        opts.push({ label, stroke: colour, width: 1.5, spanGaps: this.series.length > 1, points: { show: s.x.length < 200, size: 4 } });
        idx += 1;
      }
    });
    const data: uPlot.AlignedData = tables.length === 0 ? [[], []] : tables.length === 1 ? tables[0]! : uPlot.join(tables);
    if (!tables.length) opts.push({ label: 'none' });
    const [wmin, wmax] = keep ?? this.window;
    const config: uPlot.Options = {
      ...this.size(),
      series: opts,
      bands,
      legend: { show: false },
      cursor: { drag: { x: true, y: false, setScale: true }, focus: { prox: 30 } },
      // auto: false keeps the asked-for window (not the data's extent); zoom and pan set it.
      scales: {
        x: { time: true, auto: false, min: wmin, max: wmax },
        // Alarm thresholds of the plotted devices stay in view (web/src/alarms.ts).
        y: { range: (_u, min, max) => this.yRange(min, max) },
      },
      axes: [
        { stroke: 'currentColor', grid: { stroke: '#8884', width: 1 }, ticks: { stroke: '#8884' } },
        { stroke: 'currentColor', label: `Temperature (°${unit})`, grid: { stroke: '#8884', width: 1 }, ticks: { stroke: '#8884' }, values: (_u, v) => v.map((x) => x.toFixed(1)) },
      ],
      hooks: {
        // Alarm thresholds and raised alarms (web/src/alarms.ts).
        draw: [(u) => drawAlarmOverlay(u, this.unit, this.series.map((s) => s.deviceId), this.host)],
        setCursor: [(u) => this.cursorMoved(u)],
        setScale: [(u, key) => {
          if (key !== 'x') return;
          const { min, max } = u.scales.x!;
          if (min === undefined || max === undefined) return;
          const zoomed = min > this.window[0] + 1 || max < this.window[1] - 1;
          this.onZoom(zoomed ? [min, max] : null);
        }],
      },
    };
    this.u?.destroy();
    this.host.replaceChildren();
    this.u = new uPlot(config, data, this.host);
    this.installPan(this.u);
    const n = this.points();
    const obs = this.series.reduce((m, s) => m + s.observations, 0);
    this.info.dataset.points = String(n);
    this.info.dataset.observations = String(obs);
    this.info.dataset.bucketed = String(this.series.some((s) => s.bucketed));
    if (!this.series.length) this.info.textContent = 'Choose a device to plot.';
    else if (n === 0) this.info.textContent = 'No observations in this range.';
    else if (this.series.some((s) => s.bucketed)) this.info.textContent = `${n.toLocaleString()} buckets (min, average, max) of ${obs.toLocaleString()} observations`;
    else this.info.textContent = `${n.toLocaleString()} points`;
    const names = this.series.map((s) => shortId(s.deviceId)).join(', ');
    this.host.setAttribute('aria-label', this.series.length
      ? `Temperature in °${unit} of ${names}: ${this.info.textContent}. Left and right arrows read points, Shift+arrows pan, plus and minus zoom, Escape resets.`
      : 'Temperature plot: choose a device to plot.');
    this.showReadout();
  }

  private installPan(u: uPlot): void {
    u.over.addEventListener('mousedown', (e) => {
      if (!e.shiftKey) return;
      e.stopPropagation();
      e.preventDefault();
      const x0 = e.clientX;
      const { min, max } = u.scales.x as { min: number; max: number };
      const perPx = (max - min) / u.over.clientWidth;
      const move = (m: MouseEvent) => {
        const dt = (m.clientX - x0) * perPx;
        u.setScale('x', { min: min - dt, max: max - dt });
      };
      const up = () => {
        window.removeEventListener('mousemove', move);
        window.removeEventListener('mouseup', up);
      };
      window.addEventListener('mousemove', move);
      window.addEventListener('mouseup', up);
    }, true);
  }

  private wheel(e: WheelEvent): void {
    const u = this.u;
    if (!u || !this.series.length) return;
    e.preventDefault();
    const { min, max } = u.scales.x as { min: number; max: number };
    const rect = u.over.getBoundingClientRect();
    const frac = Math.min(1, Math.max(0, (e.clientX - rect.left) / rect.width));
    const at = min + (max - min) * frac;
    const f = e.deltaY > 0 ? 1.25 : 0.8;
    const span = Math.max(10, (max - min) * f);
    u.setScale('x', { min: at - span * frac, max: at + span * (1 - frac) });
  }

  private key(e: KeyboardEvent): void {
    const u = this.u;
    const s = this.series[0];
    if (!u || !s || !s.x.length) return;
    const { min, max } = u.scales.x as { min: number; max: number };
    const span = max - min;
    let i = this.cursorT === null ? -1 : nearest(s.x, this.cursorT);
    switch (e.key) {
      case 'ArrowLeft':
      case 'ArrowRight': {
        if (e.shiftKey) {
          const dt = (e.key === 'ArrowLeft' ? -0.2 : 0.2) * span;
          u.setScale('x', { min: min + dt, max: max + dt });
          break;
        }
        if (i < 0) i = nearest(s.x, (min + max) / 2);
        else i = Math.min(s.x.length - 1, Math.max(0, i + (e.key === 'ArrowLeft' ? -1 : 1)));
        this.moveTo(s.x[i]!);
        break;
      }
      case 'Home':
        this.moveTo(s.x[nearest(s.x, min)]!);
        break;
      case 'End':
        this.moveTo(s.x[nearest(s.x, max)]!);
        break;
      case '+':
      case '=':
      case '-': {
        const mid = this.cursorT ?? (min + max) / 2;
        const half = (span * (e.key === '-' ? 1.25 : 0.8)) / 2;
        u.setScale('x', { min: mid - half, max: mid + half });
        break;
      }
      case 'Escape':
        this.resetZoom();
        break;
      default:
        return;
    }
    e.preventDefault();
  }

  /** Put the read-out on time t (seconds); the cursor follows when t is in view. */
  moveTo(t: number): void {
    const u = this.u;
    if (!u) return;
    const { min, max } = u.scales.x as { min: number; max: number };
    if (t < min || t > max) {
      const half = (max - min) / 2;
      u.setScale('x', { min: t - half, max: t + half });
    }
    this.cursorT = t;
    const s = this.series[0]!;
    const i = nearest(s.x, t);
    const y = s.y[i];
    u.setCursor({ left: u.valToPos(t, 'x'), top: y === null || y === undefined ? u.over.clientHeight / 2 : u.valToPos(toUnit(y, this.unit), 'y') }, false);
    this.showReadout();
  }

  private cursorMoved(u: uPlot): void {
    const left = u.cursor.left;
    if (left === undefined || left < 0) return;
    this.cursorT = u.posToVal(left, 'x');
    this.showReadout();
  }

  private showReadout(): void {
    const t = this.cursorT;
    if (t === null || !this.series.length) {
      this.readout.textContent = '';
      return;
    }
    const parts: string[] = [];
    let at: number | null = null;
    for (const s of this.series) {
      const i = nearest(s.x, t);
      if (i < 0) continue;
      at ??= s.x[i]!;
      let v = fmtTemp(s.y[i], this.unit, 2);
      if (s.bucketed && s.min && s.max) v += ` (min ${fmtTemp(s.min[i], this.unit, 1)}, max ${fmtTemp(s.max[i], this.unit, 1)})`;
      parts.push(`${shortId(s.deviceId)}: ${v}`);
    }
    this.readout.textContent = at === null ? '' : `${fmtTime(at * 1000)} — ${parts.join('; ')}`;
  }
}
