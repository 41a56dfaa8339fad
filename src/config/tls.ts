// TLS material for every listener that speaks TLS (HTTPS here; MQTT over TLS reuses it): the
// operator's certificate and key files (REEF_TLS_CERT / REEF_TLS_KEY), or a self-signed certificate
// made at first start and kept in the data directory (REEF_TLS_SELF_SIGNED). The original clients
// speak only https, so a deployment without a certificate still has a way to serve it.
//
// The self-signed certificate is written here in DER by hand (X.509 v3, RFC 5280 §4.1) because
// node:crypto signs but does not build certificates, and no dependency is needed for ~60 lines.
import { X509Certificate, createPrivateKey, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import fs from 'node:fs';
import { isIP } from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** The TLS part of the configuration (src/config/config.ts). */
export interface TlsSettings {
  /** PEM certificate (chain) file; with `key`. */
  cert: string | null;
  /** PEM private key file; with `cert`. */
  key: string | null;
  /** Without cert and key: make (once) and use a self-signed certificate in the data directory. */
  selfSigned: boolean;
}

/** What a TLS listener needs, plus where it came from (for the banner and logs). */
export interface TlsMaterial {
  cert: string;
  key: string;
  certFile: string;
  keyFile: string;
  /** True when Reef made the certificate (self-signed). */
  selfSigned: boolean;
  /** SHA-256 fingerprint, for clients that pin it (e.g. a Java truststore import check). */
  fingerprint256: string;
  validTo: string;
  /** Set when the self-signed pair kept in the data directory was unusable and has been made again: why. */
  replaced?: string;
}

export class TlsError extends Error {
  /** The files' content is what is wrong (not their permissions or whether they can be read). */
  readonly content: boolean;
  constructor(message: string, content = false) {
    super(message);
    this.name = 'TlsError';
    this.content = content;
  }
}

/** Problems with the TLS settings alone (config validation: reported with every other problem). */
export function tlsSettingProblems(t: TlsSettings): string[] {
  const problems: string[] = [];
  if ((t.cert === null) !== (t.key === null)) problems.push('REEF_TLS_CERT (--tls-cert) and REEF_TLS_KEY (--tls-key) must be given together');
  if (t.selfSigned && (t.cert !== null || t.key !== null)) problems.push('REEF_TLS_SELF_SIGNED (--tls-self-signed) cannot be combined with REEF_TLS_CERT/REEF_TLS_KEY');
  for (const [name, file] of [
    ['REEF_TLS_CERT (--tls-cert)', t.cert],
    ['REEF_TLS_KEY (--tls-key)', t.key],
  ] as const) {
    if (file !== null && !fs.existsSync(file)) problems.push(`${name}: no file ${file}`);
  }
  return problems;
}

/** True when the settings ask for TLS at all. */
export function tlsEnabled(t: TlsSettings): boolean {
  return t.selfSigned || (t.cert !== null && t.key !== null);
}

/**
 * The certificate and key to serve, or null when TLS is off. Given files are read and checked
 * (parseable, key matches certificate, key not world-readable); otherwise the self-signed pair in
 * `<dataDir>/tls/` is used, made first if missing or within 30 days of expiry.
 * `hosts` go into a new certificate's subjectAltName besides localhost, 127.0.0.1 and ::1.
 */
export function loadTls(t: TlsSettings, dataDir: string, hosts: string[] = [], now = Date.now()): TlsMaterial | null {
  if (t.cert !== null && t.key !== null) return readPair(t.cert, t.key, false);
  if (!t.selfSigned) return null;
  const dir = path.join(dataDir, 'tls');
  const certFile = path.join(dir, 'cert.pem');
  const keyFile = path.join(dir, 'key.pem');
  let replaced: string | undefined;
  if (fs.existsSync(certFile) && fs.existsSync(keyFile)) {
    try {
      const have = readPair(certFile, keyFile, true);
      if (Date.parse(have.validTo) - now > 30 * 86400_000) return have;
    } catch (err) {
      // A pair Reef made whose content is unusable (a certificate no parser accepts, as one in 256
      // made before 5a6d402 was, or a key that does not match it) is Reef's own to replace: no
      // client can have trusted a certificate the server never served. A key others can read or a
      // file that cannot be read stays the operator's to mend, as for given files.
      if (!(err instanceof TlsError) || !err.content) throw err;
      replaced = err.message;
    }
  }
  const made = selfSignedCertificate({ hosts: [...new Set(['localhost', '127.0.0.1', '::1', os.hostname(), ...hosts])], now });
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  // The key is written 0600 from the first byte (brief: files holding keys not world-readable).
  writePrivate(keyFile, made.key);
  fs.writeFileSync(certFile, made.cert, { mode: 0o644 });
  const fresh = readPair(certFile, keyFile, true);
  return replaced === undefined ? fresh : { ...fresh, replaced };
}

function writePrivate(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, text, { mode: 0o600 });
  fs.chmodSync(tmp, 0o600);
  fs.renameSync(tmp, file);
}

function readPair(certFile: string, keyFile: string, selfSigned: boolean): TlsMaterial {
  let cert: string, key: string;
  try {
    cert = fs.readFileSync(certFile, 'utf8');
    key = fs.readFileSync(keyFile, 'utf8');
  } catch (err) {
    throw new TlsError(`cannot read the TLS certificate or key: ${(err as Error).message}`);
  }
  if (fs.statSync(keyFile).mode & 0o004) throw new TlsError(`the TLS key ${keyFile} is readable by every user; chmod 600 (or 640) it`);
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    throw new TlsError(`${certFile} is not a PEM certificate`, true);
  }
  let ok = false;
  try {
    ok = x509.checkPrivateKey(createPrivateKey(key));
  } catch {
    throw new TlsError(`${keyFile} is not a PEM private key (an encrypted key is not supported)`, true);
  }
  if (!ok) throw new TlsError(`the key ${keyFile} does not belong to the certificate ${certFile}`, true);
  return { cert, key, certFile, keyFile, selfSigned, fingerprint256: x509.fingerprint256, validTo: new Date(x509.validTo).toISOString() };
}

// --- DER (ITU-T X.690) -------------------------------------------------------------------------

function der(tag: number, body: Buffer): Buffer {
  const n = body.length;
  const len = n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), len, body]);
}
const seq = (...parts: Buffer[]) => der(0x30, Buffer.concat(parts));
function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const bytes = [a! * 40 + b!];
  for (const v of rest) {
    const enc = [v & 0x7f];
    for (let x = v >>> 7; x > 0; x >>>= 7) enc.unshift((x & 0x7f) | 0x80);
    bytes.push(...enc);
  }
  return der(0x06, Buffer.from(bytes));
}
/** RFC 5280 §4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050. */
function time(ms: number): Buffer {
  const iso = new Date(ms).toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z';
  return new Date(ms).getUTCFullYear() < 2050 ? der(0x17, Buffer.from(iso.slice(2))) : der(0x18, Buffer.from(iso));
}
function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split('.').map(Number));
  const [head, tail = ''] = ip.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
  return Buffer.from(groups.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff]));
}

/**
 * A self-signed ECDSA P-256 certificate (valid one year) for the given host names and addresses,
 * as PEM text with its PKCS#8 key.
 */
export function selfSignedCertificate(opts: { hosts: string[]; now?: number; days?: number; commonName?: string }): { cert: string; key: string } {
  const now = opts.now ?? Date.now();
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const ecdsaSha256 = seq(oid('1.2.840.10045.4.3.2'));
  const name = seq(der(0x31, seq(oid('2.5.4.3'), der(0x0c, Buffer.from(opts.commonName ?? 'Reef self-signed')))));
  const serial = randomBytes(16);
  // A positive INTEGER (RFC 5280 §4.1.2.2) in DER's shortest form: the top bit clear and the first
  // byte not zero. With only the top bit cleared, one serial in 256 began 00 followed by a byte
  // below 0x80, a padded INTEGER that X.509 parsers refuse: the certificate was written, failed
  // to load, and every later start failed on it.
  serial[0] = 0x40 | (serial[0]! & 0x3f);
  const altNames = Buffer.concat(opts.hosts.filter((h) => h && !h.includes('%')).map((h) => (isIP(h) ? der(0x87, ipBytes(h)) : der(0x82, Buffer.from(h)))));
  const extensions = der(
    0xa3,
    seq(
      seq(oid('2.5.29.17'), der(0x04, seq(altNames))), // subjectAltName
      seq(oid('2.5.29.37'), der(0x04, seq(oid('1.3.6.1.5.5.7.3.1')))), // extKeyUsage serverAuth
    ),
  );
  const tbs = seq(
    der(0xa0, der(0x02, Buffer.from([2]))), // v3
    der(0x02, serial),
    ecdsaSha256,
    name,
    seq(time(now - 3600_000), time(now + (opts.days ?? 365) * 86400_000)),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    extensions,
  );
  const signature = sign('sha256', tbs, privateKey); // DER ECDSA-Sig-Value
  const certDer = seq(tbs, ecdsaSha256, der(0x03, Buffer.concat([Buffer.from([0]), signature])));
  const pem = `-----BEGIN CERTIFICATE-----\n${certDer
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n')}\n-----END CERTIFICATE-----\n`;
  return { cert: pem, key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}
