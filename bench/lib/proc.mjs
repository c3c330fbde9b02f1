// Child processes over IPC, and CPU time read from /proc (Linux), so every run can say where the
// two cores went: the worker, PostgreSQL (all its backends) and the receiver.
import { fork } from 'node:child_process';
import { openSync, readFileSync, readdirSync } from 'node:fs';

/**
 * Fork `file` with `cfg` in env[envVar]; stdout to /dev/null (or to `stdoutFile`, for debugging),
 * stderr kept (last 8 KiB) for errors.
 */
export function spawnChild(file, { envVar, cfg, execArgv = [], stdoutFile } = {}) {
  const env = { ...process.env };
  if (envVar) env[envVar] = JSON.stringify(cfg);
  const out = stdoutFile ? openSync(stdoutFile, 'a') : 'ignore';
  const child = fork(file, [], { env, stdio: ['ignore', out, 'pipe', 'ipc'], execArgv });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr = (stderr + d).slice(-8192);
  });
  const inbox = [];
  const waiters = [];
  let exit = null;
  child.on('message', (m) => {
    const i = waiters.findIndex((w) => w.type === m.type);
    if (i >= 0) waiters.splice(i, 1)[0].resolve(m);
    else inbox.push(m);
  });
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      for (const w of waiters.splice(0))
        w.reject(new Error(`${file} exited (${code ?? signal}) while waiting for ${w.type}: ${stderr.trim()}`));
      resolve(exit);
    });
  });
  return {
    pid: child.pid,
    send: (m) => child.send(m),
    stderr: () => stderr,
    exited,
    get exit() {
      return exit;
    },
    clearInbox: () => inbox.splice(0),
    wait(type, timeoutMs = 600_000) {
      const i = inbox.findIndex((m) => m.type === type);
      if (i >= 0) return Promise.resolve(inbox.splice(i, 1)[0]);
      if (exit) return Promise.reject(new Error(`${file} already exited (${exit.code ?? exit.signal}): ${stderr.trim()}`));
      return new Promise((resolve, reject) => {
        const w = { type, resolve: (m) => (clearTimeout(t), resolve(m)), reject: (e) => (clearTimeout(t), reject(e)) };
        const t = setTimeout(() => {
          waiters.splice(waiters.indexOf(w), 1);
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${type} from ${file}`));
        }, timeoutMs);
        waiters.push(w);
      });
    },
    /** Ends this child (and only it), by its own pid. */
    async kill() {
      if (exit) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(t);
    },
  };
}

const TICK = 100; // USER_HZ on Linux

function ticksOf(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    // fields after the command: state(0) ppid(1) ... utime(11) stime(12)
    return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]), reaped: Number(f[13]) + Number(f[14]) };
  } catch {
    return null;
  }
}

/** CPU seconds used so far by one process. */
export function cpuSeconds(pid) {
  const t = ticksOf(pid);
  return t ? t.ticks / TICK : 0;
}

/** CPU seconds used so far by a PostgreSQL server: the postmaster and every live child of it. */
export function pgCpuSeconds(dataDir) {
  let postmaster;
  try {
    postmaster = Number(readFileSync(`${dataDir}/postmaster.pid`, 'utf8').split('\n')[0]);
  } catch {
    return 0;
  }
  // Backends that already exited were reaped by the postmaster: their time is in its cutime/cstime.
  const pm = ticksOf(postmaster);
  let ticks = pm ? pm.ticks + pm.reaped : 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const t = ticksOf(d);
    if (t && t.ppid === postmaster) ticks += t.ticks;
  }
  return ticks / TICK;
}

/**
 * The machine's CPU time so far from /proc/stat, in clock ticks: all of it (busy, idle and stolen)
 * and the part the hypervisor gave to others while this VM wanted to run (`steal`).
 */
export function machineTicks() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  return { total: f.reduce((a, b) => a + b, 0), steal: f[7] };
}
