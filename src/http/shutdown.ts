import type { FastifyInstance } from 'fastify';

/**
 * A bounded graceful close. Node's server.close() closes idle keep-alive sockets but waits on a
 * socket that connected and sent nothing yet (until headersTimeout, 60 s), which would hold a
 * Kubernetes shutdown past its grace. So: end the long-lived streams (`before`), let in-flight
 * requests finish (at most `graceMs`), then close every remaining connection.
 */
export function installGracefulClose(app: FastifyInstance, opts: { before?: () => Promise<void>; graceMs: number }): void {
  let inFlight = 0;
  let drained: (() => void) | null = null;
  app.addHook('onRequest', (_req, reply, done) => {
    inFlight++;
    reply.raw.once('close', () => {
      inFlight--;
      if (inFlight === 0) drained?.();
    });
    done();
  });
  app.addHook('preClose', async () => {
    await opts.before?.();
    if (inFlight > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        drained = resolve;
        timer = setTimeout(resolve, opts.graceMs);
      });
      clearTimeout(timer);
    }
    app.server.closeAllConnections();
  });
}
