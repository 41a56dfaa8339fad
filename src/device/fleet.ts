// N kits in one process (`reef device --count N`): kit i has MAC + i and port + i (or an ephemeral
// port each when the base port is 0), each with its own UDP socket and HDLC link.
import fs from 'node:fs';
import { DeviceConfig, loadKitKeys, macPlus } from './config.ts';
import { Kit, KitOptions } from './kit.ts';
import { LogSink } from './log.ts';
import { loadSensorConfig } from './sensors.ts';

export class Fleet {
  readonly kits: Kit[] = [];

  constructor(
    readonly config: DeviceConfig,
    o: { monitor?: LogSink; random?: () => number; onGateway?: KitOptions['onGateway'] } = {},
  ) {
    if (config.serial && config.count > 1) throw new Error('a serial HDLC path serves one kit only');
    const keys = loadKitKeys(config, (f) => fs.readFileSync(f, 'utf8'));
    const sensors = config.sensors ? loadSensorConfig(config.sensors, (f) => fs.readFileSync(f, 'utf8')) : [];
    for (let i = 0; i < config.count; i++) {
      const ko: KitOptions = { index: i, sensors };
      if (o.monitor) ko.monitor = o.monitor;
      if (o.random) ko.random = o.random;
      if (o.onGateway) ko.onGateway = o.onGateway;
      const key = keys.get(macPlus(config.mac, i));
      if (key) ko.key = key;
      this.kits.push(new Kit(config, ko));
    }
  }

  /** Starts every kit, a batch at a time so a large fleet does not open every socket at once. */
  async start(batch = 200): Promise<void> {
    try {
      for (let i = 0; i < this.kits.length; i += batch) await Promise.all(this.kits.slice(i, i + batch).map((k) => k.start()));
    } catch (e) {
      await this.stop();
      throw e;
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.kits.map((k) => k.stop().catch(() => undefined)));
  }
}
