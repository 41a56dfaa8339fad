// The map proper: land and country borders from Natural Earth (world-atlas, 1:50m, TopoJSON) drawn
// in a Mercator projection (d3-geo) fitted to the devices, with a graticule; drag or arrow keys to
// pan, the wheel, +/− or the buttons to zoom, "Fit devices" to go back. Devices whose marks would
// overlap on screen are drawn as one numbered circle (a cluster, coloured by the members' average);
// choosing a cluster zooms in on it, or — when its devices share one spot and no zoom can part
// them — selects them for comparison. Points are coloured by the latest value of the chosen field;
// the selection is the table's (a ring).
import { geoGraticule10, geoMercator, geoPath, type GeoProjection } from 'd3-geo';
import { feature, mesh } from 'topojson-client';
import type { GeometryCollection, Topology } from 'topojson-specification';
import atlasUrl from 'world-atlas/countries-50m.json?url';
import { alarmBadge } from './alarms.ts';
import type { Device } from './api.ts';
import { valueAt, fmtValue } from './fields.ts';
import { inkOn, shortId, tempColour } from './format.ts';
import type { MapContext } from './map.ts';

const NS = 'http://www.w3.org/2000/svg';
const W = 600;
const H = 360;
const PAD = 36;
/** Devices nearer than this (viewBox units) on screen are one cluster. */
const CLUSTER_PX = 14;
/** The radius of a mark of `n` devices (a device's dot: 7). */
function markRadius(n: number): number {
  return n === 1 ? 7 : Math.min(MAX_MARK_R, 9 + 3 * Math.log2(n));
}
/** How far a mark reaches drawn at its widest, stroke included: a selected dot grows to r 9 (style.css), ringed 3 wide. */
function markReach(n: number): number {
  return n === 1 ? 10.5 : markRadius(n) + 1.5;
}
const MAX_MARK_R = 22;
/** The least room between two marks. */
const MARK_GAP = 1;
const MIN_SCALE = 90;
const MAX_SCALE = 5e7;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number> = {}): SVGElementTagNameMap[K] {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

interface Located {
  id: string;
  lon: number;
  lat: number;
}

interface Cluster {
  x: number;
  y: number;
  members: Located[];
}

let atlas: Promise<{ land: GeoJSON.FeatureCollection | GeoJSON.Feature; borders: GeoJSON.MultiLineString } | null> | null = null;
function loadAtlas() {
  atlas ??= fetch(atlasUrl)
    .then((r) => (r.ok ? (r.json() as Promise<Topology>) : Promise.reject(new Error(String(r.status)))))
    .then((topo) => {
      const countries = topo.objects.countries as GeometryCollection;
      return {
        land: feature(topo, topo.objects.land as GeometryCollection) as GeoJSON.FeatureCollection,
        // Borders between countries only (a != b): coasts are the land's outline.
        borders: mesh(topo, countries, (a, b) => a !== b) as GeoJSON.MultiLineString,
      };
    })
    .catch(() => null);
  return atlas;
}

export class MapView {
  private readonly root: SVGSVGElement;
  private readonly landG: SVGGElement;
  private readonly gridG: SVGGElement;
  private readonly dotsG: SVGGElement;
  private readonly projection: GeoProjection = geoMercator();
  private devices: Located[] = [];
  private land: Awaited<ReturnType<typeof loadAtlas>> = null;
  private frame = 0;

  constructor(
    host: HTMLElement,
    private readonly legend: HTMLElement,
    private readonly ctx: MapContext,
  ) {
    this.root = svg('svg', {
      viewBox: `0 0 ${W} ${H}`,
      role: 'application',
      tabindex: '0',
      'aria-roledescription': 'map',
      'aria-label': 'Map of device locations. Arrow keys pan, plus and minus zoom, 0 fits the devices.',
    });
    const clip = svg('clipPath', { id: 'map-clip' });
    clip.append(svg('rect', { x: 0, y: 0, width: W, height: H }));
    const defs = svg('defs');
    defs.append(clip);
    this.landG = svg('g', { class: 'land', 'aria-hidden': 'true', 'clip-path': 'url(#map-clip)' });
    this.gridG = svg('g', { class: 'grid', 'aria-hidden': 'true' });
    this.dotsG = svg('g', { class: 'dots' });
    this.root.append(defs, svg('rect', { x: 0, y: 0, width: W, height: H, class: 'map-bg' }), this.landG, this.gridG, this.dotsG);
    host.replaceChildren(this.root);
    this.installPanZoom();
    for (const [id, fn] of [
      ['map-zoom-in', () => this.zoom(2)],
      ['map-zoom-out', () => this.zoom(0.5)],
      ['map-fit', () => this.fit()],
    ] as const) {
      document.getElementById(id)?.addEventListener('click', fn);
    }
    void loadAtlas().then((a) => {
      this.land = a;
      this.root.dataset.atlas = a ? 'loaded' : 'failed';
      this.draw();
    });
  }

  setDevices(devices: Device[]): void {
    const before = new Set(this.devices.map((d) => d.id));
    this.devices = devices.map((d) => ({ id: d.id, lon: d.domainInfo!.location!.longitude, lat: d.domainInfo!.location!.latitude }));
    this.root.dataset.located = String(this.devices.length);
    // Fit when the set of devices changed (a new solution, a simulation's devices), not on a reload.
    if (this.devices.length !== before.size || this.devices.some((d) => !before.has(d.id))) this.fit();
    else this.draw();
  }

  /** The devices in view, with room around them; a single spot gets about 5 km around it. */
  fit(): void {
    if (!this.devices.length) return;
    const lons = this.devices.map((d) => d.lon),
      lats = this.devices.map((d) => d.lat);
    let [x0, x1, y0, y1] = [Math.min(...lons), Math.max(...lons), Math.min(...lats), Math.max(...lats)];
    const min = 0.05;
    if (x1 - x0 < min) [x0, x1] = [(x0 + x1) / 2 - min / 2, (x0 + x1) / 2 + min / 2];
    if (y1 - y0 < min) [y0, y1] = [(y0 + y1) / 2 - min / 2, (y0 + y1) / 2 + min / 2];
    if (this.pendingView) {
      // A view restored from the page's address, once, instead of fitting.
      const v = this.pendingView;
      this.pendingView = null;
      this.projection.center([0, 0]).scale(Math.min(MAX_SCALE, Math.max(MIN_SCALE, v.scale)));
      const at = this.projection([v.lon, v.lat]);
      if (at) {
        const [tx, ty] = this.projection.translate();
        this.projection.translate([tx + W / 2 - at[0], ty + H / 2 - at[1]]);
        this.draw();
        return;
      }
    }
    const box: GeoJSON.Feature = {
      type: 'Feature',
      properties: {},
      geometry: {
        type: 'MultiPoint',
        coordinates: [
          [x0, y0],
          [x1, y1],
        ],
      },
    };
    this.projection.center([0, 0]).fitExtent(
      [
        [PAD, PAD],
        [W - PAD, H - PAD],
      ],
      box,
    );
    this.draw();
  }

  private pendingView: { lon: number; lat: number; scale: number } | null = null;
  /** Called after the view moved (pan, zoom, fit), to keep it in the page's address. */
  onView: () => void = () => {};

  /** The view's middle and scale. */
  viewState(): { lon: number; lat: number; scale: number } | null {
    const c = this.projection.invert?.([W / 2, H / 2]);
    return c ? { lon: c[0], lat: c[1], scale: this.projection.scale() } : null;
  }

  /** Shows this view at the next fit (a view from the page's address). */
  setViewState(v: { lon: number; lat: number; scale: number }): void {
    this.pendingView = v;
    if (this.devices.length) this.fit();
  }

  /** Zoom by `f` around a point of the view (its middle by default). */
  zoom(f: number, at: [number, number] = [W / 2, H / 2]): void {
    const p = this.projection;
    const geo = p.invert!(at);
    if (!geo) return;
    const s = Math.min(MAX_SCALE, Math.max(MIN_SCALE, p.scale() * f));
    p.scale(s);
    const moved = p(geo)!;
    const [tx, ty] = p.translate();
    p.translate([tx + at[0] - moved[0], ty + at[1] - moved[1]]);
    this.schedule();
  }

  pan(dx: number, dy: number): void {
    const [tx, ty] = this.projection.translate();
    this.projection.translate([tx + dx, ty + dy]);
    this.schedule();
  }

  private schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  private toView(e: { clientX: number; clientY: number }): [number, number] {
    const r = this.root.getBoundingClientRect();
    return [((e.clientX - r.left) / r.width) * W, ((e.clientY - r.top) / r.height) * H];
  }

  private installPanZoom(): void {
    const root = this.root;
    root.addEventListener(
      'wheel',
      (e) => {
        e.preventDefault();
        this.zoom(e.deltaY > 0 ? 0.8 : 1.25, this.toView(e));
      },
      { passive: false },
    );
    let drag: { x: number; y: number; moved: boolean } | null = null;
    root.addEventListener('pointerdown', (e) => {
      if (e.pointerType === 'touch' || e.button !== 0) return;
      drag = { x: e.clientX, y: e.clientY, moved: false };
    });
    root.addEventListener('pointermove', (e) => {
      if (!drag) return;
      const r = root.getBoundingClientRect();
      const dx = ((e.clientX - drag.x) / r.width) * W,
        dy = ((e.clientY - drag.y) / r.height) * H;
      if (!drag.moved && Math.hypot(dx, dy) < 3) return;
      if (!drag.moved) root.setPointerCapture(e.pointerId);
      drag.moved = true;
      drag.x = e.clientX;
      drag.y = e.clientY;
      this.pan(dx, dy);
    });
    const end = (e: PointerEvent) => {
      // A drag that moved the map is not a click on whatever is under the pointer.
      if (drag?.moved) root.addEventListener('click', (c) => c.stopPropagation(), { capture: true, once: true });
      if (root.hasPointerCapture(e.pointerId)) root.releasePointerCapture(e.pointerId);
      drag = null;
    };
    root.addEventListener('pointerup', end);
    root.addEventListener('pointercancel', end);
    root.addEventListener('keydown', (e) => {
      const step = 40;
      const keys: Record<string, () => void> = {
        ArrowLeft: () => this.pan(step, 0),
        ArrowRight: () => this.pan(-step, 0),
        ArrowUp: () => this.pan(0, step),
        ArrowDown: () => this.pan(0, -step),
        '+': () => this.zoom(2),
        '=': () => this.zoom(2),
        '-': () => this.zoom(0.5),
        '0': () => this.fit(),
      };
      const fn = keys[e.key];
      if (!fn || e.target !== root) return;
      e.preventDefault();
      fn();
    });
  }

  /**
   * The marks at the current zoom: devices binned into cells first (cheap for thousands), then any
   * two marks whose circles would overlap or touch (selected or not: markReach) merged into one,
   * again and again until none do, so no mark hides another at any zoom. A merged cluster sits at
   * its members' mean and grows with its count, which may make it reach a neighbour: hence the repeat.
   */
  private clusters(): Cluster[] {
    const p = this.projection;
    const cells = new Map<string, Cluster>();
    for (const d of this.devices) {
      const xy = p([d.lon, d.lat]);
      if (!xy) continue;
      const key = `${Math.floor(xy[0] / CLUSTER_PX)}|${Math.floor(xy[1] / CLUSTER_PX)}`;
      const c = cells.get(key);
      if (c) {
        c.x = (c.x * c.members.length + xy[0]) / (c.members.length + 1);
        c.y = (c.y * c.members.length + xy[1]) / (c.members.length + 1);
        c.members.push(d);
      } else cells.set(key, { x: xy[0], y: xy[1], members: [d] });
    }
    let marks = [...cells.values()];
    // Neighbours are looked up in a grid of cells as wide as the largest two marks side by side.
    const cell = 2 * markReach(1e9) + MARK_GAP;
    for (let merged = true; merged && marks.length > 1; ) {
      merged = false;
      const grid = new Map<string, Cluster[]>();
      const at = (c: Cluster) => [Math.floor(c.x / cell), Math.floor(c.y / cell)] as const;
      for (const c of marks) {
        const [i, j] = at(c);
        const k = `${i}|${j}`;
        const list = grid.get(k);
        if (list) list.push(c);
        else grid.set(k, [c]);
      }
      const gone = new Set<Cluster>();
      for (const c of marks) {
        if (gone.has(c)) continue;
        const [i, j] = at(c);
        for (let di = -1; di <= 1; di++) {
          for (let dj = -1; dj <= 1; dj++) {
            for (const o of grid.get(`${i + di}|${j + dj}`) ?? []) {
              if (o === c || gone.has(o)) continue;
              if (Math.hypot(c.x - o.x, c.y - o.y) >= markReach(c.members.length) + markReach(o.members.length) + MARK_GAP) continue;
              const n = c.members.length + o.members.length;
              c.x = (c.x * c.members.length + o.x * o.members.length) / n;
              c.y = (c.y * c.members.length + o.y * o.members.length) / n;
              c.members.push(...o.members);
              gone.add(o);
              merged = true;
            }
          }
        }
      }
      if (merged) marks = marks.filter((c) => !gone.has(c));
    }
    return marks;
  }

  private draw(): void {
    const p = this.projection;
    p.clipExtent([
      [-20, -20],
      [W + 20, H + 20],
    ]);
    const path = geoPath(p);
    const grid = svg('path', { d: path(geoGraticule10()) ?? '' });
    this.gridG.replaceChildren(grid);
    if (this.land) {
      this.landG.replaceChildren(svg('path', { class: 'land-fill', d: path(this.land.land) ?? '' }), svg('path', { class: 'borders', d: path(this.land.borders) ?? '' }));
    }
    this.root.dataset.scale = String(Math.round(p.scale()));
    const shown = this.clusters();
    const inView = shown.filter((c) => c.x >= -CLUSTER_PX && c.x <= W + CLUSTER_PX && c.y >= -CLUSTER_PX && c.y <= H + CLUSTER_PX);
    this.dotsG.replaceChildren(...inView.map((c) => this.mark(c)));
    this.root.dataset.clusters = String(inView.filter((c) => c.members.length > 1).length);
    this.refresh();
    this.keepTabStop();
    this.onView();
  }

  /**
   * The marks are reachable by keyboard with one Tab stop: Tab from the map reaches one mark (the
   * selected one, else the first), the arrow keys move between marks in reading order, Enter or
   * Space chooses (a cluster opens).
   */
  private keepTabStop(): void {
    const marks = this.marks();
    if (!marks.length) return;
    const sel = new Set(this.ctx.selected());
    const cur = marks.find((m) => m.getAttribute('tabindex') === '0') ?? marks.find((m) => (m.dataset.id ? sel.has(m.dataset.id) : false)) ?? marks[0]!;
    for (const m of marks) m.setAttribute('tabindex', m === cur ? '0' : '-1');
  }

  private marks(): SVGElement[] {
    const all = [...this.dotsG.querySelectorAll<SVGElement>('circle.dot, g.cluster')];
    const pos = (m: SVGElement) => {
      const c = (m.tagName === 'g' ? m.querySelector('circle') : m) as SVGCircleElement;
      return [Number(c.getAttribute('cy')), Number(c.getAttribute('cx'))] as const;
    };
    return all.sort((a, b) => {
      const [ay, ax] = pos(a),
        [by, bx] = pos(b);
      return Math.round(ay / 20) - Math.round(by / 20) || ax - bx;
    });
  }

  private markKeys(mark: SVGElement, e: KeyboardEvent, choose: () => void): void {
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      e.stopPropagation();
      choose();
      return;
    }
    if (!['ArrowRight', 'ArrowDown', 'ArrowLeft', 'ArrowUp'].includes(e.key)) return;
    e.preventDefault();
    e.stopPropagation();
    const marks = this.marks();
    const at = marks.indexOf(mark);
    const next = marks[(at + (e.key === 'ArrowRight' || e.key === 'ArrowDown' ? 1 : marks.length - 1)) % marks.length];
    if (!next) return;
    for (const m of marks) m.setAttribute('tabindex', m === next ? '0' : '-1');
    next.focus();
  }

  private mark(c: Cluster): SVGElement {
    const x = c.x.toFixed(1),
      y = c.y.toFixed(1);
    if (c.members.length === 1) {
      const d = c.members[0]!;
      const dot = svg('circle', { cx: x, cy: y, r: markRadius(1), 'data-id': d.id, class: 'dot', tabindex: '-1', role: 'button' });
      dot.append(svg('title'));
      dot.addEventListener('click', (e) => this.ctx.select(d.id, e.ctrlKey || e.metaKey || e.shiftKey ? 'toggle' : 'only'));
      dot.addEventListener('keydown', (e) => this.markKeys(dot, e, () => this.ctx.select(d.id, e.shiftKey ? 'toggle' : 'only')));
      return dot;
    }
    const n = c.members.length;
    const g = svg('g', { class: 'cluster', 'data-count': n, 'data-ids': c.members.map((m) => m.id).join(','), tabindex: '-1', role: 'button' });
    g.addEventListener('keydown', (e) => this.markKeys(g, e, () => this.openCluster(c)));
    g.append(svg('circle', { cx: x, cy: y, r: markRadius(n) }));
    const t = svg('text', { x, y, dy: '0.35em', 'text-anchor': 'middle' });
    t.textContent = String(n);
    g.append(t, svg('title'));
    g.addEventListener('click', () => this.openCluster(c));
    return g;
  }

  /** Zoom in until the cluster's devices part; devices at one spot are selected together instead. */
  private openCluster(c: Cluster): void {
    const lons = c.members.map((m) => m.lon),
      lats = c.members.map((m) => m.lat);
    const spread = Math.max(Math.max(...lons) - Math.min(...lons), Math.max(...lats) - Math.min(...lats));
    if (spread < 1e-5 || this.projection.scale() >= MAX_SCALE) {
      const ids = c.members.map((m) => m.id);
      this.ctx.select(ids[0]!, 'only');
      for (const id of ids.slice(1, 8)) this.ctx.select(id, 'toggle');
      return;
    }
    const box: GeoJSON.Feature = { type: 'Feature', properties: {}, geometry: { type: 'MultiPoint', coordinates: c.members.map((m) => [m.lon, m.lat]) } };
    const before = this.projection.scale();
    this.projection.fitExtent(
      [
        [PAD * 2, PAD * 2],
        [W - PAD * 2, H - PAD * 2],
      ],
      box,
    );
    // Always zoom in at least 2×, so a click always makes progress.
    if (this.projection.scale() < before * 2) {
      this.projection.scale(before);
      this.zoom(2, [c.x, c.y]);
      return;
    }
    this.draw();
  }

  /**
   * A red count beside each marker with active alarms (web/src/alarms.ts, as the table's and the
   * tiles' badges): on a device's dot its own, on a cluster the sum of its devices'.
   */
  private alarmMarks(): void {
    for (const old of this.dotsG.querySelectorAll('g.alarm-mark')) old.remove();
    const mark = (x: string | null, y: string | null, n: number, ids: string[]) => {
      const g = svg('g', { class: 'alarm-mark', 'data-ids': ids.join(','), 'data-count': n, 'aria-hidden': 'true' });
      const cx = Number(x) + 8,
        cy = Number(y) - 8;
      g.append(svg('circle', { cx: cx.toFixed(1), cy: cy.toFixed(1), r: 7 }));
      const t = svg('text', { x: cx.toFixed(1), y: cy.toFixed(1), dy: '0.35em', 'text-anchor': 'middle' });
      t.textContent = n > 99 ? '99+' : String(n);
      g.append(t);
      this.dotsG.append(g);
    };
    for (const dot of this.dotsG.querySelectorAll<SVGCircleElement>('circle.dot')) {
      const n = alarmBadge(dot.dataset.id!);
      if (n) mark(dot.getAttribute('cx'), dot.getAttribute('cy'), n, [dot.dataset.id!]);
    }
    for (const g of this.dotsG.querySelectorAll<SVGGElement>('g.cluster')) {
      const ids = g.dataset.ids!.split(',');
      const n = ids.reduce((a, id) => a + alarmBadge(id), 0);
      const c = g.querySelector('circle')!;
      if (n) mark(c.getAttribute('cx'), c.getAttribute('cy'), n, ids);
    }
  }

  /** Colours from the latest values, rings and titles; alarm badges; the legend. */
  refresh(): void {
    const q = this.ctx.quantity();
    const value = (id: string) => valueAt(this.ctx.latest.get(id)?.obs, q.path);
    const vals = this.devices.map((d) => value(d.id)).filter((v): v is number => v !== null);
    // The 5th to 95th percentile sets the colours: one outlier does not wash out everyone else
    // (values beyond take the end colours; the legend says ≤ and ≥).
    const sorted = [...vals].sort((a, b) => a - b);
    const pct = (f: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.round(f * (sorted.length - 1))))]!;
    const lo = vals.length ? (vals.length >= 10 ? pct(0.05) : sorted[0]!) : 0;
    const hi = vals.length ? (vals.length >= 10 ? pct(0.95) : sorted[sorted.length - 1]!) : 1;
    const clipped = vals.length >= 10 && (sorted[0]! < lo || sorted[sorted.length - 1]! > hi);
    const sel = new Set(this.ctx.selected());
    for (const dot of this.dotsG.querySelectorAll<SVGCircleElement>('circle.dot')) {
      const id = dot.dataset.id!;
      const v = value(id);
      dot.setAttribute('fill', tempColour(v, lo, hi));
      dot.classList.toggle('selected', sel.has(id));
      const stale = this.ctx.stale?.(id) ?? false;
      dot.classList.toggle('stale', stale);
      const alarms = alarmBadge(id);
      const text = `${this.ctx.label?.(id) ?? shortId(id)}: ${fmtValue(v, q)}${stale ? ' (stale)' : ''}${alarms ? `; ${alarms} active alarm${alarms > 1 ? 's' : ''}` : ''}`;
      dot.firstChild!.textContent = text;
      dot.setAttribute('aria-label', text);
      if (sel.has(id)) this.dotsG.append(dot);
    }
    for (const g of this.dotsG.querySelectorAll<SVGGElement>('g.cluster')) {
      const ids = g.dataset.ids!.split(',');
      const vs = ids.map(value).filter((v): v is number => v !== null);
      const avg = vs.length ? vs.reduce((a, b) => a + b, 0) / vs.length : null;
      const fill = tempColour(avg, lo, hi);
      g.querySelector('circle')!.setAttribute('fill', fill);
      // The count in black or white, whichever reads on this fill.
      g.classList.toggle('dark-ink', inkOn(fill) === '#000');
      g.classList.toggle(
        'selected',
        ids.some((id) => sel.has(id)),
      );
      g.querySelector('title')!.textContent =
        `${ids.length} devices here${avg !== null ? `, average ${fmtValue(avg, q)}` : ''}: ${ids.slice(0, 10).map(shortId).join(', ')}${ids.length > 10 ? '…' : ''}`;
    }
    this.alarmMarks();
    this.legend.replaceChildren();
    if (vals.length) {
      const bar = document.createElement('span');
      bar.className = 'legend-bar';
      bar.style.background = `linear-gradient(90deg, ${tempColour(lo, lo, hi)}, ${tempColour((lo + hi) / 2, lo, hi)}, ${tempColour(hi, lo, hi)})`;
      this.legend.append(`${clipped ? '≤ ' : ''}${fmtValue(lo, q)}`, bar, `${clipped ? '≥ ' : ''}${fmtValue(hi, q)}`);
      this.legend.title = clipped ? 'Colours span the 5th to the 95th percentile of the latest values' : '';
    }
    this.root.setAttribute('aria-label', `Map of ${this.devices.length} device locations (${this.dotsG.childElementCount} marks). Arrow keys pan, plus and minus zoom, 0 fits the devices.`);
  }
}
