// Kit announcements at the gateway (src/coap/announce.ts; docs/coap.md, docs/security.md "Kits"):
// checked against the kit key of a provisioned MAC and the address they come from, learned into the
// kit directory, and answered with the signed port the gateway's requests to kits come from.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import {
  Code,
  ContentFormat,
  decodeAnnouncement,
  encodeAnnouncementAck,
  Option,
  peerKey,
  uintOption,
  verifyAnnouncement,
  type Announcement,
  type CoapMessage,
  type Peer,
  type ResponseSpec,
} from '../coap/index.ts';
import type { DeviceRecord } from '../core/types.ts';
import type { KitKeyCache } from '../service/kit-keys.ts';
import type { AnnounceOutcome, KitDirectory, KitEntry } from './kits.ts';
import { LogLimiter } from './log-limit.ts';

export interface AnnouncementsDeps {
  kits: KitDirectory;
  kitKeys: KitKeyCache;
  /** The device record of a MAC (the gateway's cached lookup). */
  device(mac: string): Promise<DeviceRecord | null>;
  log: Logger;
  stats: { announcements: number; announcementsRefused: number };
  /** The clock of the log rate limit. */
  now: () => number;
  /** The port of the gateway's kit-facing socket, named in the signed answer. */
  backPort(): number;
  stopping(): boolean;
}

/** Stands in for the key of a MAC that has none, so a refused announcement costs what an accepted one does. */
const THROWAWAY_KEY = randomBytes(32);

export class Announcements {
  /** Refused announcements are logged at most once a minute per source (a replay loop sends many). */
  private readonly refused: LogLimiter;

  constructor(private readonly d: AnnouncementsDeps) {
    this.refused = new LogLimiter(60_000, d.now);
  }

  /**
   * A kit announcement (src/coap/announce.ts). Learned only when it is signed with the kit key of a
   * provisioned MAC and comes from the very address and port it names: an outsider can neither move
   * a kit nor replay a captured announcement from elsewhere. An accepted announcement is answered
   * 2.04 (the kit then knows it is in); anything else gets no answer at all, whether the MAC is
   * unknown, the signature wrong or the payload garbage, after the same work (a throw-away key
   * stands in for a missing one), so silence tells an outsider nothing about which MACs exist.
   */
  async receive(req: CoapMessage, peer: Peer): Promise<{ answer: ResponseSpec; outcome: AnnounceOutcome; entry: KitEntry } | undefined> {
    let ann: Announcement;
    try {
      ann = decodeAnnouncement(req.payload);
    } catch (e) {
      this.d.stats.announcementsRefused++;
      this.d.log.debug({ peer: peerKey(peer), err: (e as Error).message }, 'gateway ignored a bad announcement');
      return undefined;
    }
    let d: DeviceRecord | null;
    let key: Buffer | null;
    try {
      d = await this.d.device(ann.mac);
      key = d ? await this.d.kitKeys.get(ann.mac) : null;
    } catch (e) {
      this.d.log.warn({ err: (e as Error).message }, 'gateway announcement lookup failed');
      return undefined;
    }
    const signed = verifyAnnouncement(ann, key ?? THROWAWAY_KEY);
    if (this.d.stopping()) return undefined;
    if (!d || !key || !signed) {
      this.d.stats.announcementsRefused++;
      // Debug only: a flood of forged announcements must not flood the log either.
      this.d.log.debug({ peer: peerKey(peer), mac: ann.mac, why: !d ? 'not provisioned' : !key ? 'no kit key issued' : 'bad signature' }, 'gateway ignored an announcement');
      return undefined;
    }
    const { outcome, entry } = this.d.kits.announce(ann, peer);
    if (!entry) {
      this.d.stats.announcementsRefused++;
      const suppressed = this.refused.take(peer.address);
      if (suppressed !== undefined) this.d.log.warn({ peer: peerKey(peer), mac: ann.mac, outcome, suppressed }, 'gateway refused an announcement');
      return undefined;
    }
    this.d.stats.announcements++;
    if (outcome !== 'refreshed') this.d.log.info({ mac: entry.mac, at: peerKey(entry.peer), prefix: entry.prefix, outcome }, 'gateway learned a kit');
    const answer: ResponseSpec = {
      code: Code.CHANGED,
      options: [uintOption(Option.CONTENT_FORMAT, ContentFormat.JSON)],
      payload: encodeAnnouncementAck(ann.mac, { seq: ann.seq, from: this.d.backPort() }, key),
    };
    return { answer, outcome, entry };
  }
}
