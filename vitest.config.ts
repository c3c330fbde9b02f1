import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // .ci/run sets ACW_SKIP_FUZZ=1 for its second Node version only: the property-based suite
    // (test/fuzz, a third of the CPU time) runs once per CI, as the chaos and browser suites do.
    exclude: process.env['ACW_SKIP_FUZZ'] === '1' ? [...configDefaults.exclude, 'test/fuzz/**'] : configDefaults.exclude,
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: files that spawn worker processes compete for them.
    maxWorkers: 2,
    pool: 'forks',
  },
});
