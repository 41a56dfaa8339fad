// The devices table: sortable by every column, filtered by a free text, rows kept (not rebuilt) so
// live updates do not steal keyboard focus. A row click plots that device alone; the checkbox adds
// it to (or removes it from) the comparison.
import type { Device, Observation } from './api.ts';
import { fmtValue, valueAt, type Quantity } from './fields.ts';
import { el, fmtAge, fmtTime, isStale, nameOf, shortId, whereOf, zoneLabel } from './format.ts';
import { alarmBadge } from './alarms.ts';

/** A device's newest observation, its time, and the one before (to know how often it reports). */
export interface Latest {
  ts: number;
  prevTs?: number;
  /** The usual gap between its readings (ms), as the server measured it (GET …/cadence). */
  every?: number;
  obs: Observation;
}

/** The states a device can be in, as the Status filter names them. */
export type StateKey = 'online' | 'offline' | 'stale' | 'fresh' | 'none';

/** What the gateway knows of a dev kit (GET /api/solutions/{s}/kits). */
export interface KitState {
  reachable: boolean;
  lastHeard: number | null;
  /** How often the kit announces itself (ms); null when unknown. */
  periodMs?: number | null;
}

/**
 * A kit is shown offline once its announcements stop: more than one and a half periods (and 5 s)
 * without one, though the gateway still holds its entry for three periods (it keeps answering for
 * a kit that may only have lost one announcement).
 */
export function kitSilent(kit: KitState, now = Date.now()): boolean {
  return !!kit.periodMs && kit.lastHeard !== null && now - kit.lastHeard > 1.5 * kit.periodMs + 5000;
}

/** One line for a device's state: a kit's reachability first, then the staleness of its data. */
export function deviceState(l: Latest | undefined, kit: KitState | undefined, now = Date.now()): { key: StateKey; text: string } {
  if (kit) {
    if (kit.reachable && !kitSilent(kit, now)) return { key: 'online', text: `Online${kit.lastHeard ? `, heard ${fmtAge(kit.lastHeard, now)}` : ''}` };
    if (kit.reachable) return { key: 'offline', text: `Offline, announcements stopped ${fmtAge(kit.lastHeard, now)}` };
    return { key: 'offline', text: kit.lastHeard ? `Offline, last heard ${fmtAge(kit.lastHeard, now)}` : 'Offline, never heard' };
  }
  if (!l) return { key: 'none', text: 'No readings' };
  return isStale(l, now) ? { key: 'stale', text: 'Stale' } : { key: 'fresh', text: 'Reporting' };
}

type SortKey = 'id' | 'type' | 'where' | 'temp' | 'age' | 'state';
/** Sorting by status puts what needs a look first. */
const STATE_ORDER: Record<StateKey, number> = { offline: 0, stale: 1, none: 2, online: 3, fresh: 4 };

export class DeviceTable {
  private rows = new Map<string, HTMLTableRowElement>();
  private devices: Device[] = [];
  private sortKey: SortKey = 'id';
  private sortDir: 1 | -1 = 1;
  private filter = '';
  /** '' (all), or the states shown: 'fresh' covers Reporting and Online, 'stale' Stale and Offline. */
  private stateFilter = '';
  /** The row that takes Tab (roving tabindex): one stop for the whole table, arrows move within. */
  private current: string | null = null;
  /** Called with how many rows are shown and how many devices there are. */
  onCount: (shown: number, total: number) => void = () => {};

  constructor(
    private readonly table: HTMLTableElement,
    filterInput: HTMLInputElement,
    private readonly ctx: {
      latest: Map<string, Latest>;
      kits: Map<string, KitState>;
      selected: () => string[];
      quantity: () => Quantity;
      select: (id: string, mode: 'only' | 'toggle') => void;
      devices?: () => Device[];
    },
    stateSelect: HTMLSelectElement | null = null,
  ) {
    stateSelect?.addEventListener('change', () => {
      this.stateFilter = stateSelect.value;
      this.order();
    });
    for (const b of table.querySelectorAll<HTMLButtonElement>('thead button[data-sort]')) {
      b.addEventListener('click', () => {
        const k = b.dataset.sort as SortKey;
        if (this.sortKey === k) this.sortDir = this.sortDir === 1 ? -1 : 1;
        else {
          this.sortKey = k;
          this.sortDir = k === 'age' || k === 'temp' ? -1 : 1;
        }
        this.order();
      });
    }
    filterInput.addEventListener('input', () => {
      this.filter = filterInput.value.trim().toLowerCase();
      this.order();
    });
  }

  setDevices(devices: Device[]): void {
    this.devices = devices;
    const keep = new Set(devices.map((d) => d.id));
    for (const [id, tr] of this.rows)
      if (!keep.has(id)) {
        tr.remove();
        this.rows.delete(id);
      }
    for (const d of devices) {
      const tr = this.rows.get(d.id);
      if (!tr) this.rows.set(d.id, this.makeRow(d));
      else {
        // A device changed in place (PATCH): its name, type and location as stored now.
        this.fillId(tr.cells[1] as HTMLTableCellElement, d);
        tr.querySelector('.type')!.textContent = d.deviceType;
        tr.querySelector('.where')!.textContent = whereOf(d);
      }
    }
    this.refresh();
  }

  private makeRow(d: Device): HTMLTableRowElement {
    // The checkbox is no Tab stop of its own: Shift+Enter (or Shift+Space) on the row compares.
    const box = el('input', { type: 'checkbox', tabindex: '-1', 'aria-label': `Compare device ${d.id}` });
    box.addEventListener('click', (e) => {
      e.stopPropagation();
      this.ctx.select(d.id, 'toggle');
    });
    const idCell = el('th', { scope: 'row', class: 'mono', title: d.id });
    this.fillId(idCell, d);
    const tr = el(
      'tr',
      { tabindex: '-1', 'data-id': d.id, 'aria-selected': 'false' },
      el('td', { class: 'c-pick' }, box),
      idCell,
      el('td', { class: 'type' }, d.deviceType),
      el('td', { class: 'mono where' }, whereOf(d)),
      el('td', { class: 'num temp' }),
      el('td', { class: 'num age' }),
      el('td', { class: 'state' }),
    );
    tr.addEventListener('click', (e) => this.ctx.select(d.id, e.ctrlKey || e.metaKey || e.shiftKey ? 'toggle' : 'only'));
    tr.addEventListener('keydown', (e) => {
      if (e.target !== tr) return;
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        this.ctx.select(d.id, e.shiftKey ? 'toggle' : 'only');
      } else if (['ArrowDown', 'ArrowUp', 'Home', 'End', 'PageDown', 'PageUp'].includes(e.key)) {
        e.preventDefault();
        const rows = [...(tr.parentElement as HTMLTableSectionElement).rows];
        const at = rows.indexOf(tr);
        const step = { ArrowDown: 1, ArrowUp: -1, PageDown: 10, PageUp: -10, Home: -rows.length, End: rows.length }[e.key]!;
        const next = rows[Math.max(0, Math.min(rows.length - 1, at + step))];
        if (next) this.focusOn(next);
      }
    });
    tr.addEventListener('focus', () => this.setCurrent(d.id));
    return tr;
  }

  /** The id cell: the device's name when it has one (the id in the title), else its id, the first 8 characters shown. */
  private fillId(cell: HTMLTableCellElement, d: Device): void {
    const name = nameOf(d);
    const badge = cell.querySelector('.alarm-badge') ?? el('span', { class: 'alarm-badge', hidden: '' });
    cell.classList.toggle('named', !!name);
    cell.replaceChildren(
      ...(name
        ? [el('span', { class: 'dev-name' }, name), el('span', { class: 'sr-only' }, ` (${d.id})`)]
        : [el('span', { class: 'id-short' }, shortId(d.id)), el('span', { class: 'id-rest' }, d.id.slice(8))]),
      badge,
    );
  }

  private setCurrent(id: string): void {
    if (this.current === id) return;
    const old = this.current ? this.rows.get(this.current) : undefined;
    old?.setAttribute('tabindex', '-1');
    this.current = id;
    this.rows.get(id)?.setAttribute('tabindex', '0');
  }

  private focusOn(tr: HTMLTableRowElement): void {
    if (tr.dataset.id) this.setCurrent(tr.dataset.id);
    tr.focus();
    this.focusRow(tr.dataset.id ?? '');
  }

  /** Keeps exactly one shown row in the Tab order: the current one, else the selected, else the first. */
  private keepTabStop(shown: Device[]): void {
    if (this.current && shown.some((d) => d.id === this.current)) return;
    const sel = this.ctx.selected()[0];
    const pick = shown.find((d) => d.id === sel) ?? shown[0];
    if (pick) this.setCurrent(pick.id);
  }

  /** Latest values, ages, selection marks and the order. */
  refresh(): void {
    const q = this.ctx.quantity();
    const sel = new Set(this.ctx.selected());
    const now = Date.now();
    for (const [id, tr] of this.rows) {
      const l = this.ctx.latest.get(id);
      const cells = tr.cells;
      cells[4]!.textContent = fmtValue(valueAt(l?.obs, q.path), q);
      this.age(id, tr, now);
      const on = sel.has(id);
      tr.setAttribute('aria-selected', String(on));
      (cells[0]!.firstChild as HTMLInputElement).checked = on;
      // Active alarms of the device (web/src/alarms.ts keeps the counts).
      const badge = cells[1]!.querySelector<HTMLElement>('.alarm-badge')!;
      const n = alarmBadge(id);
      badge.hidden = n === 0;
      badge.textContent = n ? `${n} alarm${n > 1 ? 's' : ''}` : '';
    }
    this.order();
  }

  /** Only ages and states change with time: cheap enough to run every second. */
  tick(): void {
    const now = Date.now();
    let moved = false;
    for (const [id, tr] of this.rows) moved = this.age(id, tr, now) || moved;
    // A device that went stale leaves (or joins) a status filter or moves in a status sort.
    if (moved && (this.stateFilter || this.sortKey === 'state')) this.order();
  }

  /** Ages and the state; true when the row's state changed. */
  private age(id: string, tr: HTMLTableRowElement, now: number): boolean {
    const l = this.ctx.latest.get(id);
    const cell = tr.cells[5]!;
    const text = fmtAge(l?.ts, now);
    if (cell.textContent !== text) cell.textContent = text;
    const title = l ? `${fmtTime(l.ts)} ${zoneLabel(l.ts)}` : '';
    if (cell.title !== title) cell.title = title;
    const st = deviceState(l, this.ctx.kits.get(id), now);
    const sc = tr.cells[6]!;
    if (sc.textContent !== st.text) {
      // The word is shown; the rest ("…, heard 5 s ago") is in the title and for screen readers (a narrow column).
      const short = st.text.split(',')[0]!;
      sc.replaceChildren(el('span', {}, short), el('span', { class: 'detail' }, st.text.slice(short.length)));
      sc.title = st.text;
    }
    if (tr.dataset.state === st.key) return false;
    tr.dataset.state = st.key;
    return true;
  }

  private key(d: Device): string | number {
    const l = this.ctx.latest.get(d.id);
    switch (this.sortKey) {
      case 'id':
        return d.id;
      case 'type':
        return d.deviceType;
      case 'where':
        return whereOf(d);
      case 'temp':
        return valueAt(l?.obs, this.ctx.quantity().path) ?? -Infinity;
      case 'age':
        return l?.ts ?? -Infinity;
      case 'state':
        return STATE_ORDER[deviceState(l, this.ctx.kits.get(d.id)).key];
    }
  }

  private order(): void {
    const f = this.filter;
    const now = Date.now();
    const sf = this.stateFilter;
    const stateOk = (d: Device) => {
      if (!sf) return true;
      const k = deviceState(this.ctx.latest.get(d.id), this.ctx.kits.get(d.id), now).key;
      return sf === 'fresh' ? k === 'fresh' || k === 'online' : sf === 'stale' ? k === 'stale' || k === 'offline' : k === sf;
    };
    const shown = this.devices.filter((d) => (!f || `${nameOf(d)} ${d.id} ${d.deviceType} ${whereOf(d)}`.toLowerCase().includes(f)) && stateOk(d));
    shown.sort((a, b) => {
      const ka = this.key(a);
      const kb = this.key(b);
      const c = typeof ka === 'number' && typeof kb === 'number' ? ka - kb : String(ka).localeCompare(String(kb));
      return c * this.sortDir || a.id.localeCompare(b.id);
    });
    const body = this.table.tBodies[0]!;
    const want = shown.map((d) => this.rows.get(d.id)!);
    // Move rows only when the order changed: moving a focused row would blur it.
    const have = [...body.rows];
    if (have.length !== want.length || have.some((r, i) => r !== want[i])) body.replaceChildren(...want);
    this.keepTabStop(shown);
    this.onCount(shown.length, this.devices.length);
    for (const th of this.table.querySelectorAll<HTMLTableCellElement>('thead th[aria-sort]')) {
      const k = th.querySelector('button')?.dataset.sort;
      th.setAttribute('aria-sort', k === this.sortKey ? (this.sortDir === 1 ? 'ascending' : 'descending') : 'none');
    }
  }

  /**
   * Brings the row into view inside the table's own scroll box only: a selection made elsewhere (a
   * tile, the map, the first device picked on connect) never scrolls the page away from where the
   * user is (on a phone, away from the panel they are using).
   */
  focusRow(id: string): void {
    const tr = this.rows.get(id);
    const wrap = this.table.parentElement;
    if (!tr || !wrap || !tr.isConnected) return;
    const w = wrap.getBoundingClientRect();
    const r = tr.getBoundingClientRect();
    const head = this.table.tHead?.getBoundingClientRect().height ?? 0;
    if (r.top < w.top + head) wrap.scrollTop -= w.top + head - r.top;
    else if (r.bottom > w.bottom) wrap.scrollTop += r.bottom - w.bottom;
  }
}
