/** The HTTP API: `createHttpServer(svc, {mode})`, then `listenHttp(app, 'HOST:PORT')`. */
export { createHttpServer, listenHttp, type BoundAddress, type HttpServerOptions } from './server.js';
export { type ErrorBody } from './errors.js';
