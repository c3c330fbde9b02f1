// The history scenario's drain databases made alike (bench/README.md#history-at-volume): the purge
// runner marked as just run, the copy's write-back waited for, and a drained database vacuumed
// before the next drain.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { sleep } from './common.mjs';
import { round } from './report.mjs';

/**
 * The purge runner would run at the service's start (a fresh database has never run it) and drop
 * whatever of an older template is past the default retention during the measured drain: mark it
 * as just run, on both databases alike. The purge is measured on its own.
 */
export async function holdPurge(url) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c
    .query(`insert into runner_state (name, last_run_at) values ('job_purge', now()) on conflict (name) do update set last_run_at = now()`)
    .finally(() => c.end());
}

/** Dirty and under-writeback page cache, MB (/proc/meminfo). */
function dirtyMb() {
  const m = readFileSync('/proc/meminfo', 'utf8');
  const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(m)?.[1] ?? 0);
  return Math.round((kb('Dirty') + kb('Writeback')) / 1024);
}

/**
 * Once a system's two drain databases are made, before either drains (the history's copy writes
 * 7 GiB, the empty one's a few MB): `sync`, wait (up to 60 s) until the kernel holds under 64 MB of
 * dirty pages, then `settleMs` (BENCH_HISTORY_SETTLE_MS) more, so that no write-back of the copy and none of the
 * VM's work on it falls into a drain. Returns what it found and how long it took, for the result.
 */
export async function settle(settleMs) {
  const t = performance.now();
  const before = dirtyMb();
  execFileSync('sync');
  while (dirtyMb() > 64 && performance.now() - t < 60_000) await sleep(250);
  await sleep(settleMs);
  return { dirty_mb_before: before, dirty_mb_after: dirtyMb(), seconds: round((performance.now() - t) / 1000, 1) };
}

/** `vacuum` of the database at `url`. */
export async function vacuum(url) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query('vacuum').finally(() => c.end());
}
