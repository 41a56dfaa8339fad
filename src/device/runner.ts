// One kit across resets: what survives a reboot of the software kit (its saved preferences, the
// firmware image loaded through the diagnostic port) and what a reboot does — stop every part,
// build the kit again from the start-up configuration plus the preferences and the new firmware,
// start it on the same UDP port (the kit then announces its new prefix and boot time to its
// gateway, seed §9). The diagnostic console (src/device/console.ts) drives it.
import fs from 'node:fs';
import { DeviceConfig } from './config.ts';
import { FirmwareImage, loadPrefs, Preferences, prefsPath, savePrefs } from './firmware.ts';
import { DiagConsole } from './console.ts';
import { Kit, KitOptions } from './kit.ts';

export class KitRunner {
  kit: Kit;
  /** What the next reset runs with: the start-up configuration, saved preferences, `set` values. */
  running: DeviceConfig;
  pendingImage: FirmwareImage | undefined;
  readonly prefsFile: string | undefined;
  /** The UDP port the kit got at its first start: a reboot keeps it even when the configuration says 0. */
  private boundPort: number | undefined;

  constructor(
    readonly base: DeviceConfig,
    private readonly o: KitOptions = {},
  ) {
    this.prefsFile = base.stateDir ? prefsPath(base.stateDir, base.mac) : undefined;
    this.running = this.prefsFile ? withPrefs(base, loadPrefs(this.prefsFile)) : { ...base };
    this.kit = new Kit(this.running, o);
  }

  console: DiagConsole | undefined;

  async start(): Promise<void> {
    await this.kit.start();
    this.boundPort ??= this.kit.address().port;
    // The diagnostic port belongs to the module's board, not to one run of the kit: it stays open across reboots.
    if (this.base.diag && !this.console) this.console = DiagConsole.open(this.base.diag, this);
  }

  async stop(): Promise<void> {
    this.console?.close();
    this.console = undefined;
    await this.kit.stop();
  }

  /** The values `save` writes: the running ones that differ from the start-up configuration, and the firmware. */
  preferences(): Preferences {
    const r = this.running;
    return {
      mac: r.mac,
      firmware: r.firmware,
      gateway: r.gateway ?? null,
      meshDomain: r.meshDomain,
      logLevel: r.logLevel,
      periodMs: r.periodMs,
      maxAgeSec: r.maxAgeSec,
    };
  }

  /** Writes the preferences file; returns its path. Throws when the kit has no state directory. */
  save(): string {
    if (!this.prefsFile) throw new Error('no state directory: start the kit with --state-dir DIR to keep preferences');
    savePrefs(this.prefsFile, this.preferences());
    return this.prefsFile;
  }

  /** Erases the saved preferences (the next reset runs with the start-up configuration). */
  clear(): boolean {
    if (!this.prefsFile) throw new Error('no state directory: start the kit with --state-dir DIR to keep preferences');
    try {
      fs.unlinkSync(this.prefsFile);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Reset: a loaded image becomes the firmware (kept in the preferences, so a later restart keeps
   * it), the kit is built again and starts on the same port.
   */
  async reboot(): Promise<void> {
    if (this.pendingImage) {
      this.running = { ...this.running, firmware: this.pendingImage.version };
      this.pendingImage = undefined;
      if (this.prefsFile) savePrefs(this.prefsFile, { ...safeLoad(this.prefsFile), firmware: this.running.firmware });
    }
    await this.kit.stop();
    const port = this.base.port === 0 ? (this.boundPort ?? 0) : this.running.port;
    this.kit = new Kit({ ...this.running, port }, this.o);
    await this.start();
  }
}

/** The start-up configuration with saved preferences applied (each only when present). */
export function withPrefs(c: DeviceConfig, p: Preferences): DeviceConfig {
  const out = { ...c };
  if (typeof p.mac === 'string' && /^[0-9a-f]{16}$/.test(p.mac)) out.mac = p.mac;
  if (typeof p.firmware === 'string' && /^\d+\.\d+\.\d+\.\d+$/.test(p.firmware)) out.firmware = p.firmware;
  if (p.gateway === null) out.gateway = undefined;
  else if (p.gateway && typeof p.gateway.address === 'string' && Number.isInteger(p.gateway.port)) out.gateway = { address: p.gateway.address, port: p.gateway.port };
  if (typeof p.meshDomain === 'string' && p.meshDomain) out.meshDomain = p.meshDomain;
  if (Number.isInteger(p.logLevel) && p.logLevel! >= 0 && p.logLevel! <= 7) out.logLevel = p.logLevel!;
  if (Number.isInteger(p.periodMs) && p.periodMs! >= 10) out.periodMs = p.periodMs!;
  if (Number.isInteger(p.maxAgeSec) && p.maxAgeSec! >= 0) out.maxAgeSec = p.maxAgeSec!;
  return out;
}

function safeLoad(file: string): Preferences {
  try {
    return loadPrefs(file);
  } catch {
    return {};
  }
}
