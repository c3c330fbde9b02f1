/**
 * The vitest config Stryker runs (stryker.config.mjs): the usual one, limited to the test files of
 * one area (`ACW_MUTATION_AREA`), the quickest files first, and a reporter that makes a test file
 * that fails outside its tests count.
 */
import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer } from 'vitest/node';
import base from './vitest.config.ts';
import { area } from './stryker.config.mjs';

/**
 * Stryker's vitest runner (9.6) scores a mutant by the results of the tests it collected. A mutant
 * that makes a module throw while it loads (an emptied CIDR in src/net/ranges.ts) leaves the file
 * with no tests, and one that makes a `beforeAll` throw (an emptied hook name given to Fastify)
 * leaves its tests without results: both would count as survived. A file that failed with no
 * failed test gets one, carrying the file's error.
 */
const failedFileFails = {
  onInit(vitest) {
    this.vitest = vitest;
  },
  onTestRunEnd() {
    for (const file of this.vitest?.state.getFiles() ?? []) {
      if (file.result?.state !== 'fail' || testsOf(file).some((t) => t.result?.state === 'fail')) continue;
      const errors = file.result.errors ?? [{ message: 'the test file failed' }];
      // A minimal test task: the fields the runner reads (vitest-helpers.js convertTestToTestResult).
      file.tasks.push({
        type: 'test',
        id: `${file.id}_failed`,
        name: 'the test file runs',
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

function testsOf(suite) {
  return suite.tasks.flatMap((t) => (t.type === 'test' ? [t] : t.type === 'suite' ? testsOf(t) : []));
}

/**
 * The quickest test file first (vitest's own order runs the longest first): the runner stops at the
 * first failing test, so a mutant that a unit test kills never waits for a suite that starts a
 * service. Durations come from the previous run; a file not timed yet goes by its size.
 */
class QuickestFirst extends BaseSequencer {
  async sort(files) {
    const { cache, config } = this.ctx;
    const key = (spec) => `${spec.project.name}:${relative(config.root, spec.moduleId)}`;
    return files.toSorted((a, b) => {
      const [ta, tb] = [cache.getFileTestResults(key(a))?.duration, cache.getFileTestResults(key(b))?.duration];
      if (ta !== undefined && tb !== undefined) return ta - tb;
      return (cache.getFileStats(key(a))?.size ?? 0) - (cache.getFileStats(key(b))?.size ?? 0);
    });
  }
}

// Not mergeConfig: it would append to the base `include` rather than replace it.
export default defineConfig({
  ...base,
  test: { ...base.test, include: area().tests, reporters: [failedFileFails], sequence: { sequencer: QuickestFirst } },
});
