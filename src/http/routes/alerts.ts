import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { latestAlertId, listAlerts, parseAlertActions, pumpAlerts, type AlertView } from '../../admin/alerts.js';
import { acknowledgeAlert, acknowledgeAlerts } from '../../admin/alert-acks.js';
import { coerceError } from '../../errors.js';
import type { Service } from '../../service.js';
import type { AlertHub } from '../alert-hub.js';
import { principalOf } from '../auth.js';
import { route } from '../route.js';
import { lastEventId } from '../schemas.js';

/** Comment lines keep proxies and load balancers from closing an idle stream. */
export const KEEP_ALIVE_MS = 15_000;

/** Write, then wait for the socket to drain if it is full, so a slow reader holds no unbounded buffer. */
function write(res: ServerResponse, chunk: string): Promise<void> {
  if (res.destroyed || res.writableEnded) return Promise.resolve();
  if (res.write(chunk)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/** The open streams of one server, so shutdown can end them all and wait until they have. */
export class OpenStreams {
  private readonly open = new Map<AbortController, Promise<void>>();

  track(ctl: AbortController, done: Promise<void>): void {
    this.open.set(ctl, done);
    void done.finally(() => this.open.delete(ctl));
  }

  async closeAll(): Promise<void> {
    for (const ctl of this.open.keys()) ctl.abort();
    await Promise.allSettled(this.open.values());
  }
}

// The event is named by the action (one of ALERT_ACTIONS, never input), so an EventSource listens per kind.
const frame = (a: AlertView): string => `id: ${a.id}\nevent: ${a.action}\ndata: ${JSON.stringify(a)}\n\n`;

/**
 * `GET /v1/alerts`: the alerts (docs/operations.md#alerts), newest first, a page at a time.
 *
 * `GET /v1/alerts/stream`: Server-Sent Events of alerts, `id:` the audit row id, `event:` the action.
 * Replays from `Last-Event-ID` (a reconnecting EventSource sends it) or `?since=`; without
 * either it starts at the newest alert now. `?action=` keeps only those actions. Ends when the
 * client goes, the user is revoked, or the server shuts down (`streams` lets the server end them all).
 */
export function alertRoutes(app: FastifyInstance, svc: Service, hub: AlertHub, streams: OpenStreams): void {
  const pool = svc.db.pool;

  route(app, 'listAlerts', async ({ query }) => listAlerts(pool, query));

  route(app, 'acknowledgeAlert', async ({ params: { id } }, req) => acknowledgeAlert(pool, id, principalOf(req).name));

  route(app, 'acknowledgeAlerts', async ({ body }, req) =>
    acknowledgeAlerts(pool, { upTo: body?.up_to, action: body?.action }, principalOf(req).name),
  );

  route(app, 'streamAlerts', async ({ query: q }, req, reply) => {
    // Checked before the 200 goes out, so a bad filter is a 400 naming `action`.
    const action = q.action === undefined ? undefined : parseAlertActions(q.action, 'action');
    const header = lastEventId(req.headers['last-event-id']);
    const principal = principalOf(req);
    // The starting point is fixed before the 200 goes out, so an alert after the client saw it is never skipped.
    const sinceId = header ?? q.since ?? (await latestAlertId(pool));

    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      // The connection ends with the stream: a shutdown then has no idle keep-alive socket to wait for.
      connection: 'close',
      'x-accel-buffering': 'no',
    });
    const ctl = new AbortController();
    const stop = (): void => ctl.abort();
    res.on('close', stop);
    const keepAlive = setInterval(() => void write(res, ': keep-alive\n\n'), KEEP_ALIVE_MS);
    keepAlive.unref();
    let finished!: () => void;
    streams.track(ctl, new Promise<void>((r) => (finished = r)));
    try {
      await write(res, `retry: 2000\n: connected at alert ${sinceId}\n\n`);
      await pumpAlerts({
        pool,
        sinceId,
        action,
        signal: ctl.signal,
        subscribe: hub.subscribe,
        log: svc.log,
        onAlert: (a) => write(res, frame(a)),
        stillAllowed: async () => {
          const r = await pool.query(`select 1 from users where id = $1 and revoked_at is null`, [principal.id]);
          return r.rows.length > 0;
        },
      });
    } catch (err) {
      svc.log.warn({ event: 'http.sse_error', err: coerceError(err).message }, 'alert stream ended on an error');
    } finally {
      clearInterval(keepAlive);
      res.off('close', stop);
      if (!res.writableEnded) res.end();
      finished();
    }
    // Hijacked: fastify leaves the answer to the code above.
    return reply;
  });
}
