// TLS for tests: a certificate made by OpenSSL's own command (not by Reef's generator, so the
// loading path is checked against what operators actually bring), and a request helper that trusts
// exactly that certificate (rejectUnauthorized stays on).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';

/** A self-signed RSA certificate for localhost/127.0.0.1 in `dir`: cert.pem and key.pem (0600). */
export function opensslCertificate(dir: string, cn = 'localhost'): { cert: string; key: string; certPem: string } {
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${cn}`, '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', key, '-out', cert], {
    stdio: 'ignore',
  });
  fs.chmodSync(key, 0o600);
  return { cert, key, certPem: fs.readFileSync(cert, 'utf8') };
}

export interface HttpsAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json(): unknown;
}

/** One HTTPS request that trusts only `ca`. Headers are sent exactly as given (none are added). */
export function httpsRequest(url: string, opts: { ca: string; method?: string; headers?: Record<string, string>; body?: string }): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method: opts.method ?? 'GET', headers: opts.headers ?? {}, ca: opts.ca, rejectUnauthorized: true }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}
