// @ts-check
/**
 * Mutation testing (CONTRIBUTING.md#test-strength): `npm run test:mutation` runs one Stryker pass
 * per area below (scripts/mutation.mjs), each with only the test files that exercise it, and adds
 * the scores up. `ACW_MUTATION_AREA=net npx stryker run` runs one area by hand.
 */

/**
 * What is mutated, and the test files that may kill it: those that call the area's code directly.
 * The end-to-end suites that reach it through a service (test/endpoints/stored.test.ts,
 * test/http/replay.test.ts, test/http/auth.test.ts ...) are left out: each mutant would start a
 * service, hours in all. The test list is the vitest `include` of
 * vitest.mutation.config.mjs, not Stryker's `testFiles`: with `testFiles`, Stryker 9.6 activates a
 * module-level (static) mutant only after the module has loaded, so every such mutant "survives".
 * @type {Record<string, { mutate: string[]; tests: string[] }>}
 */
export const AREAS = {
  net: { mutate: ['src/net/**/*.ts'], tests: ['test/net/*.test.ts'] },
  crypto: { mutate: ['src/crypto/**/*.ts'], tests: ['test/crypto/*.test.ts'] },
  auth: { mutate: ['src/http/auth.ts'], tests: ['test/http/auth-hook.test.ts'] },
  verify: { mutate: ['src/verify.ts'], tests: ['test/webhook/verify.test.ts', 'test/verify-edges.test.ts'] },
  endpoints: {
    mutate: ['src/endpoints/**/*.ts'],
    tests: [
      'test/endpoints/input-access.test.ts',
      'test/endpoints/store.test.ts',
      'test/endpoints/registry.test.ts',
      'test/endpoints/registry-refresh.test.ts',
    ],
  },
  replay: { mutate: ['src/admin/replay.ts'], tests: ['test/admin/replay.test.ts'] },
};

/** The area of this run: `ACW_MUTATION_AREA` (the vitest config reads the same variable). */
export function area() {
  const name = process.env['ACW_MUTATION_AREA'] ?? '';
  const a = AREAS[name];
  if (a === undefined) throw new Error(`ACW_MUTATION_AREA: expected one of ${Object.keys(AREAS).join(', ')}, got ${JSON.stringify(name)}`);
  return { name, ...a };
}

const { name, mutate } = area();

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.mjs', related: false },
  // Each mutant runs only the tests that reached it in the first (coverage) run.
  coverageAnalysis: 'perTest',
  mutate,
  // Two cores shared with other work; the runner runs one test file at a time anyway.
  concurrency: 1,
  reporters: ['clear-text', 'progress', 'json', 'html'],
  jsonReporter: { fileName: `reports/mutation/${name}.json` },
  htmlReporter: { fileName: `reports/mutation/${name}.html` },
  clearTextReporter: { allowColor: false, logTests: false, maxTestsToLog: 0 },
  tempDirName: '.stryker-tmp',
  // Stryker rewrites tsconfig.json's `extends` and `references` through the TypeScript JS API,
  // which TypeScript 7 no longer ships; ours has neither, so there is nothing to rewrite.
  tsconfigFile: 'no-such-tsconfig.json',
  cleanTempDir: 'always',
};
