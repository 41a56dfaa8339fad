// "Latest of all devices": one tile per device, newest reading first, with the chosen field's
// value, its age, the device's state and its active alarms; a tile plots its device. Ages and states
// tick every second, touching only text that changed (no DOM growth on a wall screen).
import type { Device } from './api.ts';
import { alarmBadge } from './alarms.ts';
import { fmtValue, valueAt, type Quantity } from './fields.ts';
import { el, fmtAge, fmtTime, isStale, labelOf, zoneLabel } from './format.ts';
import { deviceState, type KitState, type Latest } from './table.ts';

export interface LatestContext {
  devices: () => Device[];
  latest: Map<string, Latest>;
  kits: Map<string, KitState>;
  selected: () => string[];
  quantity: () => Quantity;
  /** Plots the device alone (the page stays where it is: a wall of tiles is read in place). */
  select: (id: string) => void;
}

export class LatestTiles {
  private readonly items = new Map<string, HTMLLIElement>();

  constructor(
    private readonly list: HTMLElement,
    private readonly ctx: LatestContext,
  ) {}

  render(): void {
    const now = Date.now();
    const qq = this.ctx.quantity();
    const devices = this.ctx.devices();
    const latest = this.ctx.latest;
    const selected = this.ctx.selected();
    const keep = new Set(devices.map((d) => d.id));
    for (const [id, li] of this.items)
      if (!keep.has(id)) {
        li.remove();
        this.items.delete(id);
      }
    const sorted = [...devices].sort((a, b) => (latest.get(b.id)?.ts ?? 0) - (latest.get(a.id)?.ts ?? 0) || a.id.localeCompare(b.id));
    for (const d of sorted) {
      let li = this.items.get(d.id);
      if (!li) {
        const btn = el('button', { type: 'button', class: 'tile', 'aria-label': '' });
        btn.addEventListener('click', () => this.ctx.select(d.id));
        li = el('li', { 'data-id': d.id }, btn);
        this.items.set(d.id, li);
      }
      const l = latest.get(d.id);
      const btn = li.firstChild as HTMLButtonElement;
      const value = fmtValue(valueAt(l?.obs, qq.path), qq);
      const st = deviceState(l, this.ctx.kits.get(d.id), now);
      btn.replaceChildren(
        el('span', { class: 'mono' }, labelOf(d, d.id)),
        el('strong', { class: 'val' }, value),
        el('span', { class: 'muted age', title: l ? `${fmtTime(l.ts)} ${zoneLabel(l.ts)}` : '' }, l ? fmtAge(l.ts, now) : 'no readings'),
        el('span', { class: `state ${st.key}` }, st.text),
      );
      // Active alarms of the device (web/src/alarms.ts).
      const alarmCount = alarmBadge(d.id);
      if (alarmCount) btn.append(el('span', { class: 'alarm-badge' }, `${alarmCount} alarm${alarmCount > 1 ? 's' : ''}`));
      btn.setAttribute(
        'aria-label',
        `Device ${d.id}: ${l ? `${qq.name} ${value}, ${fmtAge(l.ts, now)}` : 'no readings'}; ${st.text}${alarmCount ? `; ${alarmCount} active alarm${alarmCount > 1 ? 's' : ''}` : ''}. Plot it.`,
      );
      btn.dataset.state = st.key;
      btn.classList.toggle('stale', !!l && isStale(l, now));
      btn.setAttribute('aria-pressed', String(selected.includes(d.id)));
    }
    const order = sorted.map((d) => this.items.get(d.id)!);
    const have = [...this.list.children];
    if (have.length !== order.length || have.some((c, i) => c !== order[i])) {
      // Keep the focused tile where it is: reorder only when focus is outside the list.
      if (!this.list.contains(document.activeElement)) this.list.replaceChildren(...order);
    }
  }

  /** The ages and states as of `now`, only text that changed touched. */
  tick(now: number): void {
    for (const [id, li] of this.items) {
      const l = this.ctx.latest.get(id);
      if (!l) continue;
      const age = li.querySelector('.age');
      const text = fmtAge(l.ts, now);
      if (age && age.textContent !== text) age.textContent = text;
      const st = deviceState(l, this.ctx.kits.get(id), now);
      const s = li.querySelector('.state');
      if (s && s.textContent !== st.text) {
        s.textContent = st.text;
        s.className = `state ${st.key}`;
        (li.firstChild as HTMLElement).dataset.state = st.key;
        (li.firstChild as HTMLElement).classList.toggle('stale', isStale(l, now));
      }
    }
  }
}
