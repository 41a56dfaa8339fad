// Gestures on a plot's time axis: two fingers pinch to zoom around their middle and move to pan
// (one finger still scrolls the page), Shift+drag pans, the wheel zooms around the pointer. Each
// only sets uPlot's x scale; the plot's own hooks (web/src/plot.ts) take it from there.
import type uPlot from 'uplot';

/** Two fingers on `host` pinch and pan the x scale of the plot `plot()` returns (none: nothing). */
export function installPinch(host: HTMLElement, plot: () => uPlot | null | undefined): void {
  let start: { d: number; mid: number; min: number; max: number; width: number; left: number } | null = null;
  const geo = (t: TouchList) => {
    const a = t[0]!,
      b = t[1]!;
    return { d: Math.max(10, Math.abs(a.clientX - b.clientX)), mid: (a.clientX + b.clientX) / 2 };
  };
  host.addEventListener(
    'touchstart',
    (e) => {
      const u = plot();
      if (!u || e.touches.length !== 2) return;
      const { min, max } = u.scales.x as { min: number; max: number };
      const r = u.over.getBoundingClientRect();
      start = { ...geo(e.touches), min, max, width: r.width, left: r.left };
      e.preventDefault();
    },
    { passive: false },
  );
  host.addEventListener(
    'touchmove',
    (e) => {
      const u = plot();
      if (!u || !start || e.touches.length !== 2) return;
      e.preventDefault();
      const now = geo(e.touches);
      const span = Math.max(10, ((start.max - start.min) * start.d) / now.d);
      const frac = Math.min(1, Math.max(0, (start.mid - start.left) / start.width));
      const at = start.min + (start.max - start.min) * frac - ((now.mid - start.mid) / start.width) * span;
      u.setScale('x', { min: at - span * frac, max: at + span * (1 - frac) });
    },
    { passive: false },
  );
  const end = (e: TouchEvent) => {
    if (e.touches.length < 2) start = null;
  };
  host.addEventListener('touchend', end);
  host.addEventListener('touchcancel', end);
}

/** Shift+drag on the plot's area pans its x scale (a plain drag still selects a range to zoom to). */
export function installPan(u: uPlot): void {
  u.over.addEventListener(
    'mousedown',
    (e) => {
      if (!e.shiftKey) return;
      e.stopPropagation();
      e.preventDefault();
      const x0 = e.clientX;
      const { min, max } = u.scales.x as { min: number; max: number };
      const perPx = (max - min) / u.over.clientWidth;
      const move = (m: MouseEvent) => {
        const dt = (m.clientX - x0) * perPx;
        u.setScale('x', { min: min - dt, max: max - dt });
      };
      const up = () => {
        window.removeEventListener('mousemove', move);
        window.removeEventListener('mouseup', up);
      };
      window.addEventListener('mousemove', move);
      window.addEventListener('mouseup', up);
    },
    true,
  );
}

/** The wheel zooms the x scale around the pointer (down: out, up: in). */
export function wheelZoom(u: uPlot, e: WheelEvent): void {
  e.preventDefault();
  const { min, max } = u.scales.x as { min: number; max: number };
  const rect = u.over.getBoundingClientRect();
  const frac = Math.min(1, Math.max(0, (e.clientX - rect.left) / rect.width));
  const at = min + (max - min) * frac;
  const f = e.deltaY > 0 ? 1.25 : 0.8;
  const span = Math.max(10, (max - min) * f);
  u.setScale('x', { min: at - span * frac, max: at + span * (1 - frac) });
}
