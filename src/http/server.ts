import { createServer } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerFactory } from 'fastify';
import { parseListen } from '../config/index.js';
import { coerceError } from '../errors.js';
import type { Service } from '../service.js';
import { AlertHub } from './alert-hub.js';
import { installAuth } from './auth.js';
import { installGracefulClose } from './shutdown.js';
import { ApiError } from '../errors.js';
import { mapError } from './errors.js';
import { openApiDocument } from './contract/document.js';
import { route } from './route.js';
import { alertRoutes, OpenStreams } from './routes/alerts.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { endpointRoutes } from './routes/endpoints.js';
import { topicRoutes } from './routes/topics.js';
import { asyncApiDocument } from '../topics/docs.js';
import type { Topic } from '../topics/rows.js';
import { healthRoutes } from './routes/health.js';
import { jobRoutes } from './routes/jobs.js';
import { notificationRoutes } from './routes/notifications.js';
import { notifyRoutes } from './routes/notify.js';
import { replayRoutes } from './routes/replay.js';
import { sessionRoutes, Sessions } from './routes/sessions.js';
import { statsRoutes } from './routes/stats.js';
import { workerRoutes } from './routes/workers.js';
import { tracing } from '../tracing/runtime.js';

/** How long a shutdown waits for in-flight requests before closing their connections. */
const CLOSE_GRACE_MS = 10_000;

export interface HttpServerOptions {
  /** `serve`: the whole API; `worker`: only /healthz, /readyz and /metrics. */
  mode: 'serve' | 'worker';
  /** Called before the server is sealed, to add hooks of one's own (the test suite checks every answer against the document so). */
  extend?: (app: FastifyInstance) => void;
}

/**
 * The document's `servers`: server.public_url, else the address it listens on; a wildcard address
 * (0.0.0.0, ::) names no host a client could use, so then `/`, relative to where the document was fetched.
 */
function serverUrl(app: FastifyInstance, publicUrl: string): string {
  if (publicUrl) return publicUrl.replace(/\/+$/, '');
  const addr = app.server.address();
  if (!addr || typeof addr === 'string' || addr.address === '0.0.0.0' || addr.address === '::') return '/';
  const host = addr.address.includes(':') ? `[${addr.address}]` : addr.address;
  return `http://${host}:${addr.port}`;
}

/**
 * The HTTP API on Fastify. Bodies are JSON only (415 otherwise), limited to
 * `server.max_body` (413), validated by zod schemas (400 naming the field); every error answer is
 * `{error: {code, message, details?}}` and only a bug or an outage is a 5xx.
 */
const ROUTES_OF = new WeakMap<FastifyInstance, string[]>();

/** The routes a server created here has, as `METHOD /path` (HEAD, added by fastify to each GET, left out), sorted. */
export function registeredRoutes(app: FastifyInstance): string[] {
  return [...(ROUTES_OF.get(app) ?? [])].toSorted();
}

/**
 * With tracing on, the node:http server Fastify would make, its handler running each request
 * inside a server span (docs/operations.md#tracing); with it off, Fastify's own.
 */
function tracedServer(): { serverFactory?: FastifyServerFactory } {
  const t = tracing;
  if (!t) return {};
  return {
    serverFactory: (handler, o) => {
      const server = createServer(o.http ?? {}, t.serverHandler(handler));
      if (typeof o.keepAliveTimeout === 'number') server.keepAliveTimeout = o.keepAliveTimeout;
      if (typeof o.requestTimeout === 'number') server.requestTimeout = o.requestTimeout;
      if (typeof o.connectionTimeout === 'number') server.setTimeout(o.connectionTimeout);
      return server;
    },
  };
}

export async function createHttpServer(svc: Service, opts: HttpServerOptions): Promise<FastifyInstance> {
  const maxBody = svc.config.server.max_body;
  const app = Fastify({
    ...tracedServer(),
    logger: false,
    bodyLimit: maxBody,
    routerOptions: { maxParamLength: 200 },
    frameworkErrors: (err, _req, reply) => {
      const m = mapError(err, maxBody);
      // The option's reply type is generic over route schemas we do not use; it is a plain reply.
      void (reply as unknown as FastifyReply).code(m.status).headers(m.headers).send(m.body);
    },
  });

  // Every route as registered (`METHOD /path`, HEAD left out): the OpenAPI registry's test compares them.
  const registered: string[] = [];
  ROUTES_OF.set(app, registered);
  app.addHook('onRoute', (r) => {
    for (const m of [r.method].flat()) if (m !== 'HEAD') registered.push(`${m} ${r.url}`);
  });
  const t = tracing;
  if (t) app.addHook('onRequest', async (req) => t.route(req.method, req.routeOptions.url ?? ''));

  // Our own JSON parser: no other content type is accepted, and an empty body means "no body".
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') {
      done(null, undefined);
      return;
    }
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(new ApiError(400, 'invalid_json', `body: malformed JSON (${coerceError(err).message})`, { field: 'body' }), undefined);
    }
  });

  app.setErrorHandler((err, req, reply) => {
    const m = mapError(err, maxBody);
    if (m.unexpected) {
      const e = coerceError(err);
      svc.log.error(
        { event: 'http.error', method: req.method, route: req.routeOptions.url, status: m.status, err: e.message, stack: e.stack },
        'request failed',
      );
    }
    return reply.code(m.status).headers(m.headers).send(m.body);
  });
  app.setNotFoundHandler((req, reply) =>
    reply.code(404).send({ error: { code: 'not_found', message: `no route ${req.method} ${req.url.split('?')[0]!.slice(0, 200)}` } }),
  );

  const streams = new OpenStreams();
  // Open event streams would hold close() forever: they end first, then in-flight requests get their grace.
  installGracefulClose(app, { before: () => streams.closeAll(), graceMs: CLOSE_GRACE_MS });
  // Asked for on the first authenticated request: a worker's health-only server opens no LISTEN for it.
  // The dashboard's session cookie is accepted by `serve` only; a worker's health server has no users.
  const sessions = opts.mode === 'serve' ? new Sessions(svc) : undefined;
  installAuth(app, { authenticate: (token) => svc.tokenCache().authenticate(token) }, sessions);
  healthRoutes(app, svc);
  if (sessions) {
    const hub = new AlertHub({ listenHub: svc.listenHub, channel: svc.channels.alerts });
    notifyRoutes(app, svc);
    jobRoutes(app, svc);
    endpointRoutes(app, svc);
    topicRoutes(app, svc);
    replayRoutes(app, svc);
    notificationRoutes(app, svc);
    alertRoutes(app, svc, hub, streams);
    statsRoutes(app, svc);
    workerRoutes(app, svc);
    sessionRoutes(app, svc, sessions);
    dashboardRoutes(app);
    // Public, like /healthz: the shape of the API, generated from the routes' schemas (docs/api.md).
    // With the catalog's topics in `webhooks`: made again when the catalog changed.
    const openapi = perCatalog(svc, (topics) => openApiDocument({ serverUrl: serverUrl(app, svc.config.server.public_url), topics }));
    route(app, 'openapi', async (_in, _req, reply) => reply.type('application/json; charset=utf-8').send(openapi()));
    const asyncapi = perCatalog(svc, asyncApiDocument);
    route(app, 'asyncapi', async (_in, _req, reply) => reply.type('application/json; charset=utf-8').send(asyncapi()));
    // LISTEN before the first client can connect, so no wake-up is lost.
    app.addHook('onReady', async () => hub.start());
    app.addHook('onClose', async () => hub.close());
  }
  opts.extend?.(app);
  await app.ready();
  return app;
}

/** A document of the topic catalog as JSON text, made once per version of the catalog. */
function perCatalog(svc: Service, make: (topics: readonly Topic[]) => unknown): () => string {
  let made: { topics: readonly Topic[]; text: string } | undefined;
  return () => {
    const topics = svc.topics.topics;
    if (made?.topics !== topics) made = { topics, text: JSON.stringify(make(topics)) };
    return made.text;
  };
}

export interface BoundAddress {
  host: string;
  port: number;
  /** e.g. `http://127.0.0.1:8080` */
  url: string;
}

/** Listen on `HOST:PORT` (port 0: any free one) and say where. */
export async function listenHttp(app: FastifyInstance, listen: string): Promise<BoundAddress> {
  const { host, port } = parseListen(listen);
  await app.listen({ host, port });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error(`HTTP server did not bind to ${listen}`);
  const shown = addr.family === 'IPv6' || addr.address.includes(':') ? `[${addr.address}]` : addr.address;
  return { host: addr.address, port: addr.port, url: `http://${shown}:${addr.port}` };
}
