// The certificate and key of MQTT over TLS (8883, the port the original's clients use). Read from
// REEF_MQTT_TLS_CERT / REEF_MQTT_TLS_KEY until the HTTPS settings (REEF_TLS_*) exist; this function is
// then the one place to point at them.
import fs from 'node:fs';
import type { Logger } from 'pino';
import type { Config } from '../config/config.ts';

export function mqttTlsMaterial(config: Config, log: Logger): { cert: Buffer; key: Buffer } | null {
  const { tlsCert, tlsKey } = config.mqtt;
  if (!tlsCert || !tlsKey) return null;
  // A private key others can read is no longer private (as OpenSSH refuses one): said loudly.
  if ((fs.statSync(tlsKey).mode & 0o004) !== 0) log.warn({ file: tlsKey }, 'the MQTT TLS key file is world-readable: chmod 600 it');
  return { cert: fs.readFileSync(tlsCert), key: fs.readFileSync(tlsKey) };
}
