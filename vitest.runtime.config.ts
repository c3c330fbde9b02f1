import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * What CI runs on its second Node version (.ci/run; CONTRIBUTING.md, "What CI runs"): the tests of
 * what a change of runtime can change, one or two files per surface, the cheapest that exercise it
 * for real. Everything else (SQL, the queue, the domain's rules, parsers, the documents) is our
 * own code on the same PostgreSQL and runs once, on Node 20, in `npm test`.
 *
 * A file renamed or removed fails test/scripts/runtime-surface.test.ts, which also checks that
 * CONTRIBUTING.md lists these files. A new surface (a new Node API the service leans on) adds its
 * cheapest real test here, with its reason.
 */
export const RUNTIME_SURFACE: Readonly<Record<string, readonly string[]>> = {
  // undici's Agent, its timeouts, aborts and keep-alive; the client's fetch against a real socket
  // and the real service.
  'undici and fetch: the sender and the client': ['test/webhook/send-receiver.test.ts', 'test/client/real-server.test.ts'],
  // HMAC signing and both verification schemes; AES-GCM sealing of stored secrets.
  'node:crypto: signing, verify, the secret box': ['test/webhook/verify.test.ts', 'test/crypto/secret-box.test.ts'],
  // The SSRF guard's lookup hook and the connections pinned to the checked address.
  'node:net and node:dns: the SSRF guard and the connector': ['test/net/ssrf.test.ts'],
  // Fastify on node:http, bearer tokens and roles route by route.
  'the HTTP server and auth': ['test/http/auth.test.ts'],
  // The pg driver: a connection killed under a checked-out client; the one LISTEN connection.
  'the pg driver and the LISTEN connection': ['test/db/pool.test.ts', 'test/db/listen-hub.test.ts'],
  // serve and worker as processes: start-up, SIGTERM with work in flight, kill -9 and a restart,
  // the embedded PostgreSQL they start and stop.
  "child processes, signals, graceful shutdown, the CLI's start": ['test/cli/cli.test.ts'],
  // The binary's lazy loading; the package's entry points by name with Node's own ESM loader.
  'ESM loading: the binary and the package entry points': ['test/cli/help.test.ts', 'test/package/entry-points.test.ts'],
  // The heap-growth flag the long-running commands set.
  'V8 heap flags': ['test/cli/runtime.test.ts'],
};

export default defineConfig({
  ...base,
  test: { ...base.test, include: Object.values(RUNTIME_SURFACE).flat() },
});
