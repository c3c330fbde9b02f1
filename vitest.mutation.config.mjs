/**
 * The vitest config Stryker runs (stryker.config.mjs): the usual one, limited to the test files of
 * one area (`ACW_MUTATION_AREA`), plus a reporter that makes a test file failing to load count.
 */
import { defineConfig } from 'vitest/config';
import base from './vitest.config.ts';
import { area } from './stryker.config.mjs';

/**
 * Stryker's vitest runner (9.6) scores a mutant by the tests it collected. A mutant that makes a
 * module throw while it loads (an empty CIDR in src/net/ranges.ts) leaves the test file with no
 * tests at all, which would count as survived; here such a file gets one failed test instead.
 */
const loadFailureFails = {
  onInit(vitest) {
    this.vitest = vitest;
  },
  onTestRunEnd() {
    for (const file of this.vitest?.state.getFiles() ?? []) {
      if (file.result?.state !== 'fail' || file.tasks.length > 0) continue;
      const errors = file.result.errors ?? [{ message: 'the test file failed to load' }];
      // A minimal test task: the fields the runner reads (vitest-helpers.js convertTestToTestResult).
      file.tasks.push({
        type: 'test',
        id: `${file.id}_load`,
        name: 'the test file loads',
        mode: 'run',
        file,
        suite: undefined,
        meta: {},
        context: {},
        result: { state: 'fail', errors },
      });
    }
  },
};

// Not mergeConfig: it would append to the base `include` rather than replace it.
export default defineConfig({ ...base, test: { ...base.test, include: area().tests, reporters: [loadFailureFails] } });
