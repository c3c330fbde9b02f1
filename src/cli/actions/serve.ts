import { parseListen, type Config } from '../../config/index.js';
import { createHttpServer, listenHttp } from '../../http/server.js';
import { createLogger, type Logger } from '../../log.js';
import { tuneHeapForService } from '../../runtime.js';
import { Service } from '../../service.js';
import { readConfig } from '../config.js';
import { EXIT, ExitError, type GlobalOptions } from '../exit.js';
import type { CliIo } from '../io.js';
import { watchForStop, type StopWatch } from '../stop.js';

interface ServeOptions extends GlobalOptions {
  listen?: string;
}

/**
 * `serve` (API + dispatcher + workers + runners) and `worker` (the same without the API; only
 * /healthz /readyz /metrics). Both run until SIGINT/SIGTERM or until the process that started
 * them exits (see stop.ts), then shut down gracefully and exit 0.
 */
async function run(io: CliIo, mode: 'serve' | 'worker', o: ServeOptions): Promise<void> {
  const config = withListen(readConfig(io, o), o.listen);
  const listen = config.server.listen;
  // The binary logs through pino's own fd 1 writer, as the service always has; a run inside
  // another process (io.stop), to its stdout. The heap setting is the process's, so only ours.
  const log = createLogger({ level: config.log.level, ...(io.stop ? { destination: io.stdout } : {}) });
  if (!io.stop) tuneHeapForService();
  // Watching from before the start: a SIGTERM while the database starts must not kill us by
  // Node's default action and leave the embedded PostgreSQL we just started behind.
  const stop = watchForStop(io);
  try {
    await serveUntilStopped(mode, config, listen, log, stop);
  } finally {
    stop.dispose();
  }
}

async function serveUntilStopped(mode: 'serve' | 'worker', config: Config, listen: string, log: Logger, stop: StopWatch): Promise<void> {
  const svc = await Service.start({ config, log, mode });
  let app;
  try {
    app = await createHttpServer(svc, { mode });
    const bound = await listenHttp(app, listen);
    if (mode === 'serve') {
      // The dashboard is where users go: the URL they reach us at (a proxy's), else our own.
      const dashboard = config.server.public_url || `${bound.url}/`;
      log.info(
        { event: 'service.listening', mode, address: bound.url, dashboard },
        `acw-webhooks serve listening on ${bound.url}; dashboard at ${dashboard}`,
      );
    } else {
      log.info({ event: 'service.listening', mode, address: bound.url }, `acw-webhooks ${mode} listening on ${bound.url}`);
    }
  } catch (err) {
    await app?.close().catch(() => undefined);
    await svc.stop();
    throw new ExitError(EXIT.failure, `cannot listen on ${listen}: ${(err as Error).message}`);
  }
  const reason = await stop.requested;
  const why = reason === 'SIGINT' || reason === 'SIGTERM' ? { signal: reason } : { reason };
  log.info({ event: 'service.stopping', ...why }, 'shutting down');
  // Stop taking requests and stop claiming at once; the database closes after both.
  await Promise.all([app.close(), svc.stopWork()]);
  await svc.stop();
  log.info({ event: 'service.stopped' }, 'stopped');
  log.flush();
}

/** `--listen` goes into the config itself, so the effective config logged at start (`service.config`) shows it. */
function withListen(config: Config, listen: string | undefined): Config {
  if (listen === undefined) return config;
  try {
    parseListen(listen);
  } catch (err) {
    throw new ExitError(EXIT.usage, `--listen: ${(err as Error).message}`);
  }
  return { ...config, server: { ...config.server, listen } };
}

export const serve = (io: CliIo, o: ServeOptions): Promise<void> => run(io, 'serve', o);
export const worker = (io: CliIo, o: ServeOptions): Promise<void> => run(io, 'worker', o);
