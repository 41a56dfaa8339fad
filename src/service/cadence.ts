// How often each device of a solution reports and when it last did: what a dashboard needs to call
// a device stale the moment it opens, without watching it for a while first. The interval is the
// median gap of the device's newest readings, so one missed reading or one burst does not move it.
import type { Store } from '../store/store.ts';

/** Readings looked at per device: eight gaps, enough for a median that shrugs off a hole. */
export const CADENCE_READINGS = 9;
/** Devices read at once: a solution of thousands is walked a slice at a time. */
const PARALLEL = 16;

/** One device's reporting: its newest reading (ISO 8601) and its usual gap in seconds (null: fewer than two readings). */
export interface DeviceCadence {
  deviceId: string;
  lastSeen: string;
  intervalSeconds: number | null;
}

/** The median of the gaps between consecutive readings, newest first; null without a gap. */
export function medianGap(tsNewestFirst: readonly number[]): number | null {
  const gaps: number[] = [];
  for (let i = 1; i < tsNewestFirst.length; i++) {
    const g = tsNewestFirst[i - 1]! - tsNewestFirst[i]!;
    if (g > 0) gaps.push(g);
  }
  if (!gaps.length) return null;
  gaps.sort((a, b) => a - b);
  const mid = gaps.length >> 1;
  return gaps.length % 2 ? gaps[mid]! : (gaps[mid - 1]! + gaps[mid]!) / 2;
}

/** Every device of the group's solution that has readings: last seen and usual interval. */
export async function solutionCadence(store: Store, groupId: string, solution: string): Promise<DeviceCadence[]> {
  const latest = await store.latestObservations(groupId, solution);
  const out: DeviceCadence[] = new Array(latest.length);
  for (let i = 0; i < latest.length; i += PARALLEL) {
    await Promise.all(
      latest.slice(i, i + PARALLEL).map(async ({ deviceId, observation }, k) => {
        const page = await store.queryObservations(deviceId, { limit: CADENCE_READINGS, to: observation.ts + 1 });
        const gap = medianGap(page.observations.map((o) => o.ts));
        out[i + k] = { deviceId, lastSeen: new Date(observation.ts).toISOString(), intervalSeconds: gap === null ? null : gap / 1000 };
      }),
    );
  }
  return out;
}
