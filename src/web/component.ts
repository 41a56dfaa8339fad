// The browser app (web/, built by Vite into web/dist) served at / by `reef serve`, through
// @fastify/static: only files inside web/dist, by content type; hashed assets cached for a year
// (their names change with their content, so they are immutable), index.html revalidated on every
// load so a new build is picked up at once (RFC 9111 §5.2.2.4 no-cache, with an ETag for the 304).
// Files are read on request, so a rebuild needs no restart. Text files (the app's JavaScript, CSS,
// HTML, the map's Natural Earth JSON) are also built gzipped (web/vite.config.ts) and those are sent
// to clients that accept gzip (preCompressed: RFC 9110 §8.4, with Vary: Accept-Encoding).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ComponentFactory } from '../app/contracts.ts';

export const WEB_DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../web/dist');

const IMMUTABLE = 'public, max-age=31536000, immutable';
const CSP = "default-src 'self'; connect-src *; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; script-src 'self'; frame-ancestors 'none'";

/** Only plain names inside dist: no traversal, no dot files, no empty segments. */
function plain(rel: string): boolean {
  return rel.split('/').every((p) => p !== '' && p !== '.' && p !== '..' && !p.startsWith('.') && !p.includes('\\'));
}

export function webPlugin(dist = WEB_DIST) {
  return async function web(app: FastifyInstance) {
    await app.register(fastifyStatic, {
      root: dist,
      // No routes of its own: the three below are the whole surface.
      serve: false,
      index: false,
      dotfiles: 'ignore',
      preCompressed: true,
      etag: true,
      lastModified: true,
      // Cache-Control is set per file below.
      cacheControl: false,
      setHeaders(reply, sent) {
        // The gzipped twin of a file gets that file's headers (its type, its caching).
        const file = sent.replace(/\.(gz|br)$/, '');
        reply.header('x-content-type-options', 'nosniff');
        // RFC 9239 §6: text/javascript is the one type for JavaScript (the mime table still says application/).
        if (/\.m?js$/.test(file)) reply.header('content-type', 'text/javascript; charset=utf-8');
        if (file.endsWith('.html')) {
          reply.header('cache-control', 'no-cache');
          reply.header('content-security-policy', CSP);
          reply.header('referrer-policy', 'no-referrer');
        } else {
          reply.header('cache-control', IMMUTABLE);
        }
      },
    });

    // A gzipped twin gets its type from @fastify/static after setHeaders ran: the same RFC 9239 §6 rule again.
    app.addHook('onSend', async (_request, reply, payload) => {
      if (String(reply.getHeader('content-type') ?? '').startsWith('application/javascript')) reply.header('content-type', 'text/javascript; charset=utf-8');
      return payload;
    });

    const index = (reply: FastifyReply) => {
      if (!fs.existsSync(path.join(dist, 'index.html'))) {
        return reply.code(503).type('text/plain; charset=utf-8').header('cache-control', 'no-store').send('The Reef web app is not built yet: run `npm run build:web` (npm start does it for you).\n');
      }
      return reply.sendFile('index.html');
    };
    const hide = { schema: { hide: true } };
    app.get('/', hide, (_request, reply) => index(reply));
    app.get('/index.html', hide, (_request, reply) => index(reply));
    // Vite names everything under assets/ by content hash.
    app.get('/assets/*', hide, (request, reply) => {
      const rel = (request.params as { '*': string })['*'];
      if (!plain(rel)) return reply.callNotFound();
      return reply.sendFile(`assets/${rel}`);
    });
  };
}

export const webComponent: ComponentFactory = async () => ({ name: 'web', plugin: webPlugin() });
export default webComponent;
