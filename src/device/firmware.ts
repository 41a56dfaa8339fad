// What the module's diagnostic port works on (seed §4.4, §8): firmware images and saved preferences.
//
// A firmware image is a text file, so it crosses a serial console as it is (`cat image >` the pty):
//   REEF-KIT-FIRMWARE 1
//   version 1.2.1000.112738
//   sha256 <64 hex: SHA-256 of the decoded body>
//   <body, base64, lines of up to 76 characters>
//   end
// The version decides the module's prefix after the reboot (seed §9). `reef device --firmware-image
// VERSION` writes one.
//
// Preferences are a small JSON file per kit, `<state dir>/<mac>.json` (mode 0600), written by the
// console's `save` and by a firmware update, read at every start: the values survive a restart.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export const IMAGE_MAGIC = 'REEF-KIT-FIRMWARE 1';
export const IMAGE_END = 'end';
const VERSION = /^\d+\.\d+\.\d+\.\d+$/;

export interface FirmwareImage {
  version: string;
  body: Buffer;
}

/** The image text for a version (the body is any bytes: the software kit only keeps its digest). */
export function firmwareImage(version: string, body: Buffer = Buffer.from(`reef kit module firmware ${version}\n`)): string {
  if (!VERSION.test(version)) throw new Error(`a firmware version looks like 1.2.1000.117958, not ${JSON.stringify(version)}`);
  const b64 = body.toString('base64').match(/.{1,76}/g) ?? [];
  return [IMAGE_MAGIC, `version ${version}`, `sha256 ${createHash('sha256').update(body).digest('hex')}`, ...b64, IMAGE_END, ''].join('\n');
}

/** Checks an image received line by line (without the `end` line); throws Error naming what is wrong. */
export function parseFirmwareImage(lines: string[]): FirmwareImage {
  if (lines[0] !== IMAGE_MAGIC) throw new Error(`not a firmware image: the first line must be "${IMAGE_MAGIC}"`);
  const v = /^version (\S+)$/.exec(lines[1] ?? '');
  if (!v || !VERSION.test(v[1]!)) throw new Error('the second line must be "version 1.2.1000.<build>"');
  const d = /^sha256 ([0-9a-f]{64})$/.exec(lines[2] ?? '');
  if (!d) throw new Error('the third line must be "sha256 <64 hex digits>"');
  const b64 = lines.slice(3).join('');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64)) throw new Error('the body is not base64');
  const body = Buffer.from(b64, 'base64');
  if (createHash('sha256').update(body).digest('hex') !== d[1]) throw new Error('the body does not match its sha256: the transfer was damaged');
  return { version: v[1]!, body };
}

/** Saved system variables (all optional: only what was saved overrides the start-up configuration). */
export interface Preferences {
  mac?: string;
  firmware?: string;
  gateway?: { address: string; port: number } | null;
  meshDomain?: string;
  logLevel?: number;
  periodMs?: number;
  maxAgeSec?: number;
}

export function prefsPath(stateDir: string, mac: string): string {
  return path.join(stateDir, `${mac}.json`);
}

/** The saved preferences, or {} when there are none; a damaged file is reported, not trusted. */
export function loadPrefs(file: string): Preferences {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw e;
  }
  const o = JSON.parse(text) as unknown;
  if (!o || typeof o !== 'object' || Array.isArray(o)) throw new Error(`${file} is not a preferences object`);
  return o as Preferences;
}

/** Writes the preferences atomically (a temporary file renamed over the old one), mode 0600. */
export function savePrefs(file: string, p: Preferences): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(p, null, 2) + '\n', { mode: 0o600 });
  fs.renameSync(tmp, file);
}
