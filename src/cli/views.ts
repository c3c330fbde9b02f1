/**
 * What the listing commands print for a person at a terminal (table.ts): the columns of each
 * list, taken from the same objects their JSON lines carry, so both always say the same thing.
 */
import { age, shortTime, type Cell } from './table.js';

type Row = Readonly<Record<string, unknown>>;
/** Each view takes the object its JSON line prints (interfaces without an index signature included). */
const rec = (v: object): Row => v as Row;

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const obj = (v: unknown): Row | undefined => (typeof v === 'object' && v !== null ? (v as Row) : undefined);

export const JOB_HEADERS = ['ID', 'STATUS', 'ENDPOINT', 'TOPIC', 'TRIES', 'WHEN', 'LAST ERROR'] as const;

/** A job: held by an open circuit says so (and when the next probe is), rather than an overdue run time. */
export function jobRow(j_: object): Cell[] {
  const j = rec(j_);
  const held = obj(j['held']);
  let when: string;
  if (j['status'] === 'pending' && held) {
    const probe = str(held['next_probe_at']);
    when = `held (${str(held['state']) ?? str(held['reason']) ?? 'circuit'})${probe ? `, probe ${shortTime(probe)}` : ''}`;
  } else if (j['status'] === 'pending') when = `due ${shortTime(j['run_at'])}`;
  else if (j['status'] === 'running') when = `since ${shortTime(j['run_at'])}`;
  else when = shortTime(j['completed_at'] ?? j['run_at']);
  return [
    str(j['id']),
    str(j['status']),
    str(j['endpoint']) ?? str(j['type']),
    str(j['topic']),
    `${String(j['attempts'])}/${String(j['max_attempts'])}`,
    when,
    str(j['last_error']),
  ];
}

export const ENDPOINT_HEADERS = ['NAME', 'STATE', 'HELD', 'OK', 'ATTEMPTS', 'LAST ERROR', 'URL'] as const;

/** An endpoint: its health word, with the circuit's state and next probe while it is not closed. */
export function endpointRow(e_: object): Cell[] {
  const e = rec(e_);
  const circuit = obj(e['circuit']);
  const probe = str(circuit?.['next_probe_at']);
  const circuitState = str(circuit?.['state']);
  // The API's one word (healthy, failing, down, paused, disabled), with an open circuit's state and next probe.
  let state = str(e['health']) ?? (e['paused'] === true ? 'paused' : (circuitState ?? '-'));
  if (circuitState !== undefined && circuitState !== 'closed') state += ` (${circuitState}${probe ? `, probe ${shortTime(probe)}` : ''})`;
  const attempts = typeof e['attempts'] === 'number' ? e['attempts'] : 0;
  const rate = typeof e['success_rate'] === 'number' && attempts > 0 ? `${Math.round(e['success_rate'] * 100)}%` : '-';
  return [
    str(e['name']),
    state,
    typeof e['held_jobs'] === 'number' ? e['held_jobs'] : null,
    rate,
    `${attempts} in ${String(e['window_minutes'])}m`,
    str(e['last_error']) ?? str(circuit?.['last_error']),
    str(e['url']),
  ];
}

export const USER_HEADERS = ['NAME', 'ROLE', 'CREATED', 'REVOKED'] as const;

export function userRow(u_: object): Cell[] {
  const u = rec(u_);
  return [str(u['name']), str(u['role']), shortTime(u['created_at']), u['revoked_at'] ? shortTime(u['revoked_at']) : null];
}

export const ALERT_HEADERS = ['ID', 'TIME', 'ACTION', 'STATE', 'ENDPOINT', 'DETAIL'] as const;

/** An alert: a dead letter names its job and last error; an endpoint alert its reason or error. */
export function alertRow(a_: object): Cell[] {
  const a = rec(a_);
  const job = str(a['job_id']);
  const why = str(a['last_error']) ?? str(a['reason']) ?? str(a['message']);
  const detail = job ? `job ${job}${why ? `: ${why}` : ''}` : why;
  const state = `${str(a['state']) ?? '-'}${a['acknowledged_at'] ? ', acked' : ''}`;
  return [String(a['id']), shortTime(a['created_at']), str(a['action']), state, str(a['endpoint']), detail];
}

/** `status`'s database, in one line. */
export function databaseLine(d_: object): string {
  const d = rec(d_);
  if (d['embedded'] === true && d['running'] !== true) return `database: embedded under ${String(d['data_dir'])}, not running`;
  if (d['embedded'] !== true) return `database: ${String(d['url'])}`;
  const holders = Array.isArray(d['holders']) ? (d['holders'] as Row[]) : [];
  const who = holders.map((h) => `${str(h['mode']) ?? 'command'} pid ${String(h['pid'] ?? '?')}`).join(', ');
  return `database: embedded, running (server pid ${String(d['server_pid'])}), ${String(d['url'])}; held by ${who || 'nobody'}`;
}

export const PROCESS_HEADERS = ['MODE', 'ID', 'PID', 'STATE', 'STARTED', 'LAST SEEN', 'IN FLIGHT'] as const;

export function processRow(p_: object, nowMs = Date.now()): Cell[] {
  const p = rec(p_);
  return [
    str(p['mode']),
    str(p['id']),
    typeof p['pid'] === 'number' ? p['pid'] : null,
    p['gone'] === true ? 'gone' : 'running',
    shortTime(p['started_at']),
    `${age(p['last_seen'], nowMs)} ago`,
    typeof p['in_flight'] === 'number' ? p['in_flight'] : null,
  ];
}

/**
 * What a person reading `endpoints show` at a terminal should do next, or undefined when the
 * endpoint is healthy: the JSON says the state, this line says when it changes and how to act.
 */
export function endpointHint(e_: object): string | undefined {
  const e = rec(e_);
  const name = str(e['name']) ?? '?';
  const circuit = obj(e['circuit']);
  const failing = obj(e['failing']);
  switch (str(e['health'])) {
    case 'paused':
      return `${name} is paused since ${shortTime(e['paused_at'])}: its jobs wait. Deliver again with: acw-webhooks endpoints resume ${name}`;
    case 'down': {
      const error = str(circuit?.['last_error']) ?? str(e['last_error']);
      const probe = str(circuit?.['next_probe_at']);
      return (
        `${name} is down since ${shortTime(circuit?.['opened_at'] ?? circuit?.['since'])}${error ? ` (last error: ${error})` : ''}: ` +
        `its jobs are held, spending no attempts. ${probe ? `Next probe ${shortTime(probe)}; or` : 'To'} probe now, once the receiver is back: ` +
        `acw-webhooks endpoints resume ${name}`
      );
    }
    case 'failing': {
      const codes = Array.isArray(failing?.['status_codes']) ? failing['status_codes'].join(', ') : '';
      return (
        `${name} is failing since ${shortTime(failing?.['since'])}: its receiver refuses most deliveries${codes ? ` (${codes})` : ''}, ` +
        `and they go dead without retry. Fix the receiver, then send a test delivery: POST /v1/endpoints/${name}/test`
      );
    }
    default:
      return undefined;
  }
}
