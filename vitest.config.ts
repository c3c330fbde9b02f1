import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Files that must have a process of their own, run by vitest.isolated.config.ts after this config
 * (`npm test` runs both): test/tracing/off.test.ts checks that no OpenTelemetry SDK module is
 * loaded, which no longer holds in a worker where an earlier file turned tracing on.
 */
export const ISOLATED = ['test/tracing/off.test.ts'];

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...ISOLATED],
    globalSetup: ['test/helpers/global-setup.ts'],
    // The files of a worker share one module graph instead of importing the service's modules
    // again each (about 0.5 s of CPU a file, a fifth of the suite's): no test mocks a module, and
    // what must be per file is set up in test/helpers/per-file.ts.
    isolate: false,
    setupFiles: ['test/helpers/per-file.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Three on CI's two cores: many files spend much of their time waiting (leases running out,
    // cool-downs, receivers that hang), and a third file fills those waits. test/queue,
    // test/webhook and test/endpoint-state (32 files) took 77 s instead of 115 s, with no more CPU.
    maxWorkers: 3,
    pool: 'forks',
  },
});
