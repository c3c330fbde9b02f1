import type { CliIo } from './io.js';

/**
 * When a long-running command (`serve`, `worker`, `receive`, `alerts --follow`) should stop: on
 * SIGINT or SIGTERM, when the process that started it exits, or when its stdout is closed; run
 * inside another process, when that one asks (`io.stop`).
 */
export type StopReason = 'SIGINT' | 'SIGTERM' | 'parent_exited' | 'stdout_closed' | 'requested';

export interface StopWatch {
  /** Resolves with the first reason to stop; later ones are ignored. */
  readonly requested: Promise<StopReason>;
  /** Aborted together with `requested`, for loops that take a signal. */
  readonly signal: AbortSignal;
  /** Ask to stop from inside (e.g. stdout closed). */
  request(reason: StopReason): void;
  /** Remove the signal handlers and the parent watch. */
  dispose(): void;
}

/** How often the parent is looked at: a getppid() call, nothing to measure. */
export const PARENT_POLL_MS = 500;

/**
 * Why the parent is watched: `npx acw-webhooks …` (npm 11 here, and npm 10's run-script forwards
 * the same way) runs the command through `sh -c` and forwards SIGINT/SIGTERM only to that shell.
 * dash (Debian's sh) does not exec the command, so a SIGTERM to npx killed the shell and left us
 * running under PID 1 with the embedded PostgreSQL. (`npm start` execs node, so its forwarded
 * signal reaches us; this covers a killed npm there.) There is no IPC channel (npm spawns with
 * stdio: inherit), stdin may be a terminal or /dev/null under a supervisor, and Node has no
 * PR_SET_PDEATHSIG; polling process.ppid (a getppid() at each read, on Node 20 and 24) works with
 * every wrapper. Re-parenting goes to PID 1 or to the nearest subreaper, so any change counts. A
 * process started by PID 1 itself (Docker's exec-form CMD, systemd) has nothing to watch. Not
 * covered: a SIGINT sent to npx alone, which dash holds while it waits for us.
 */
export function watchForStop(io: CliIo, opts: { pollMs?: number; onStdoutClosed?: boolean } = {}): StopWatch {
  const ctl = new AbortController();
  let resolve!: (r: StopReason) => void;
  const requested = new Promise<StopReason>((r) => (resolve = r));
  const request = (reason: StopReason): void => {
    if (ctl.signal.aborted) return;
    ctl.abort(reason);
    resolve(reason);
  };
  const onClosed = (): void => request('stdout_closed');
  if (opts.onStdoutClosed) {
    if (io.stdoutClosed.aborted) onClosed();
    else io.stdoutClosed.addEventListener('abort', onClosed, { once: true });
  }
  const unwatch = io.stop ? watchCaller(io.stop, request) : watchProcess(request, opts.pollMs ?? PARENT_POLL_MS);
  return {
    requested,
    signal: ctl.signal,
    request,
    dispose: () => {
      io.stdoutClosed.removeEventListener('abort', onClosed);
      unwatch();
    },
  };
}

/** Inside another process: its signals and its parent are not ours to watch; its `stop` is. */
function watchCaller(stop: AbortSignal, request: (r: StopReason) => void): () => void {
  const onStop = (): void => request('requested');
  if (stop.aborted) onStop();
  else stop.addEventListener('abort', onStop, { once: true });
  return () => stop.removeEventListener('abort', onStop);
}

function watchProcess(request: (r: StopReason) => void, pollMs: number): () => void {
  // Kept (not `once`) for the whole shutdown: a Ctrl-C reaches every process of the terminal's
  // group and npm forwards its own copy, so a second SIGINT comes at once, and with no handler
  // left Node's default action would kill us before the embedded PostgreSQL is stopped.
  const onInt = (): void => request('SIGINT');
  const onTerm = (): void => request('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  const parent = process.ppid;
  const timer =
    parent > 1
      ? setInterval(() => {
          if (process.ppid !== parent) request('parent_exited');
        }, pollMs)
      : undefined;
  timer?.unref();
  return () => {
    clearInterval(timer);
    process.off('SIGINT', onInt);
    process.off('SIGTERM', onTerm);
  };
}
