// The kit announcement (docs/device.md "Announcement"): how a network module tells a gateway that a
// kit exists and where its CoAP port is. A NON `POST /kits` to the configured gateway address, sent
// from the kit's own CoAP socket, content-format 50 (application/json), payload:
//   {"v":1,"mac":"<16 lower-case hex>","host":"127.0.0.1","port":4849,"prefix":"snsr",
//    "fw":"1.2.1000.117958","cf":0,"seq":3,"boot":1700000000,"period":60}
// repeated every `period` seconds so that a restarted gateway relearns every kit. Fields: v format
// version (1); mac the kit's MAC; host/port the module's CoAP address as bound; prefix the first
// Uri-Path segment the module accepts (`snsr`/`sensor`, seed §9); fw the module firmware version;
// cf the content-format of readings (0 text, 60 CBOR); seq counts announcements since boot (0 first);
// boot the kit's boot time in epoch seconds (a new value means the kit restarted); period the
// announcement interval in seconds (a gateway may forget a kit after missing ~3 of them).
//
// Authentication (docs/security.md "Kits"): every announcement carries `sig`, the HMAC-SHA256 of the
// canonical payload (the fields above, in this order, as JSON) under the kit's own 32-byte key,
// issued at provisioning. The signed host and port must be where the datagram comes from, so a
// captured announcement replayed from any other address is refused, and a host that does not own
// the key cannot announce a MAC at all.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Code } from './codes.ts';
import { CoapMessage, CoapOption, getUintOption, NON, uintOption, uriPath } from './message.ts';
import { ContentFormat, Option } from './options.ts';
import { stringOption } from './message.ts';

export const ANNOUNCE_PATH = ['kits'] as const;
export const ANNOUNCE_VERSION = 1;

export interface Announcement {
  v: 1;
  mac: string;
  host: string;
  port: number;
  prefix: 'snsr' | 'sensor';
  fw: string;
  cf: number;
  seq: number;
  boot: number;
  period: number;
  /**
   * Added sensors the kit serves (src/device/sensors.ts): type name and path after the prefix.
   * Present only when the kit has some, so a kit without added sensors signs what it always did.
   */
  sensors?: AnnouncedSensor[];
  /** HMAC-SHA256 of the canonical payload under the kit key, base64url (43 characters). */
  sig?: string;
}

export interface AnnouncedSensor {
  type: string;
  path: string;
}

/** At most this many added sensors per kit; type names and paths as src/device/sensors.ts allows. */
export const MAX_ANNOUNCED_SENSORS = 16;
const SENSOR_TYPE = /^[a-z][a-z0-9_]{0,31}$/;
const SENSOR_PATH = /^[A-Za-z0-9._~-]{1,32}(\/[A-Za-z0-9._~-]{1,32}){0,3}$/;

/** A kit key: 32 bytes, written as 64 hex digits (what `reef provision` prints). */
export const KIT_KEY_BYTES = 32;

/** Parses a kit key as printed by `reef provision` (64 hex digits); null when it is not one. */
export function parseKitKey(s: string): Buffer | null {
  const t = s.trim().toLowerCase();
  return /^[0-9a-f]{64}$/.test(t) ? Buffer.from(t, 'hex') : null;
}

export class AnnouncementError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AnnouncementError';
  }
}

/** The signed part of an announcement: its fields in a fixed order, without `sig`. */
function canonical(a: Announcement): string {
  const { v, mac, host, port, prefix, fw, cf, seq, boot, period, sensors } = a;
  if (sensors === undefined) return JSON.stringify({ v, mac, host, port, prefix, fw, cf, seq, boot, period });
  return JSON.stringify({ v, mac, host, port, prefix, fw, cf, seq, boot, period, sensors: sensors.map((x) => ({ type: x.type, path: x.path })) });
}

function signature(a: Announcement, key: Buffer): Buffer {
  return createHmac('sha256', key).update(canonical(a)).digest();
}

/** The announcement with its `sig` under the kit key. */
export function signAnnouncement(a: Announcement, key: Buffer): Announcement {
  return { ...a, sig: signature(a, key).toString('base64url') };
}

/**
 * True when `sig` is the announcement's HMAC under `key`, compared in constant time. A gateway that
 * has no key for the MAC passes a throw-away key, so unknown and known MACs cost the same work.
 */
export function verifyAnnouncement(a: Announcement, key: Buffer): boolean {
  if (typeof a.sig !== 'string') return false;
  const got = Buffer.from(a.sig, 'base64url');
  const want = signature(a, key);
  return got.length === want.length && timingSafeEqual(got, want);
}

export function encodeAnnouncement(a: Announcement): Buffer {
  const body = canonical(a);
  return Buffer.from(a.sig === undefined ? body : `${body.slice(0, -1)},"sig":${JSON.stringify(a.sig)}}`, 'utf8');
}

/** Validates and decodes an announcement payload; throws AnnouncementError naming every bad field. */
export function decodeAnnouncement(payload: Uint8Array): Announcement {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(Buffer.from(payload).toString('utf8'));
  } catch {
    throw new AnnouncementError('announcement is not JSON');
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new AnnouncementError('announcement is not a JSON object');
  const bad: string[] = [];
  const int = (k: string, min: number, max: number): void => {
    const x = o[k];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < min || x > max) bad.push(k);
  };
  if (o.v !== ANNOUNCE_VERSION) bad.push('v');
  if (typeof o.mac !== 'string' || !/^[0-9a-f]{16}$/.test(o.mac)) bad.push('mac');
  if (typeof o.host !== 'string' || o.host.length === 0 || o.host.length > 255) bad.push('host');
  int('port', 1, 65535);
  if (o.prefix !== 'snsr' && o.prefix !== 'sensor') bad.push('prefix');
  if (typeof o.fw !== 'string' || !/^\d+\.\d+\.\d+\.\d+$/.test(o.fw)) bad.push('fw');
  int('cf', 0, 65535);
  int('seq', 0, Number.MAX_SAFE_INTEGER);
  int('boot', 0, 0xffffffff);
  int('period', 1, 0xffffffff);
  if (
    o.sensors !== undefined &&
    (!Array.isArray(o.sensors) ||
      o.sensors.length > MAX_ANNOUNCED_SENSORS ||
      !o.sensors.every((x: unknown) => {
        const e = x as Record<string, unknown>;
        return typeof e === 'object' && e !== null && typeof e.type === 'string' && SENSOR_TYPE.test(e.type) && typeof e.path === 'string' && SENSOR_PATH.test(e.path);
      }))
  )
    bad.push('sensors');
  if (o.sig !== undefined && (typeof o.sig !== 'string' || !/^[A-Za-z0-9_-]{43}$/.test(o.sig))) bad.push('sig');
  if (bad.length) throw new AnnouncementError(`announcement fields invalid: ${bad.join(', ')}`);
  return o as unknown as Announcement;
}

/** The options of an announcement request: Uri-Path `kits`, Content-Format JSON. */
export function announcementOptions(): CoapOption[] {
  return [...ANNOUNCE_PATH.map((s) => stringOption(Option.URI_PATH, s)), uintOption(Option.CONTENT_FORMAT, ContentFormat.JSON)];
}

/** The NON POST /kits message carrying an announcement (the caller sets mid and token). */
export function announcementMessage(a: Announcement, mid: number, token: Buffer): CoapMessage {
  return { type: NON, code: Code.POST, mid, token, options: announcementOptions(), payload: encodeAnnouncement(a) };
}

/** True when a request is an announcement (POST /kits); a gateway then calls decodeAnnouncement. */
export function isAnnouncement(m: CoapMessage): boolean {
  const p = uriPath(m);
  return m.code === Code.POST && p.length === 1 && p[0] === ANNOUNCE_PATH[0] && (getUintOption(m, Option.CONTENT_FORMAT) ?? ContentFormat.JSON) === ContentFormat.JSON;
}

/**
 * The gateway's answer to an accepted announcement: 2.04 with the JSON payload
 * `{"seq":<the announcement's seq>,"from":<port>,"sig":"<base64url>"}`. `from` is the UDP port the
 * gateway's requests to kits come from (its kit-facing socket, not the port announcements go to);
 * a kit that answers only its gateway (seed §5) answers that port of the gateway's address and
 * nothing else. `sig` is the HMAC-SHA256 under the kit key of `ack|<mac>|<seq>|<from>`, so nobody
 * without the key can point a kit at another port, and an old answer does not fit a new `seq`.
 */
export interface AnnouncementAck {
  seq: number;
  from: number;
}

function ackSignature(mac: string, ack: AnnouncementAck, key: Buffer): Buffer {
  return createHmac('sha256', key).update(`ack|${mac}|${ack.seq}|${ack.from}`).digest();
}

export function encodeAnnouncementAck(mac: string, ack: AnnouncementAck, key: Buffer): Buffer {
  return Buffer.from(JSON.stringify({ seq: ack.seq, from: ack.from, sig: ackSignature(mac, ack, key).toString('base64url') }), 'utf8');
}

/** The ack in `payload` when it is well formed, answers announcement `seq` and is signed with `key`; else undefined. */
export function verifyAnnouncementAck(payload: Uint8Array, mac: string, seq: number, key: Buffer): AnnouncementAck | undefined {
  let o: unknown;
  try {
    o = JSON.parse(Buffer.from(payload).toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof o !== 'object' || o === null) return undefined;
  const { seq: s, from, sig } = o as Record<string, unknown>;
  if (s !== seq || typeof from !== 'number' || !Number.isInteger(from) || from < 1 || from > 65535 || typeof sig !== 'string') return undefined;
  const got = Buffer.from(sig, 'base64url');
  const want = ackSignature(mac, { seq, from }, key);
  return got.length === want.length && timingSafeEqual(got, want) ? { seq, from } : undefined;
}
