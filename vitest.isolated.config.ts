import { defineConfig } from 'vitest/config';
import base, { ISOLATED } from './vitest.config.js';

/** The files of ISOLATED (vitest.config.ts), each in a fresh process: part of `npm test`. */
export default defineConfig({
  ...base,
  test: { ...base.test, include: ISOLATED, exclude: [], isolate: true },
});
