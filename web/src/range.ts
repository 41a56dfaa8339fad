// The plot's time range: a preset (the last 15 minutes … 30 days, moving on with the clock) or a
// custom from–to, and its controls — the preset buttons (the pressed one is the range) and the
// Custom form, which refuses a start that is not before its end, beside the form.
import { $, fromInput, toInput } from './format.ts';

export type Preset = '15m' | '1h' | '6h' | '24h' | '7d' | '30d';
export const PRESET_SECONDS: Record<Preset, number> = { '15m': 900, '1h': 3600, '6h': 6 * 3600, '24h': 86400, '7d': 7 * 86400, '30d': 30 * 86400 };
export const isPreset = (v: string | null | undefined): v is Preset => !!v && v in PRESET_SECONDS;
export type Range = { preset: Preset } | { from: number; to: number };

/** The range's window in epoch seconds; a preset's ends now. */
export function rangeWindow(range: Range, nowMs = Date.now()): [number, number] {
  if ('preset' in range) {
    const now = nowMs / 1000;
    return [now - PRESET_SECONDS[range.preset], now];
  }
  return [range.from / 1000, range.to / 1000];
}

export interface RangeContext {
  get: () => Range;
  set: (r: Range) => void;
  /** The range changed by the user: load the plot again. */
  changed: () => void;
}

/** Wires the preset buttons and the Custom form; the returned function marks the current range on them. */
export function installRangeControls(ctx: RangeContext): () => void {
  const custom = $('custom') as HTMLDetailsElement;
  const mark = () => {
    const range = ctx.get();
    for (const b of document.querySelectorAll<HTMLButtonElement>('[data-range]')) {
      b.setAttribute('aria-pressed', String('preset' in range && range.preset === b.dataset.range));
    }
    custom.classList.toggle('active', !('preset' in range));
  };
  for (const b of document.querySelectorAll<HTMLButtonElement>('[data-range]')) {
    b.addEventListener('click', () => {
      if (!isPreset(b.dataset.range)) return;
      ctx.set({ preset: b.dataset.range });
      localStorage.setItem('reef.range', b.dataset.range);
      mark();
      ctx.changed();
    });
  }
  const fromIn = $('from') as HTMLInputElement;
  const toIn = $('to') as HTMLInputElement;
  custom.addEventListener('toggle', () => {
    if (!fromIn.value) {
      const [a, b] = rangeWindow(ctx.get());
      fromIn.value = toInput(a * 1000);
      toIn.value = toInput(b * 1000);
    }
  });
  $('custom-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const from = fromInput(fromIn.value);
    const to = fromInput(toIn.value);
    const err = $('custom-error');
    const bad = !Number.isFinite(from) || !Number.isFinite(to) || from >= to;
    err.textContent = bad ? 'The custom range needs a start before its end.' : '';
    err.hidden = !bad;
    if (bad) {
      fromIn.focus();
      return;
    }
    ctx.set({ from, to });
    custom.open = false;
    mark();
    ctx.changed();
  });
  return mark;
}
