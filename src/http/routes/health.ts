import type { FastifyInstance } from 'fastify';
import { migrationStatus } from '../../db/migrate.js';
import { coerceError } from '../../errors.js';
import type { Service } from '../../service.js';
import { route, type AnswerAt } from '../route.js';

const READY_TIMEOUT_MS = 2_000;

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Why the process is not ready, or null when it is: the database answers and every known migration is applied. */
export async function notReadyReason(svc: Service): Promise<{ reason: string; pending?: string[]; unknown?: number[] } | null> {
  try {
    const status = await withTimeout(migrationStatus(svc.db.pool, svc.config.database.schema), READY_TIMEOUT_MS, 'database check');
    if (status.unknown.length > 0)
      return { reason: `database has migrations this code does not know: ${status.unknown.join(', ')}`, unknown: status.unknown };
    if (status.pending.length > 0) return { reason: `migrations pending: ${status.pending.join(', ')}`, pending: status.pending };
    return null;
  } catch (err) {
    // The answer is public: the error's code only (host and user names stay out); the log has the message.
    const e = coerceError(err);
    const code = (e as { code?: unknown }).code;
    const now = Date.now();
    if (now - lastLogged >= 60_000) {
      lastLogged = now;
      svc.log.warn({ event: 'db.unreachable', err: e.message }, 'readiness check: database unreachable');
    }
    return {
      reason: typeof code === 'string' && /^[A-Z0-9_]{1,32}$/.test(code) ? `database unreachable (${code})` : 'database unreachable',
    };
  }
}

let lastLogged = -Infinity;

/** Liveness, readiness and metrics: public, on both `serve` and `worker`. */
export function healthRoutes(app: FastifyInstance, svc: Service): void {
  // Liveness is the process and its event loop only: no database, so a busy pool never fails it.
  route(app, 'liveness', async () => ({ status: 'ok' }) as const);

  route(app, 'readiness', async (_in, _req, reply) => {
    const why = await notReadyReason(svc);
    if (why) return reply.code(503).send({ status: 'not_ready' as const, ...why } satisfies AnswerAt<'readiness', 503>);
    return { status: 'ready' } as const;
  });

  route(app, 'metrics', async (_in, _req, reply) => reply.type(svc.metrics.contentType).send(await svc.metrics.render()));
}
