// The certificate and key of MQTT over TLS (8883, the port the original's clients use): the broker's
// own files when REEF_MQTT_TLS_CERT / REEF_MQTT_TLS_KEY are set, else the service's HTTPS certificate
// (REEF_TLS_CERT / REEF_TLS_KEY, or REEF_TLS_SELF_SIGNED: src/config/tls.ts), else none (no TLS
// listener). This function is the one place that chooses.
import { ConfigError, type Config } from '../config/config.ts';
import { loadTls, TlsError } from '../config/tls.ts';

export function mqttTlsMaterial(config: Config): { cert: Buffer | string; key: Buffer | string } | null {
  const { tlsCert, tlsKey } = config.mqtt;
  // The broker's own files are read and checked as HTTPS's are (parseable, the key belongs to the
  // certificate, the key not readable by every user): a problem stops the start, as it does for HTTPS.
  const own = tlsCert && tlsKey ? { cert: tlsCert, key: tlsKey, selfSigned: false } : null;
  try {
    // Else the HTTPS material, read as the HTTP server reads it (a self-signed pair is made once
    // in the data directory and shared).
    const m = loadTls(
      own ?? config.tls,
      config.dataDir,
      [config.mqtt.host].filter((h) => h !== '0.0.0.0' && h !== '::'),
    );
    return m ? { cert: m.cert, key: m.key } : null;
  } catch (e) {
    throw e instanceof TlsError && own ? new ConfigError([`REEF_MQTT_TLS_CERT / REEF_MQTT_TLS_KEY: ${e.message}`]) : e;
  }
}
