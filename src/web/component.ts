// The browser app (web/, built by Vite into web/dist) served at / by `reef serve`. A small static
// handler: only files inside web/dist, the right content types, hashed assets cached for a year
// (their names change with their content), index.html revalidated on every load so a new build
// is picked up at once. Files are read on request (and kept while unchanged) so a rebuild needs
// no restart. Text files (the app's JavaScript, CSS, HTML and the map's Natural Earth JSON) are
// sent gzipped to clients that accept it (RFC 9110 §8.4, §12.5.3), compressed once per file version.
import fs from 'node:fs';
import { gzipSync } from 'node:zlib';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ComponentFactory } from '../app/contracts.ts';

export const WEB_DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../web/dist');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

interface Cached {
  mtimeMs: number;
  size: number;
  body: Buffer;
  etag: string;
  /** The gzipped body, made on the first request that accepts it; null when not worth it. */
  gz?: Buffer | null;
}

const COMPRESSIBLE = new Set(['.html', '.js', '.mjs', '.css', '.json', '.svg', '.txt', '.map']);

/** Does the Accept-Encoding header accept gzip (and not with q=0)? */
function acceptsGzip(header: string | string[] | undefined): boolean {
  const v = Array.isArray(header) ? header.join(',') : header ?? '';
  return v.split(',').some((part) => {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    if (name !== 'gzip' && name !== '*') return false;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    return !q || Number(q.slice(2)) > 0;
  });
}

export function webPlugin(dist = WEB_DIST) {
  const cache = new Map<string, Cached>();

  function load(rel: string): Cached | null {
    // Only plain names inside dist: no traversal, no dot files.
    const parts = rel.split('/');
    if (parts.some((p) => p === '' || p === '.' || p === '..' || p.startsWith('.'))) return null;
    const file = path.join(dist, ...parts);
    let st: fs.Stats;
    try {
      st = fs.statSync(file);
    } catch {
      return null;
    }
    if (!st.isFile()) return null;
    const hit = cache.get(file);
    if (hit && hit.mtimeMs === st.mtimeMs && hit.size === st.size) return hit;
    const body = fs.readFileSync(file);
    const c = { mtimeMs: st.mtimeMs, size: st.size, body, etag: `"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"` };
    cache.set(file, c);
    return c;
  }

  function send(request: FastifyRequest, reply: FastifyReply, rel: string, immutable: boolean) {
    const f = load(rel);
    if (!f) {
      if (rel === 'index.html') {
        return reply.code(503).type('text/plain; charset=utf-8').header('cache-control', 'no-store')
          .send('The Reef web app is not built yet: run `npm run build:web` (npm start does it for you).\n');
      }
      return reply.callNotFound();
    }
    reply.header('content-type', TYPES[path.extname(rel).toLowerCase()] ?? 'application/octet-stream');
    reply.header('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    reply.header('x-content-type-options', 'nosniff');
    if (rel.endsWith('.html')) {
      reply.header('content-security-policy', "default-src 'self'; connect-src *; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; script-src 'self'; frame-ancestors 'none'");
      reply.header('referrer-policy', 'no-referrer');
    }
    const ext = path.extname(rel).toLowerCase();
    if (COMPRESSIBLE.has(ext)) reply.header('vary', 'accept-encoding');
    if (COMPRESSIBLE.has(ext) && f.gz === undefined && f.body.length > 1024) {
      const gz = gzipSync(f.body, { level: 9 });
      f.gz = gz.length < f.body.length ? gz : null;
    }
    // Each content coding is its own representation with its own entity tag (RFC 9110 §8.8.3).
    const gzipped = !!f.gz && acceptsGzip(request.headers['accept-encoding']);
    const etag = gzipped ? `${f.etag.slice(0, -1)}-gz"` : f.etag;
    reply.header('etag', etag);
    if (request.headers['if-none-match'] === etag) return reply.code(304).send();
    if (gzipped) return reply.header('content-encoding', 'gzip').send(f.gz);
    return reply.send(f.body);
  }

  return async function web(app: FastifyInstance) {
    const hide = { schema: { hide: true } };
    app.get('/', hide, (request, reply) => send(request, reply, 'index.html', false));
    app.get('/index.html', hide, (request, reply) => send(request, reply, 'index.html', false));
    // Vite names everything under assets/ by content hash.
    app.get('/assets/*', hide, (request, reply) => send(request, reply, `assets/${(request.params as { '*': string })['*']}`, true));
  };
}

export const webComponent: ComponentFactory = async () => ({ name: 'web', plugin: webPlugin() });
export default webComponent;
