// Vite build of the browser app: web/ → web/dist, served by `reef serve` at / (src/web/component.ts).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { defineConfig, type Plugin } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

/**
 * A gzipped twin (`name.gz`) of every text file of the build over 1 KB, made once here so the
 * server only picks it (@fastify/static preCompressed) for clients that accept gzip: the map's
 * Natural Earth borders are 224 KB on the wire instead of 739 KB, the app's JavaScript a third.
 */
function gzipTwins(): Plugin {
  const TEXT = /\.(html|m?js|css|json|svg|txt)$/;
  return {
    name: 'reef-gzip-twins',
    apply: 'build',
    writeBundle(options) {
      const out = options.dir ?? path.join(root, 'dist');
      const walk = (dir: string): string[] => fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
      for (const file of walk(out)) {
        if (!TEXT.test(file)) continue;
        const body = fs.readFileSync(file);
        if (body.length <= 1024) continue;
        const gz = gzipSync(body, { level: 9 });
        if (gz.length < body.length) fs.writeFileSync(`${file}.gz`, gz);
      }
    },
  };
}

export default defineConfig({
  root,
  base: '/',
  logLevel: 'warn',
  plugins: [gzipTwins()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // Hashed file names under assets/ are served immutable; index.html is served no-cache.
    assetsDir: 'assets',
    sourcemap: false,
    reportCompressedSize: false,
  },
  server: {
    // `npx vite web` during development: the API of a local `reef serve`.
    proxy: { '/api': 'http://127.0.0.1:8080' },
  },
});
