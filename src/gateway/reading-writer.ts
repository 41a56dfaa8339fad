// The readings bridge's way into the store (docs/coap.md "Readings into the platform"): each kit
// reading gets its receipt stamp, then waits a few milliseconds to go to the store with the readings
// of every other kit that notified meanwhile, in one write.
import type { Logger } from 'pino';
import type { DeviceRecord, ObservationRecord } from '../core/types.ts';
import { batchOf } from '../core/observation-batch.ts';
import type { EventBus } from '../events/bus.ts';
import { storeObservationsMany, type ObservationQuota } from '../service/observations.ts';
import type { Store } from '../store/store.ts';

/** How long readings gather before they are written together (at most ~50 store commits a second). */
const READINGS_GATHER_MS = 20;

/** A reading on its way to the store, with the kit's device record. */
export interface PendingReading {
  device: DeviceRecord;
  record: ObservationRecord;
  mac: string;
  /** The added sensor's type, for an added sensor's reading. */
  sensor?: string;
  /** Called once the write that held this reading is over, stored or not (see kit-readings.ts). */
  written?: () => void;
}

/** The gateway's counters the writer keeps. */
export interface ReadingCounters {
  readingsStored: number;
  sensorReadingsStored: number;
  storeErrors: number;
}

export class ReadingWriter {
  /** The last reading timestamp per kit MAC (see stamp()). */
  private readonly lastStamp = new Map<string, number>();
  /** Readings waiting for the store's next write (see queue()). */
  private pending: PendingReading[] = [];
  private scheduled = false;
  /** The store write in progress, if any. */
  private flushing: Promise<void> | undefined;

  /** `quota`: the owners' observation quotas; readings past a kit owner's quota are not stored. */
  constructor(private readonly d: { store: Store; events: EventBus | null; log: Logger; stats: ReadingCounters; quota?: ObservationQuota }) {}

  /**
   * The receive time of a kit's reading, one millisecond past the kit's previous one when they
   * collide: a kit notifies its temperature and its added sensors in the same tick, and a device's
   * observations are keyed by timestamp (a second one in the same millisecond would replace the first).
   * Never a whole second: that is where a temperature reading is stored (the kit's own reading
   * second), so an added sensor's reading cannot replace it.
   */
  stamp(mac: string): number {
    const now = Date.now();
    const last = this.lastStamp.get(mac) ?? 0;
    let t = now > last ? now : last + 1;
    if (t % 1000 === 0) t++;
    this.lastStamp.set(mac, t);
    return t;
  }

  /**
   * Readings gather for READINGS_GATHER_MS and go to the store together, one write (one commit on
   * SQLite) for all the kits that notified meanwhile, instead of one commit each: a thousand kits a
   * second would otherwise ask a thousand fsyncs a second of the disk, each one holding up the
   * relaying of the next notifications (the SQLite store writes synchronously). While one write is
   * in progress the next readings gather for the one after it.
   */
  queue(p: PendingReading): void {
    this.pending.push(p);
    if (this.scheduled || this.flushing) return;
    this.scheduled = true;
    setTimeout(() => {
      this.scheduled = false;
      void this.flush();
    }, READINGS_GATHER_MS);
  }

  /** Writes what is waiting now (and what arrives meanwhile); resolves when it is written. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    this.flushing = this.write().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private async write(): Promise<void> {
    while (this.pending.length > 0) {
      const items = this.pending.splice(0, 2000);
      try {
        const missing = new Set(
          await storeObservationsMany(
            this.d.store,
            this.d.events,
            items.map((i) => ({ device: i.device, batch: batchOf([i.record]) })),
            this.d.quota,
            'gateway',
          ),
        );
        for (const i of items) {
          if (missing.has(i.device.id)) continue;
          this.d.stats.readingsStored++;
          if (i.sensor) this.d.stats.sensorReadingsStored++;
        }
      } catch (e) {
        this.d.stats.storeErrors += items.length;
        this.d.log.warn({ err: e, readings: items.length, mac: items[0]?.mac }, 'gateway could not store readings');
      }
      for (const i of items) i.written?.();
    }
  }
}
