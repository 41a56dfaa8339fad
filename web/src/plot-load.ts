// Loading the plot: the plotted devices' data for the range (raw or bucketed, web/src/series.ts),
// its legend, the zoom (a zoomed bucketed view fetched raw once narrow enough) and the CSV of what
// is in view.
import type { Connection, Device } from './api.ts';
import { downloadCsv } from './csv.ts';
import type { Quantity } from './fields.ts';
import { $, labelOf } from './format.ts';
import type { PlotView } from './plot.ts';
import { renderLegend } from './plot-legend.ts';
import { explain, showError } from './problems.ts';
import type { Range } from './range.ts';
import { fetchSeries, RAW_MAX_SECONDS } from './series.ts';

export interface PlotHost {
  conn(): Connection | null;
  selected(): string[];
  field(): string;
  range(): Range;
  rangeWindow(): [number, number];
  quantity(): Quantity;
  device(id: string): Device | undefined;
  /** The plotted view changed (the page's address names it). */
  changed(): void;
}

export class PlotLoader {
  /** The user's zoomed window, seconds; null when not zoomed. */
  zoom: [number, number] | null = null;
  private load: AbortController | null = null;
  private legendQueued = false;
  private refineTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly plot: PlotView,
    private readonly host: PlotHost,
  ) {
    plot.labelFor = (id) => labelOf(host.device(id), id);
    plot.onViewChange = () => {
      if (this.legendQueued) return;
      this.legendQueued = true;
      requestAnimationFrame(() => {
        this.legendQueued = false;
        if ($('plot-info').dataset.state === 'ready') this.legend(host.selected().filter((id) => plot.stats().some((x) => x.deviceId === id)));
      });
    };
    plot.onZoom = (range) => this.zoomed(range);
    $('reset-zoom').addEventListener('click', () => plot.resetZoom());
    $('csv').addEventListener('click', () => void this.csv());
  }

  /** Stops a load under way (the solution is left). */
  abort(): void {
    this.load?.abort();
  }

  /** Loads the plotted devices' data for the range; `keepZoom` (Live resumed, stream back) keeps a user's zoom. */
  async reload(keepZoom = false): Promise<void> {
    const { host, plot } = this;
    const conn = host.conn();
    if (!conn) return;
    this.load?.abort();
    const ac = new AbortController();
    this.load = ac;
    const ids = [...host.selected()];
    const [from, to] = host.rangeWindow();
    const zoom = keepZoom ? this.zoom : null;
    this.zoom = null;
    $('reset-zoom').hidden = true;
    host.changed();
    $('plot-title').textContent = ids.length ? `— ${ids.map((id) => labelOf(host.device(id), id)).join(', ')}` : '';
    const info = $('plot-info');
    info.setAttribute('aria-busy', 'true');
    info.dataset.state = 'loading';
    const field = host.field();
    try {
      const series = await fetchSeries(conn, ids, from, to, field, ac.signal);
      if (ac.signal.aborted) return;
      // A preset range shorter than the data fits the data; a custom range is shown as asked.
      plot.set(series, [from, to], host.quantity(), 'preset' in host.range());
      info.dataset.state = 'ready';
      info.dataset.devices = ids.join(',');
      info.dataset.field = field;
      showError($('plot-error'), '');
      this.legend(ids);
      if (zoom) plot.zoomTo(zoom);
    } catch (err) {
      if ((err as Error).name === 'AbortError') return;
      info.dataset.state = 'error';
      showError($('plot-error'), `The plot could not be loaded: ${explain(err)}`);
    } finally {
      if (this.load === ac) info.removeAttribute('aria-busy');
    }
  }

  /** The plot's legend (web/src/plot-legend.ts) for these devices. */
  private legend(ids: string[]): void {
    const { host } = this;
    renderLegend($('plot-legend'), ids, this.plot.stats(), host.quantity(), (id) => ({ label: labelOf(host.device(id), id), type: host.device(id)?.deviceType ?? '' }));
  }

  // When the user zooms into a bucketed view far enough, the zoomed window is fetched raw.
  private zoomed(range: [number, number] | null): void {
    this.zoom = range;
    $('reset-zoom').hidden = !range;
    this.host.changed();
    clearTimeout(this.refineTimer);
    if (!range || $('plot-info').dataset.bucketed !== 'true') return;
    const [a, b] = range;
    if (b - a > RAW_MAX_SECONDS) return;
    this.refineTimer = setTimeout(async () => {
      const conn = this.host.conn();
      if (!conn) return;
      const ac = new AbortController();
      try {
        const detail = await fetchSeries(conn, this.host.selected(), a, b, this.host.field(), ac.signal);
        if (this.zoom && this.zoom[0] === a && this.zoom[1] === b) this.plot.refine(detail, [a, b]);
      } catch (err) {
        showError($('plot-error'), `The detail could not be loaded: ${explain(err)}`);
      }
    }, 250);
  }

  private async csv(): Promise<void> {
    const conn = this.host.conn();
    const selected = this.host.selected();
    const err = $('plot-error');
    if (!conn || !selected.length) {
      showError(err, 'Choose a device to download its observations.');
      return;
    }
    const [a, b] = this.zoom ?? this.host.rangeWindow();
    const btn = $('csv') as HTMLButtonElement;
    btn.disabled = true;
    try {
      await downloadCsv(conn, selected, new Date(a * 1000), new Date(b * 1000 + 1), this.host.field());
      showError(err, '');
    } catch (e) {
      showError(err, `The CSV could not be made: ${explain(e)}`);
    } finally {
      btn.disabled = false;
    }
  }
}
