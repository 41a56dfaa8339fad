// The certificate and key of MQTT over TLS (8883, the port the original's clients use): the broker's
// own files when REEF_MQTT_TLS_CERT / REEF_MQTT_TLS_KEY are set, else the service's HTTPS certificate
// (REEF_TLS_CERT / REEF_TLS_KEY, or REEF_TLS_SELF_SIGNED: src/config/tls.ts), else none (no TLS
// listener). This function is the one place that chooses.
import fs from 'node:fs';
import type { Logger } from 'pino';
import type { Config } from '../config/config.ts';
import { loadTls } from '../config/tls.ts';

export function mqttTlsMaterial(config: Config, log: Logger): { cert: Buffer | string; key: Buffer | string } | null {
  const { tlsCert, tlsKey } = config.mqtt;
  if (tlsCert && tlsKey) {
    // A private key others can read is no longer private (as OpenSSH refuses one): said loudly.
    if ((fs.statSync(tlsKey).mode & 0o004) !== 0) log.warn({ file: tlsKey }, 'the MQTT TLS key file is world-readable: chmod 600 it');
    return { cert: fs.readFileSync(tlsCert), key: fs.readFileSync(tlsKey) };
  }
  // The HTTPS material, read and checked as the HTTP server reads it (a self-signed pair is made once
  // in the data directory and shared).
  const shared = loadTls(
    config.tls,
    config.dataDir,
    [config.mqtt.host].filter((h) => h !== '0.0.0.0' && h !== '::'),
  );
  return shared ? { cert: shared.cert, key: shared.key } : null;
}
