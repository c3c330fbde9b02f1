import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { listProcesses, type ProcessRow } from '../../admin/processes.js';
import type { Config } from '../../config/index.js';
import { redactUrl } from '../../config/redact-url.js';
import { embeddedUrl, HOLD_APP, HOLD_KEYS, readRunning } from '../../db/embedded.js';
import { createPool } from '../../db/pool.js';
import { readConfig } from '../config.js';
import { EXIT, ExitError, type GlobalOptions } from '../exit.js';
import { printJson, writeLine, type CliIo } from '../io.js';
import { forPeople, printTable, type JsonOption } from '../table.js';
import { databaseLine, PROCESS_HEADERS, processRow } from '../views.js';

/**
 * `acw-webhooks status` and `acw-webhooks db url` (docs/operations.md#processes). Neither starts
 * the embedded PostgreSQL nor holds it: they read the URL of the one running (from its
 * postmaster.pid), so a status taken while nothing runs says so instead of starting a server that
 * stops again as the command exits.
 */

interface Where {
  url: string;
  embedded: boolean;
  /** The embedded server's pid, when it runs. */
  serverPid?: number;
}

/** The database the config points at; null when it is the embedded one and that is not running. */
function databaseOf(config: Config): Where | null {
  if (config.database.url) return { url: config.database.url, embedded: false };
  const running = readRunning(resolve(config.database.data_dir, 'pg'));
  return running ? { url: embeddedUrl(running.port), embedded: true, serverPid: running.pid } : null;
}

function notRunning(config: Config): string {
  return (
    `the embedded PostgreSQL under ${config.database.data_dir} is not running: ` +
    'start `acw-webhooks serve` (or `worker`) with the same config, or set database.url'
  );
}

interface Holder {
  pid: number | null;
  since: string;
  /** The registered process with this pid on this host, if it is one (else a CLI command or an embedding application). */
  process: string | null;
  mode: 'serve' | 'worker' | null;
}

export async function status(io: CliIo, o: GlobalOptions & JsonOption): Promise<void> {
  const config = readConfig(io, o, { needSecrets: false });
  const where = databaseOf(config);
  // On a terminal: the database in one line, then the processes as a table.
  const people = forPeople(io, o);
  const database = (d: Record<string, unknown>) => (people ? writeLine(io, databaseLine(d)) : printJson(io, { database: d }));
  if (!where) {
    database({ embedded: true, running: false, data_dir: config.database.data_dir });
    io.stderr.write(`${notRunning(config)}\n`);
    return;
  }
  const pool = createPool({ url: where.url, size: 1, schema: config.database.schema, applicationName: 'acw-webhooks status' });
  try {
    let processes: ProcessRow[];
    try {
      processes = (await listProcesses(pool)).items;
    } catch (err) {
      if ((err as { code?: unknown }).code !== '42P01') throw err;
      throw new ExitError(
        EXIT.failure,
        'the database is not migrated (no processes table): run `acw-webhooks migrate`, or start `acw-webhooks serve`',
      );
    }
    if (where.embedded) {
      const holders = await holdersOf(pool, processes);
      // The embedded server's fixed local credentials: its URL is what an application's outbox connects with.
      database({ embedded: true, running: true, url: where.url, data_dir: config.database.data_dir, server_pid: where.serverPid, holders });
    } else {
      database({ embedded: false, url: redactUrl(where.url) });
    }
    if (people)
      printTable(
        io,
        PROCESS_HEADERS,
        processes.map((p) => processRow(p)),
        'no serve or worker process has run yet',
      );
    else for (const p of processes) if (!printJson(io, { process: p })) break;
  } finally {
    await pool.end();
  }
}

/** `db url`: the URL alone, for an application's outbox. */
export function dbUrl(io: CliIo, o: GlobalOptions): void {
  const config = readConfig(io, o, { needSecrets: false });
  const where = databaseOf(config);
  if (!where) throw new ExitError(EXIT.failure, notRunning(config));
  writeLine(io, where.url);
}

/** The processes holding the embedded server (each holds a shared advisory lock on a connection named with its pid). */
async function holdersOf(pool: ReturnType<typeof createPool>, processes: ProcessRow[]): Promise<Holder[]> {
  const res = await pool.query<{ app: string; since: Date }>(
    `select a.application_name as app, a.backend_start as since
       from pg_locks l join pg_stat_activity a on a.pid = l.pid
      where l.locktype = 'advisory' and l.classid = $1 and l.objid = $2 and l.objsubid = 2 and l.granted
      order by a.backend_start`,
    [...HOLD_KEYS],
  );
  const host = hostname();
  return res.rows.map((r) => {
    const pid = Number(r.app.startsWith(HOLD_APP) ? r.app.slice(HOLD_APP.length).trim() : NaN);
    const known = processes.find((p) => p.host === host && p.pid === pid && !p.gone);
    return { pid: Number.isInteger(pid) ? pid : null, since: r.since.toISOString(), process: known?.id ?? null, mode: known?.mode ?? null };
  });
}
