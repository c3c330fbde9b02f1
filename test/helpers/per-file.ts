// Run before each test file (vitest.config.ts setupFiles). The files of a worker share their
// modules (isolate: false): what must be per file is set up here, not at a helper's top level.
import { contractHooksForThisFile } from './contract.js';

contractHooksForThisFile();
