// The plot of one field (temperature by default): uPlot (fast on large series), one line per device, a min–max band when the
// data is bucketed. Drag to zoom, wheel to zoom around the pointer, Shift+drag to pan; the keyboard
// moves the read-out point by point (arrows), pans (Shift+arrows) and zooms (+/-).
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { fmtSpan, fmtTick, fmtTime, getZone, zoneLabel, sameDay, shortId } from './format.ts';
import { fmtValue, quantity, type Quantity } from './fields.ts';
import { alarmThresholds, drawAlarmOverlay } from './alarms.ts';
import { nearest, sampleGap, tipRow, withGaps, yTicks } from './plot-data.ts';

import { installPan, installPinch, wheelZoom } from './plot-gestures.ts';
export { stepDecimals, yTicks } from './plot-data.ts';

export const PALETTE = ['#127a8a', '#d2562a', '#6b4fbb', '#2f8f3a', '#c0398d', '#8a6d1f', '#2a62c9', '#6d7580'];

/** One device's data as stored (temperature in °C), oldest first; x in epoch seconds. */
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

export class PlotView {
  private u: uPlot | null = null;
  private series: Series[] = [];
  private q: Quantity = quantity('temperature', 'C');
  /** The time range asked for (seconds); slides with Live. */
  private window: [number, number] = [0, 1];
  /** Where the data starts when it is shorter than the window: the view is fitted to it. */
  private fitFrom: number | null = null;
  /** The range the user zoomed or panned to; null follows the window. */
  private userRange: [number, number] | null = null;
  /** True while the plot sets its own scale (building, following): not a user zoom. */
  private internal = false;
  private cursorT: number | null = null;
  private ro: ResizeObserver;
  /** A device's name (or short id) for the read-out and the tooltip. */
  labelFor: (id: string) => string = shortId;
  /** Called when what is visible changed (data, zoom, Live): the legend's figures follow. */
  onViewChange: () => void = () => {};
  /** The tooltip at the pointer (inside uPlot's drawing area). */
  private tip: HTMLElement = document.createElement('div');
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
    host.addEventListener(
      'wheel',
      (e) => {
        if (this.u && this.series.length) wheelZoom(this.u, e);
      },
      { passive: false },
    );
    installPinch(host, () => this.u);
  }

  private size(): { width: number; height: number } {
    const w = Math.max(280, this.host.clientWidth);
    // A phone's plot takes a good part of the screen's height (its width alone gives a strip).
    const tall = window.innerWidth <= 600 ? Math.round(window.innerHeight * 0.42) : Math.round(w * 0.5);
    return { width: w, height: Math.max(240, Math.min(440, tall)) };
  }

  /**
   * New data for the whole view; `window` is the time range asked for, in seconds. With `fit`,
   * a window much longer than the data (a kit started 10 minutes ago, a 24 h window) shows the
   * data instead of a sliver at the right edge, and says so.
   */
  set(series: Series[], window: [number, number], q: Quantity, fit = false): void {
    this.series = series;
    this.window = window;
    this.q = q;
    this.userRange = null;
    this.fitFrom = null;
    if (fit) {
      const first = Math.min(...series.filter((s) => s.x.length).map((s) => s.x[0]!));
      const span = window[1] - window[0];
      // Fitted when the data covers less than 90 % of the window: the view starts a little before it.
      if (Number.isFinite(first) && first > window[0] + span * 0.1) this.fitFrom = Math.max(window[0], first - Math.max(30, (window[1] - first) * 0.05));
    }
    delete this.info.dataset.detail;
    this.build();
  }

  setQuantity(q: Quantity): void {
    this.q = q;
    this.build(this.userRange);
  }

  /** Redraw (the time zone changed). */
  redraw(): void {
    this.build(this.userRange);
  }

  /** The y range: the data's, widened to the alarm thresholds drawn. */
  private yRange(min: number | null, max: number | null): uPlot.Range.MinMax {
    let lo = min ?? Infinity;
    let hi = max ?? -Infinity;
    for (const v of alarmThresholds(
      this.series.map((s) => s.deviceId),
      this.q,
    )) {
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    }
    if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [0, 1];
    return uPlot.rangeNum(lo, hi, 0.1, true);
  }

  /** The visible x range: what the user zoomed to, or the (fitted) window. */
  private view(): [number, number] {
    return this.userRange ?? [this.fitFrom ?? this.window[0], this.window[1]];
  }

  /** Live points of one device, appended; the window slides to `window` when given. */
  append(deviceId: string, points: { x: number; y: number | null }[], window?: [number, number]): void {
    const s = this.series.find((v) => v.deviceId === deviceId);
    if (!s || !points.length) return;
    this.push(s, points);
    if (window) this.slideTo(window);
    // A user's zoom stays where they put it; otherwise the view follows the sliding window.
    this.build(this.userRange);
  }

  /**
   * The window moves on with the clock even when no reading comes (a device that went quiet shows
   * its gap growing at the right edge); a user's zoom is left alone.
   */
  slide(window: [number, number]): void {
    if (!this.series.length || this.userRange) return;
    this.slideTo(window);
    this.build(null);
  }

  private push(s: Series, points: { x: number; y: number | null }[]): void {
    for (const p of points.sort((a, b) => a.x - b.x)) {
      if (s.x.length && p.x <= s.x[s.x.length - 1]!) continue;
      s.x.push(p.x);
      s.y.push(p.y);
      s.min?.push(p.y);
      s.max?.push(p.y);
      s.observations++;
    }
  }

  private slideTo(window: [number, number]): void {
    // The window slides (its right edge is now, and never before the newest reading).
    const newest = Math.max(...this.series.map((v) => v.x[v.x.length - 1] ?? -Infinity));
    const right = Math.max(window[1], newest);
    this.window = [right - (window[1] - window[0]), right];
    if (this.fitFrom !== null && this.fitFrom <= this.window[0]) this.fitFrom = null;
    for (const v of this.series) {
      let drop = 0;
      while (drop < v.x.length && v.x[drop]! < this.window[0]) drop++;
      if (drop) {
        v.x.splice(0, drop);
        v.y.splice(0, drop);
        v.min?.splice(0, drop);
        v.max?.splice(0, drop);
        v.observations = v.bucketed ? v.observations : v.x.length;
      }
    }
  }

  isZoomed(): boolean {
    return this.userRange !== null;
  }

  /** The visible x range in seconds (tests and the CSV export read it). */
  visible(): [number, number] {
    return this.view();
  }

  /** Shows [from, to] (seconds) as if the user had zoomed there: a zoom restored from the page's address. */
  zoomTo(range: [number, number]): void {
    if (!(range[1] > range[0])) return;
    this.userRange = range;
    this.build(range);
    this.onZoom(range);
  }

  resetZoom(): void {
    const had = this.userRange !== null;
    this.userRange = null;
    if (this.u) this.setScaleInternal(this.view());
    if (had) this.onZoom(null);
  }

  private setScaleInternal([min, max]: [number, number]): void {
    this.internal = true;
    try {
      this.u?.setScale('x', { min, max });
    } finally {
      this.internal = false;
    }
    this.exposeView();
  }

  /** The view, for tests and assistive tech: the visible range and the newest point. */
  private exposeView(): void {
    const [a, b] = this.view();
    this.info.dataset.xMin = String(Math.round(a));
    this.info.dataset.xMax = String(Math.round(b));
    const newest = Math.max(...this.series.map((v) => v.x[v.x.length - 1] ?? -Infinity));
    if (Number.isFinite(newest)) this.info.dataset.lastX = String(newest);
    else delete this.info.dataset.lastX;
    this.info.dataset.zoomed = String(this.userRange !== null);
    this.info.dataset.fitted = String(this.fitFrom !== null && this.userRange === null);
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
    this.build(this.userRange);
    this.info.dataset.detail = 'raw';
  }

  points(): number {
    return this.series.reduce((n, s) => n + s.x.length, 0);
  }

  private build(keep: [number, number] | null = null): void {
    const q = this.q;
    const conv = (v: number | null) => (v === null ? null : q.conv(v));
    const tables: uPlot.AlignedData[] = [];
    const opts: uPlot.Series[] = [{}];
    const bands: uPlot.Band[] = [];
    let idx = 1;
    let gaps = 0;
    this.series.forEach((s, i) => {
      const colour = PALETTE[i % PALETTE.length]!;
      const label = shortId(s.deviceId);
      if (s.bucketed) {
        const g = withGaps(s.x, [s.y.map(conv), (s.max ?? s.y).map(conv), (s.min ?? s.y).map(conv)]);
        gaps += g.gaps;
        tables.push([g.x, ...g.cols] as uPlot.AlignedData);
        opts.push({ label: `${label} avg`, stroke: colour, width: 1.5, points: { show: false } });
        opts.push({ label: `${label} max`, stroke: colour + '55', width: 0.5, points: { show: false } });
        opts.push({ label: `${label} min`, stroke: colour + '55', width: 0.5, points: { show: false } });
        bands.push({ series: [idx + 1, idx + 2], fill: colour + '26' });
        idx += 3;
      } else {
        const g = withGaps(s.x, [s.y.map(conv)]);
        gaps += g.gaps;
        tables.push([g.x, ...g.cols] as uPlot.AlignedData);
        opts.push({ label, stroke: colour, width: 1.5, points: { show: s.x.length < 200, size: 4 } });
        idx += 1;
      }
    });
    // A silence longer than three of a device's intervals is a gap in its line, not a straight line
    // across; the other devices' times (alignment of several series) are stepped over.
    const data: uPlot.AlignedData = tables.length === 0 ? [[], []] : tables.length === 1 ? tables[0]! : uPlot.join(tables, tables.map((t) => t.slice(1).map(() => 1)) as (0 | 1 | 2)[][]);
    this.host.dataset.gaps = String(gaps);
    if (!tables.length) opts.push({ label: 'none' });
    this.userRange = keep;
    const [wmin, wmax] = this.view();
    const axisLabel = `${q.name}${q.unit ? ` (${q.unit})` : ''}`;
    // The canvas gets the text colour itself: 'currentColor' is not resolved for the axis title
    // (near-black on the dark theme).
    const ink = getComputedStyle(this.host).color || '#1d2330';
    this.host.dataset.ink = ink;
    const host = this.host;
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
      // Tick positions follow the chosen zone (day boundaries in UTC or local).
      ...(getZone() === 'UTC' ? { tzDate: (ts: number) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC') } : {}),
      axes: [
        {
          stroke: ink,
          grid: { stroke: '#8884', width: 1 },
          ticks: { stroke: '#8884' },
          space: 70,
          // One format everywhere: ISO-like dates, 24 h times; the date where the day changes.
          values: (_u, splits, _i, _space, incr) => splits.map((v, i) => fmtTick(v * 1000, incr, i === 0 || !sameDay(splits[i - 1]! * 1000, v * 1000))),
        },
        {
          stroke: ink,
          label: axisLabel,
          grid: { stroke: '#8884', width: 1 },
          ticks: { stroke: '#8884' },
          values: (_u, splits) => {
            const labels = yTicks(splits);
            host.dataset.yTicks = labels.join(' ');
            host.dataset.yTickValues = splits.join(' ');
            return labels;
          },
        },
      ],
      hooks: {
        // Alarm thresholds and raised alarms (web/src/alarms.ts).
        draw: [
          (u) =>
            drawAlarmOverlay(
              u,
              this.q,
              this.series.map((s) => s.deviceId),
              host,
            ),
        ],
        setCursor: [(u) => this.cursorMoved(u)],
        setScale: [
          (u, key) => {
            if (key !== 'x' || this.internal) return;
            const { min, max } = u.scales.x!;
            if (min === undefined || max === undefined) return;
            // Only the user moves the scale outside build/follow: a zoom, a pan, a pinch.
            const [a, b] = [this.fitFrom ?? this.window[0], this.window[1]];
            const zoomed = Math.abs(min - a) > 1 || Math.abs(max - b) > 1;
            this.userRange = zoomed ? [min, max] : null;
            this.exposeView();
            this.caption();
            this.onZoom(this.userRange);
            this.onViewChange();
          },
        ],
      },
    };
    this.internal = true;
    try {
      this.u?.destroy();
      this.host.replaceChildren();
      this.u = new uPlot(config, data, this.host);
    } finally {
      this.internal = false;
    }
    installPan(this.u);
    const n = this.points();
    const obs = this.series.reduce((m, s) => m + s.observations, 0);
    this.info.dataset.points = String(n);
    this.info.dataset.observations = String(obs);
    this.info.dataset.bucketed = String(this.series.some((s) => s.bucketed));
    this.exposeView();
    let text: string;
    if (!this.series.length) text = 'Choose a device to plot.';
    else if (n === 0) text = 'No observations in this range.';
    else if (this.series.some((s) => s.bucketed)) text = `${n.toLocaleString('en')} buckets (min, average, max) of ${obs.toLocaleString('en')} observations`;
    else text = `${n.toLocaleString('en')} points`;
    this.baseCaption = text;
    this.caption();
    const names = this.series.map((s) => this.labelFor(s.deviceId)).join(', ');
    this.host.setAttribute(
      'aria-label',
      this.series.length
        ? `${q.name}${q.unit ? ` in ${q.unit}` : ''} of ${names}: ${text}. Left and right arrows read points, Shift+arrows pan, plus and minus zoom, Escape resets.`
        : `${q.name} plot: choose a device to plot.`,
    );
    this.tip.className = 'plot-tip';
    this.tip.hidden = true;
    this.tip.setAttribute('aria-hidden', 'true');
    this.u.over.append(this.tip);
    this.u.over.addEventListener('mouseleave', () => {
      this.tip.hidden = true;
    });
    this.showReadout();
    this.onViewChange();
  }

  private baseCaption = '';

  /** The caption under the plot: what is drawn, and which part of the range is shown (fitted, zoomed). */
  private caption(): void {
    let text = this.baseCaption;
    const n = this.points();
    if (this.userRange && n > 0) {
      const [a, b] = this.userRange;
      text += ` · zoomed: ${fmtTime(a * 1000)} to ${fmtTime(b * 1000)} ${zoneLabel(b * 1000)} (${fmtSpan(b - a)} of the ${fmtSpan(this.window[1] - this.window[0])} range)`;
    } else if (this.fitFrom !== null && n > 0) {
      text += ` · fitted to the data: ${fmtSpan(this.window[1] - this.fitFrom)} shown of the ${fmtSpan(this.window[1] - this.window[0])} range (the device has no older data)`;
    }
    if (this.info.textContent !== text) this.info.textContent = text;
  }

  /**
   * Last, min, max and average of each plotted device over the visible range (bucketed data: of the
   * buckets' min, max and average), in stored units; null where nothing is visible.
   */
  stats(): { deviceId: string; last: number | null; min: number | null; max: number | null; avg: number | null }[] {
    const [a, b] = this.view();
    return this.series.map((s) => {
      let last: number | null = null,
        lo = Infinity,
        hi = -Infinity,
        sum = 0,
        n = 0;
      for (let i = 0; i < s.x.length; i++) {
        const x = s.x[i]!;
        const y = s.y[i];
        if (x < a || x > b || y === null || y === undefined) continue;
        last = y;
        lo = Math.min(lo, s.min?.[i] ?? y);
        hi = Math.max(hi, s.max?.[i] ?? y);
        sum += y;
        n++;
      }
      return { deviceId: s.deviceId, last, min: n ? lo : null, max: n ? hi : null, avg: n ? sum / n : null };
    });
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
    u.setCursor({ left: u.valToPos(t, 'x'), top: y === null || y === undefined ? u.over.clientHeight / 2 : u.valToPos(this.q.conv(y), 'y') }, false);
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
    const rows: HTMLElement[] = [];
    let at: number | null = null;
    for (const [k, s] of this.series.entries()) {
      const i = nearest(s.x, t);
      if (i < 0) continue;
      // A series has a value here only within one of its sampling intervals of the pointer: a
      // device with no data near this time says so instead of showing a value hours away.
      if (Math.abs(s.x[i]! - t) > sampleGap(s.x)) {
        parts.push(`${this.labelFor(s.deviceId)}: no data`);
        rows.push(tipRow(PALETTE[k % PALETTE.length]!, this.labelFor(s.deviceId), 'no data'));
        continue;
      }
      at ??= s.x[i]!;
      let v = fmtValue(s.y[i], this.q, 2);
      if (s.bucketed && s.min && s.max) v += ` (min ${fmtValue(s.min[i], this.q)}, max ${fmtValue(s.max[i], this.q)})`;
      parts.push(`${this.labelFor(s.deviceId)}: ${v}`);
      rows.push(tipRow(PALETTE[k % PALETTE.length]!, this.labelFor(s.deviceId), v));
    }
    at ??= t;
    this.readout.textContent = `${fmtTime(at * 1000)} ${zoneLabel(at * 1000)} — ${parts.join('; ')}`;
    this.placeTip(at, rows);
  }

  /** The tooltip beside the pointer, flipped to stay inside the plot. */
  private placeTip(at: number, rows: HTMLElement[]): void {
    const u = this.u;
    const left = u?.cursor.left;
    if (!u || left === undefined || left < 0 || !rows.length) {
      this.tip.hidden = true;
      return;
    }
    const head = document.createElement('div');
    head.className = 'tip-time';
    head.textContent = `${fmtTime(at * 1000)} ${zoneLabel(at * 1000)}`;
    this.tip.replaceChildren(head, ...rows);
    this.tip.hidden = false;
    const w = u.over.clientWidth;
    const top = Math.max(0, Math.min(u.over.clientHeight - this.tip.offsetHeight, (u.cursor.top ?? 0) - this.tip.offsetHeight / 2));
    const x = left + 14 + this.tip.offsetWidth > w ? left - 14 - this.tip.offsetWidth : left + 14;
    this.tip.style.transform = `translate(${Math.max(0, x)}px, ${top}px)`;
  }
}
