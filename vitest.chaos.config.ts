import { defineConfig } from 'vitest/config';

// The chaos suite (test/chaos/README.md): `npm run test:chaos`, never part of `npm test`. One file
// at a time: each spawns several service processes and needs the machine's two cores to itself.
export default defineConfig({
  test: {
    include: ['test/chaos/**/*.chaos.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    maxWorkers: 1,
    fileParallelism: false,
    pool: 'forks',
  },
});
