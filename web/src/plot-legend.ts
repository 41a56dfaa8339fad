// The plot's legend: each plotted device in its colour, with the last, min, max and average of what
// is visible (it follows zoom and Live), like a dashboard's legend table.
import { fmtValue, type Quantity } from './fields.ts';
import { el } from './format.ts';
import { PALETTE } from './plot.ts';

export interface LegendStats {
  deviceId: string;
  last: number | null;
  min: number | null;
  max: number | null;
  avg: number | null;
}

/** Fills `box` with one item per device of `ids` (in plot order: the palette's colours). */
export function renderLegend(box: HTMLElement, ids: string[], stats: LegendStats[], q: Quantity, describe: (id: string) => { label: string; type: string }): void {
  const byId = new Map(stats.map((x) => [x.deviceId, x]));
  box.replaceChildren(
    ...ids.map((id, i) => {
      const st = byId.get(id);
      const fig = (name: string, v: number | null | undefined) => el('span', { class: 'stat', 'data-stat': name }, `${name} `, el('strong', {}, fmtValue(v ?? null, q)));
      const d = describe(id);
      return el(
        'li',
        { 'data-id': id },
        el('span', { class: 'swatch', style: `background:${PALETTE[i % PALETTE.length]}` }),
        `${d.label} `,
        el('span', { class: 'muted' }, d.type),
        el('span', { class: 'stats' }, fig('last', st?.last), fig('min', st?.min), fig('max', st?.max), fig('avg', st?.avg)),
      );
    }),
  );
}
