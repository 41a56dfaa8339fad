// The reading grid of a simulation. Device i reports at k·interval + phase(i) for whole k: the
// grid is fixed by (devices, interval) alone, so a resumed or re-run simulation lands on exactly
// the timestamps it used before and never writes a second reading next to the first.
//
// Devices are spread over `slots` phases one second apart (10 slots for a 10 s interval), so a
// fleet reports a slice every second instead of all at once: steady load, small bursts.

export interface Grid {
  intervalMs: number;
  devices: number;
  slots: number;
}

export function makeGrid(devices: number, intervalMs: number): Grid {
  return { intervalMs, devices, slots: Math.max(1, Math.min(devices, Math.floor(intervalMs / 1000))) };
}

export function slotOf(g: Grid, index: number): number {
  return index % g.slots;
}

/** Offset of a slot's readings within each interval, ms. */
export function phaseOf(g: Grid, slot: number): number {
  return Math.floor((slot * g.intervalMs) / g.slots);
}

/** Devices in a slot: indices slot, slot + slots, slot + 2·slots... below devices. */
export function devicesInSlot(g: Grid, slot: number): number {
  return slot >= g.devices ? 0 : Math.floor((g.devices - 1 - slot) / g.slots) + 1;
}

/** The first grid time of a device with this phase at or after t. */
export function firstAtOrAfter(g: Grid, phase: number, t: number): number {
  return Math.ceil((t - phase) / g.intervalMs) * g.intervalMs + phase;
}

/** How many readings a device with this phase makes in [from, to). */
export function countIn(g: Grid, phase: number, from: number, to: number): number {
  if (to <= from) return 0;
  return Math.max(0, Math.ceil((to - phase) / g.intervalMs) - Math.ceil((from - phase) / g.intervalMs));
}

/** Readings of the whole fleet in [from, to), less devices that were removed. */
export function fleetCountIn(g: Grid, from: number, to: number, removed: ReadonlySet<number> = new Set()): number {
  if (to <= from) return 0;
  let n = 0;
  const removedPerSlot = new Map<number, number>();
  for (const i of removed) if (i < g.devices) removedPerSlot.set(slotOf(g, i), (removedPerSlot.get(slotOf(g, i)) ?? 0) + 1);
  // Whole intervals contribute every device once; only the remainder depends on the phases.
  const whole = Math.floor((to - from) / g.intervalMs);
  const live = g.devices - removed.size;
  n += whole * live;
  const restFrom = from + whole * g.intervalMs;
  if (restFrom < to) {
    for (let s = 0; s < g.slots; s++) {
      const c = countIn(g, phaseOf(g, s), restFrom, to);
      if (c) n += c * (devicesInSlot(g, s) - (removedPerSlot.get(s) ?? 0));
    }
  }
  return n;
}

/** The earliest grid time of any slot at or after t. */
export function nextGridTime(g: Grid, t: number): number {
  const base = Math.floor(t / g.intervalMs) * g.intervalMs;
  const r = t - base;
  // phaseOf is non-decreasing in the slot: start near the answer and step.
  let s = Math.min(g.slots - 1, Math.max(0, Math.floor((r * g.slots) / g.intervalMs)));
  while (s > 0 && phaseOf(g, s - 1) >= r) s--;
  while (s < g.slots && phaseOf(g, s) < r) s++;
  return s < g.slots ? base + phaseOf(g, s) : base + g.intervalMs + phaseOf(g, 0);
}
