import { defineConfig } from 'vitest/config';

// The dashboard in real Chromium (test/browser/, docs/operations.md#dashboard): `npm run test:browser`,
// never part of `npm test`. One file at a time: each drives a browser and a `serve` process.
export default defineConfig({
  test: {
    include: ['test/browser/**/*.browser.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 90_000,
    maxWorkers: 1,
    fileParallelism: false,
    pool: 'forks',
  },
});
