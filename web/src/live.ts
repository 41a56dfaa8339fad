// The plot's Live switch: readings from the event stream are appended to the plotted devices'
// lines, a preset window moves on with the clock, and Live switched on again fetches what came
// while it was off (the hole is filled, not drawn across).
import type { Observation } from './api.ts';
import { valueAt } from './fields.ts';
import { $ } from './format.ts';
import type { PlotView } from './plot.ts';
import { PRESET_SECONDS, type Range } from './range.ts';

export interface LiveHost {
  plot: PlotView;
  selected(): string[];
  field(): string;
  range(): Range;
  rangeWindow(): [number, number];
  /** Loads the plot again, keeping the user's zoom. */
  reload(): void;
  /** The Live switch changed (the page's address names it). */
  changed(): void;
}

export class Live {
  readonly box = $('live') as HTMLInputElement;
  private lastSlide = 0;

  constructor(private readonly host: LiveHost) {
    this.box.addEventListener('change', () => {
      host.changed();
      if (this.box.checked) host.reload();
    });
  }

  get on(): boolean {
    return this.box.checked;
  }

  /** Readings of one device from the stream, drawn when the device is plotted and Live is on. */
  observations(deviceId: string, obs: Observation[]): void {
    const { plot } = this.host;
    if (!this.box.checked || !this.host.selected().includes(deviceId)) return;
    const info = $('plot-info');
    if (info.dataset.state !== 'ready' || !info.dataset.devices?.split(',').includes(deviceId)) return;
    const field = this.host.field();
    const points = obs.map((o) => ({ x: Date.parse(o.timestamp) / 1000, y: valueAt(o, field) })).filter((p) => Number.isFinite(p.x));
    if ('preset' in this.host.range()) plot.append(deviceId, points, this.host.rangeWindow());
    else {
      const [a, b] = this.host.rangeWindow();
      const inside = points.filter((p) => p.x >= a && p.x <= b);
      if (inside.length) plot.append(deviceId, inside);
    }
  }

  /** Called every second: a preset window moves on with the clock about every 1/600 of its span (6 s for 1 h). */
  tick(now: number): void {
    const range = this.host.range();
    if (!('preset' in range) || !this.box.checked || $('plot-info').dataset.state !== 'ready') return;
    const span = PRESET_SECONDS[range.preset];
    if (now - this.lastSlide >= Math.max(1000, (span * 1000) / 600)) {
      this.lastSlide = now;
      this.host.plot.slide(this.host.rangeWindow());
    }
  }
}
