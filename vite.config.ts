import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The operator dashboard (dashboard/, docs/operations.md#dashboard), bundled into dist/dashboard,
// which `serve` reads (src/http/routes/dashboard.ts). Relative asset URLs, so it also works behind
// a proxy under a path; no inline script (the CSP forbids it), so no module-preload polyfill.
export default defineConfig({
  root: fileURLToPath(new URL('./dashboard/', import.meta.url)),
  base: './',
  logLevel: 'warn',
  build: {
    outDir: fileURLToPath(new URL('./dist/dashboard/', import.meta.url)),
    emptyOutDir: true,
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
    target: 'es2022',
  },
});
