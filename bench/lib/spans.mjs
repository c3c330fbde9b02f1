// Where the time of one POST /v1/notify goes on its way to the receiver (BENCH_SPANS=1, the
// http-latency scenario): timestamps taken inside acw's own processes without touching src/, from
// Node's and undici's diagnostics channels and a wrapper around pg's Client#query and #emit.
// Every clock is wallNow(), comparable across the processes of one host. Bench-only: the hooks cost a
// few µs per step, so a traced run's latencies are marked as traced wherever they are quoted.
import { subscribe } from 'node:diagnostics_channel';
import pg from 'pg';
import { wallNow } from './common.mjs';

/** Statement names (or simple-query texts) whose start and end are recorded. */
const CLAIMS = new Set(['acw_claim_fair', 'acw_claim']);

/**
 * Install the hooks in a worker child. role 'serve': per HTTP request, its start, the start of the
 * events insert, the commit's start and end, and the response's end (in order; the scenario sends
 * one request at a time). role 'worker': every NOTIFY's arrival, every claim (start, end, the job
 * ids it returned), discovery reads before a claim, and when each delivery's headers go out on the
 * socket (keyed by X-ACW-Event-Id).
 */
export function installSpans(role) {
  const data = { role, requests: [], notifies: [], claims: [], probes: [], sends: [] };
  let cur = null;
  const origQuery = pg.Client.prototype.query;
  // pg.Pool#query passes a callback, a client's own query returns a promise: both are followed.
  const follow = (name, t, args) => {
    let done = null;
    if (role === 'serve' && cur) {
      // Every statement of the request, for a finer look than the steps joinSpans makes.
      const q = { name: String(name).slice(0, 40), start: t };
      cur.queries.push(q);
      const c = cur;
      // A keyless event on an API-only serve is one statement in autocommit (acw_notify_one): its
      // start is both the insert's and the commit's, and its end the commit's.
      const commits = name === 'commit' || name === 'acw_notify_one';
      if (/^acw_notify_(insert|one)/.test(String(name))) cur.insert ??= t;
      if (commits) cur.commit = t;
      done = () => {
        q.end = wallNow();
        if (commits) c.committed = q.end;
      };
    } else if (role === 'worker') {
      if (CLAIMS.has(name)) done = (r) => data.claims.push({ start: t, end: wallNow(), ids: r.rows.map((x) => x.id) });
      else if (name === 'acw_pending_endpoints' || name === 'acw_next_due') {
        const probe = { name, start: t };
        data.probes.push(probe);
        done = () => (probe.end = wallNow());
      }
    }
    if (!done) return null;
    const k = args.findIndex((a) => typeof a === 'function');
    if (k >= 0) {
      const cb = args[k];
      args[k] = (err, res) => {
        if (!err) done(res);
        return cb(err, res);
      };
    }
    return done;
  };
  pg.Client.prototype.query = function (config, ...rest) {
    const name = typeof config === 'object' && config !== null ? (config.name ?? config.text) : config;
    const onEnd = follow(name, wallNow(), rest);
    const res = origQuery.call(this, config, ...rest);
    if (onEnd && res && typeof res.then === 'function' && !rest.some((a) => typeof a === 'function')) res.then(onEnd, () => undefined);
    return res;
  };
  if (role === 'worker') {
    const origEmit = pg.Client.prototype.emit;
    pg.Client.prototype.emit = function (event, ...args) {
      if (event === 'notification') data.notifies.push(wallNow());
      return origEmit.call(this, event, ...args);
    };
    subscribe('undici:client:sendHeaders', ({ headers }) => {
      const m = /x-acw-event-id: ([^\r\n]+)/i.exec(String(headers));
      if (m) data.sends.push([m[1], wallNow()]);
    });
  }
  if (role === 'serve') {
    subscribe('http.server.request.start', ({ request }) => {
      if (request.url !== '/v1/notify') return;
      cur = { start: wallNow(), queries: [] };
      data.requests.push(cur);
    });
    subscribe('http.server.response.finish', () => {
      if (cur) cur.finish = wallNow();
    });
  }
  return () => data;
}

/** The first of the sorted `xs` at or after `t`, or null. */
function firstAtOrAfter(xs, t) {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  return lo < xs.length ? xs[lo] : null;
}

/**
 * Join what the serve and worker children recorded with the orchestrator's own times (sent, answered,
 * the job id of each answer) and the receiver's arrivals, into one row of step durations per event.
 */
export function joinSpans({ sent, answered, jobIds, arrivals, serve, worker }) {
  const claimOf = new Map();
  for (const c of worker.claims) for (const id of c.ids) if (!claimOf.has(id)) claimOf.set(id, c);
  const sendOf = new Map();
  for (const [id, t] of worker.sends) if (!sendOf.has(id)) sendOf.set(id, t);
  const notifies = worker.notifies.toSorted((a, b) => a - b);
  const probes = worker.probes.filter((p) => p.name === 'acw_pending_endpoints' && p.end !== undefined);
  const rows = [];
  for (let i = 0; i < sent.length; i++) {
    const req = serve.requests[i];
    const id = jobIds[i];
    const claim = id ? claimOf.get(id) : undefined;
    const send = id ? sendOf.get(id) : undefined;
    const arrived = arrivals.get(i);
    if (!req || req.committed === undefined || !claim || send === undefined || arrived === undefined) continue;
    const notify = firstAtOrAfter(notifies, req.commit);
    // A discovery read the claim waited for: begun after the NOTIFY, done before the claim began.
    const from = notify ?? req.committed;
    const waited = probes.some((p) => p.start >= from && p.end <= claim.start);
    rows.push({
      client_to_handler: req.start - sent[i],
      handler_to_commit: req.commit - req.start,
      commit: req.committed - req.commit,
      commit_to_notify: notify === null ? null : notify - req.committed,
      notify_to_claim: notify === null ? null : claim.start - notify,
      claim: claim.end - claim.start,
      claim_to_send: send - claim.end,
      send_to_receiver: arrived - send,
      commit_to_answer: answered[i] - req.committed,
      total: arrived - sent[i],
      claim_waited_for_discovery: waited ? 1 : 0,
    });
  }
  return rows;
}
