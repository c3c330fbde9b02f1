import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // .ci/run sets ACW_SECOND_NODE=1 for its second Node version only. Left out there, as the
    // chaos and browser suites are: what a change of Node runtime cannot change, the seeded
    // property suites (test/fuzz: our own input handling, a fifth of the suite's time) and the documents
    // checked against the code (test/docs: the code they run has its own tests, which do run).
    exclude: process.env['ACW_SECOND_NODE'] === '1' ? [...configDefaults.exclude, 'test/fuzz/**', 'test/docs/**'] : configDefaults.exclude,
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: files that spawn worker processes compete for them.
    maxWorkers: 2,
    pool: 'forks',
  },
});
