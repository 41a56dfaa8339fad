// The devices table: sortable by every column, filtered by a free text, rows kept (not rebuilt) so
// live updates do not steal keyboard focus. A row click plots that device alone; the checkbox adds
// it to (or removes it from) the comparison.
import type { Device, Observation } from './api.ts';
import { fmtValue, valueAt, type Quantity } from './fields.ts';
import { el, fmtAge, fmtTime, isStale, shortId, whereOf, zoneLabel } from './format.ts';
import { alarmBadge } from './alarms.ts';

/** A device's newest observation, its time, and the one before (to know how often it reports). */
export interface Latest {
  ts: number;
  prevTs?: number;
  obs: Observation;
}

/** What the gateway knows of a dev kit (GET /api/solutions/{s}/kits). */
export interface KitState {
  reachable: boolean;
  lastHeard: number | null;
}

/** One line for a device's state: a kit's reachability first, then the staleness of its data. */
export function deviceState(l: Latest | undefined, kit: KitState | undefined, now = Date.now()): { key: 'online' | 'offline' | 'stale' | 'fresh' | 'none'; text: string } {
  if (kit) {
    if (kit.reachable) return { key: 'online', text: `Online${kit.lastHeard ? `, heard ${fmtAge(kit.lastHeard, now)}` : ''}` };
    return { key: 'offline', text: kit.lastHeard ? `Offline, last heard ${fmtAge(kit.lastHeard, now)}` : 'Offline, never heard' };
  }
  if (!l) return { key: 'none', text: 'No readings' };
  return isStale(l, now) ? { key: 'stale', text: 'Stale' } : { key: 'fresh', text: 'Reporting' };
}

type SortKey = 'id' | 'type' | 'where' | 'temp' | 'age';

export class DeviceTable {
  private rows = new Map<string, HTMLTableRowElement>();
  private devices: Device[] = [];
  private sortKey: SortKey = 'id';
  private sortDir: 1 | -1 = 1;
  private filter = '';

  constructor(
    private readonly table: HTMLTableElement,
    private readonly filterInput: HTMLInputElement,
    private readonly ctx: {
      latest: Map<string, Latest>;
      kits: Map<string, KitState>;
      selected: () => string[];
      quantity: () => Quantity;
      select: (id: string, mode: 'only' | 'toggle') => void;
    },
  ) {
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
        // A device changed in place (PATCH): its type and location as stored now.
        tr.querySelector('.type')!.textContent = d.deviceType;
        tr.querySelector('.where')!.textContent = whereOf(d);
      }
    }
    this.refresh();
  }

  private makeRow(d: Device): HTMLTableRowElement {
    const box = el('input', { type: 'checkbox', 'aria-label': `Compare device ${d.id}` });
    box.addEventListener('click', (e) => {
      e.stopPropagation();
      this.ctx.select(d.id, 'toggle');
    });
    const idCell = el(
      'th',
      { scope: 'row', class: 'mono', title: d.id },
      el('span', { class: 'id-short' }, shortId(d.id)),
      el('span', { class: 'id-rest' }, d.id.slice(8)),
      el('span', { class: 'alarm-badge', hidden: '' }),
    );
    const tr = el(
      'tr',
      { tabindex: '0', 'data-id': d.id, 'aria-selected': 'false' },
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
      } else if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        const next = (e.key === 'ArrowDown' ? tr.nextElementSibling : tr.previousElementSibling) as HTMLElement | null;
        next?.focus();
      }
    });
    return tr;
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
    for (const [id, tr] of this.rows) this.age(id, tr, now);
  }

  private age(id: string, tr: HTMLTableRowElement, now: number): void {
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
    if (tr.dataset.state !== st.key) tr.dataset.state = st.key;
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
    }
  }

  private order(): void {
    const f = this.filter;
    const shown = this.devices.filter((d) => !f || `${d.id} ${d.deviceType} ${whereOf(d)}`.toLowerCase().includes(f));
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
