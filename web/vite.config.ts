// Vite build of the browser app: web/ → web/dist, served by `reef serve` at / (src/web/component.ts).
import { defineConfig } from 'vite';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/',
  logLevel: 'warn',
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
