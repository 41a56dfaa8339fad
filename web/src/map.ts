// An offline map of the virtual devices' locations: an SVG with a graticule, no tile server. The
// view is an equirectangular projection of the devices' bounding box (longitude scaled by the
// cosine of the middle latitude so distances look right); points are coloured by latest temperature.
import type { Device } from './api.ts';
import { fmtTemp, shortId, tempColour, type Unit } from './format.ts';
import type { Latest } from './table.ts';

const NS = 'http://www.w3.org/2000/svg';
const W = 600;
const H = 360;
const PAD = 28;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

function niceStep(span: number): number {
  const raw = span / 5;
  const p = 10 ** Math.floor(Math.log10(raw || 1e-6));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

export class DeviceMap {
  private points = new Map<string, SVGCircleElement>();
  private root: SVGSVGElement | null = null;

  constructor(
    private readonly host: HTMLElement,
    private readonly figure: HTMLElement,
    private readonly legend: HTMLElement,
    private readonly ctx: { latest: Map<string, Latest>; selected: () => string[]; unit: () => Unit; select: (id: string, mode: 'only' | 'toggle') => void },
  ) {}

  setDevices(devices: Device[]): void {
    const located = devices.filter((d) => d.domainInfo?.location && Number.isFinite(d.domainInfo.location.latitude) && Number.isFinite(d.domainInfo.location.longitude));
    this.figure.hidden = located.length === 0;
    this.points.clear();
    if (!located.length) {
      this.host.replaceChildren();
      return;
    }
    const lats = located.map((d) => d.domainInfo!.location!.latitude);
    const lons = located.map((d) => d.domainInfo!.location!.longitude);
    let [la0, la1, lo0, lo1] = [Math.min(...lats), Math.max(...lats), Math.min(...lons), Math.max(...lons)];
    // A single point (or a line) still gets an area around it.
    const minSpan = 0.01;
    if (la1 - la0 < minSpan) [la0, la1] = [(la0 + la1) / 2 - minSpan / 2, (la0 + la1) / 2 + minSpan / 2];
    if (lo1 - lo0 < minSpan) [lo0, lo1] = [(lo0 + lo1) / 2 - minSpan / 2, (lo0 + lo1) / 2 + minSpan / 2];
    const k = Math.cos((((la0 + la1) / 2) * Math.PI) / 180) || 1;
    const scale = Math.min((W - 2 * PAD) / ((lo1 - lo0) * k), (H - 2 * PAD) / (la1 - la0));
    const cx = (lo0 + lo1) / 2;
    const cy = (la0 + la1) / 2;
    const x = (lon: number) => W / 2 + (lon - cx) * k * scale;
    const y = (lat: number) => H / 2 - (lat - cy) * scale;

    const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'group', 'aria-label': `Map of ${located.length} device locations` });
    root.append(svg('rect', { x: 0, y: 0, width: W, height: H, class: 'map-bg' }));
    // Graticule at round degrees, labelled on the edges.
    const latMin = cy - (H / 2) / scale, latMax = cy + (H / 2) / scale;
    const lonMin = cx - (W / 2) / (k * scale), lonMax = cx + (W / 2) / (k * scale);
    const grid = svg('g', { class: 'grid', 'aria-hidden': 'true' });
    const sLat = niceStep(latMax - latMin), sLon = niceStep(lonMax - lonMin);
    const dec = (s: number) => Math.max(0, -Math.floor(Math.log10(s)));
    for (let v = Math.ceil(latMin / sLat) * sLat; v <= latMax; v += sLat) {
      grid.append(svg('line', { x1: 0, x2: W, y1: y(v), y2: y(v) }));
      const t = svg('text', { x: 4, y: y(v) - 3 });
      t.textContent = `${v.toFixed(dec(sLat))}°`;
      grid.append(t);
    }
    for (let v = Math.ceil(lonMin / sLon) * sLon; v <= lonMax; v += sLon) {
      grid.append(svg('line', { y1: 0, y2: H, x1: x(v), x2: x(v) }));
      const t = svg('text', { x: x(v) + 3, y: H - 4 });
      t.textContent = `${v.toFixed(dec(sLon))}°`;
      grid.append(t);
    }
    root.append(grid);
    const dots = svg('g', { class: 'dots' });
    for (const d of located) {
      const loc = d.domainInfo!.location!;
      const c = svg('circle', { cx: x(loc.longitude).toFixed(1), cy: y(loc.latitude).toFixed(1), r: 7, 'data-id': d.id, class: 'dot' });
      c.append(svg('title', {}));
      c.addEventListener('click', (e) => this.ctx.select(d.id, e.ctrlKey || e.metaKey || e.shiftKey ? 'toggle' : 'only'));
      dots.append(c);
      this.points.set(d.id, c);
    }
    root.append(dots);
    this.root = root;
    this.host.replaceChildren(root);
    this.refresh();
  }

  /** Colours from the latest temperatures, rings on the selection. */
  refresh(): void {
    if (!this.root) return;
    const unit = this.ctx.unit();
    const temps = [...this.points.keys()].map((id) => this.ctx.latest.get(id)?.temp).filter((t): t is number => typeof t === 'number');
    const lo = temps.length ? Math.min(...temps) : 0;
    const hi = temps.length ? Math.max(...temps) : 1;
    const sel = new Set(this.ctx.selected());
    for (const [id, c] of this.points) {
      const t = this.ctx.latest.get(id)?.temp ?? null;
      c.setAttribute('fill', tempColour(t, lo, hi));
      c.classList.toggle('selected', sel.has(id));
      c.firstChild!.textContent = `${shortId(id)}: ${fmtTemp(t, unit)}`;
      // Selected points are drawn last, on top.
      if (sel.has(id)) c.parentNode!.append(c);
    }
    this.legend.replaceChildren();
    if (temps.length) {
      const bar = document.createElement('span');
      bar.className = 'legend-bar';
      bar.style.background = `linear-gradient(90deg, ${tempColour(lo, lo, hi)}, ${tempColour((lo + hi) / 2, lo, hi)}, ${tempColour(hi, lo, hi)})`;
      this.legend.append(fmtTemp(lo, unit), bar, fmtTemp(hi, unit));
    }
  }
}
