// What the gateway does for the kits themselves, as opposed to clients (docs/coap.md "Readings into
// the platform", "Kit clocks"): their announcements (checked in announcements.ts), after which a kit
// is (re-)observed; their own NON messages (the time PUT, seed §4.4, and the reboot event); the
// readings bridge, one observation of each reachable kit's temperature and added sensors; and
// setting a kit's clock right when the clock keeper (clock.ts) says it is off.
import type { Logger } from 'pino';
import { Code, ContentFormat, codeToString, decodeTimeTlv, encodeTimeTlv, getUintOption, Option, uintOption, uriQuery, ACK, type CoapMessage, type Peer, type ResponseSpec } from '../coap/index.ts';
import type { Announcements } from './announcements.ts';
import type { ClockKeeper } from './clock.ts';
import type { KitRequest } from './forward.ts';
import { TEMP_PATH } from './kit-readings.ts';
import type { KitDirectory, KitEntry } from './kits.ts';
import type { ObserveRelay } from './observe-relay.ts';

export interface KitMessagesDeps {
  kits: KitDirectory;
  announcements: Announcements;
  relay: ObserveRelay;
  clock: ClockKeeper;
  log: Logger;
  stats: { clockReports: number; clockSets: number };
  /** Sends one request to a kit under the application deadline (forward.ts). */
  forward(kit: KitEntry, r: KitRequest): Promise<CoapMessage>;
  stopping(): boolean;
  /** Learn kits from their announcements. */
  learnKits: boolean;
  /** Keep an observation of every reachable kit's readings. */
  readings: boolean;
}

const EMPTY: CoapMessage = { type: ACK, code: 0, mid: 0, token: Buffer.alloc(0), options: [], payload: Buffer.alloc(0) };

export class KitMessages {
  constructor(private readonly d: KitMessagesDeps) {}

  /** A kit announcement (src/gateway/announcements.ts); once answered, the kit is (re-)observed. */
  async onAnnouncement(req: CoapMessage, peer: Peer): Promise<ResponseSpec | undefined> {
    if (!this.d.learnKits) return undefined;
    const r = await this.d.announcements.receive(req, peer);
    if (!r || this.d.stopping()) return undefined;
    const { outcome, entry } = r;
    // After the answer has left: it tells the kit the port our requests come from (a kit answers
    // only its gateway, docs/device.md), so a request sent before it would be dropped. A kit that is
    // 'new' to the directory may be one it forgot after its announcements stopped (src/gateway/kits.ts):
    // it restarted meanwhile and lost its observers, while the bridge's observation of its previous
    // run still counts as active; left to the quiet check, its readings would stop for minutes.
    setImmediate(() => {
      if (this.d.stopping()) return;
      if (outcome === 'moved' || outcome === 'rebooted' || outcome === 'new') this.kitRestarted(entry);
      else this.ensureBridge(entry);
    });
    return r.answer;
  }

  /** A kit that restarted or moved lost its observers: every upstream of it registers again. */
  private kitRestarted(kit: KitEntry): void {
    this.d.relay.kitRestarted(kit.mac);
    this.ensureBridge(kit);
  }

  /** The readings bridge: one observation of the kit's temperature, held while the kit is reachable. */
  ensureBridge(kit: KitEntry): void {
    if (!this.d.readings || this.d.stopping()) return;
    // The temperature, and every added sensor the kit announced (each stored as its own field).
    const targets: { path: string[]; sensor?: string }[] = [{ path: TEMP_PATH }, ...kit.sensors.map((s) => ({ path: s.path.split('/'), sensor: s.type }))];
    for (const t of targets) {
      const up = this.d.relay.upstream(kit, [kit.prefix, ...t.path], ['sens'], undefined);
      up.bridge = true;
      if (t.sensor) up.sensor = t.sensor;
      // A registration that went quiet (the kit lost it without rebooting): register again.
      const quietMs = 3 * Math.max(kit.periodMs === Number.POSITIVE_INFINITY ? 0 : kit.periodMs, (getUintOption(up.latest?.msg ?? EMPTY, Option.MAX_AGE) ?? 60) * 1000);
      if (up.state === 'active' && Date.now() - up.lastNotified > quietMs) this.d.relay.register(up);
    }
  }

  /** A PUT from a known kit's address: its clock report or its reboot event. */
  onKitMessage(kit: KitEntry, req: CoapMessage, path: string[]): void {
    const q = uriQuery(req);
    if (path.join('/') === 'sensor/arduino/time' || path.join('/') === 'snsr/arduino/time') {
      // The kit's own time PUT (seed §4.4): recorded, and the clock set right when it is off.
      let t: number;
      try {
        t = decodeTimeTlv(req.payload);
      } catch {
        return;
      }
      this.d.stats.clockReports++;
      this.d.clock.report(kit.mac, t, 'time-put');
      return;
    }
    if (path.join('/') === 'sys/snsr' && q.includes('ev=rbt')) {
      this.d.log.info({ mac: kit.mac }, 'gateway: kit rebooted');
      this.kitRestarted(kit);
    }
  }

  /** Sets a kit's clock to ours (the clock keeper's call); true when the kit took it. */
  async setKitClock(mac: string): Promise<boolean> {
    const kit = this.d.kits.get(mac);
    if (!kit) return false;
    this.d.stats.clockSets++;
    try {
      const m = await this.d.forward(kit, {
        method: Code.PUT,
        path: [kit.prefix, 'system', 'time'],
        query: [],
        options: [uintOption(Option.CONTENT_FORMAT, ContentFormat.OCTET_STREAM)],
        payload: encodeTimeTlv(Date.now()),
      });
      const ok = m.code === Code.CHANGED;
      this.d.log.info({ mac, ok, code: codeToString(m.code) }, 'gateway set a kit clock');
      return ok;
    } catch {
      return false;
    }
  }
}
