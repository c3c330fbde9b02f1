// External tools some docs tests run (the Go, PHP and Ruby receiver recipes, promtool). Without one
// a test is skipped, naming it; with ACW_REQUIRE_TOOLCHAINS=1 (.ci/run sets it) it fails instead,
// so CI can never skip them silently.
import { spawnSync } from 'node:child_process';

export const TOOLCHAINS_REQUIRED = process.env['ACW_REQUIRE_TOOLCHAINS'] === '1';

/** Whether `cmd` is on the PATH. */
export const have = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

/** Skip a test needing `tool` when it is missing, unless toolchains are required (it then runs, and requireTool fails it). */
export const skipWithout = (tool: string): boolean => !TOOLCHAINS_REQUIRED && !have(tool);

/** First line of a test needing `tool`: fails, naming it and how to install it, when it is missing. */
export function requireTool(tool: string, debianPackage: string): void {
  if (!have(tool)) {
    throw new Error(
      `${tool} is not installed and ACW_REQUIRE_TOOLCHAINS=1: install it (Debian: apt-get install -y ${debianPackage}) or run .ci/run`,
    );
  }
}
