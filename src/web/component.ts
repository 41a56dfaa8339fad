// The browser app (web/, built by Vite into web/dist) served at / by `reef serve`. A small static
// handler: only files inside web/dist, the right content types, hashed assets cached for a year
// (their names change with their content), index.html revalidated on every load so a new build
// is picked up at once. Files are read on request (and kept while unchanged) so a rebuild needs
// no restart.
import fs from 'node:fs';
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
    reply.header('etag', f.etag);
    reply.header('x-content-type-options', 'nosniff');
    if (rel.endsWith('.html')) {
      reply.header('content-security-policy', "default-src 'self'; connect-src *; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; script-src 'self'; frame-ancestors 'none'");
      reply.header('referrer-policy', 'no-referrer');
    }
    if (request.headers['if-none-match'] === f.etag) return reply.code(304).send();
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
