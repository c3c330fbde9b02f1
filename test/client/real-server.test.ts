import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AcwError, createClient } from '../../src/client.js';

// The same client against a real socket (no nock): undici's own timeout, abort and refusal paths.

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

const servers: Array<{ close(): void; closeAllConnections(): void }> = [];
afterEach(() => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

async function serve(handlers: Handler[]): Promise<{ url: string; bodies: Array<Record<string, unknown>> }> {
  const bodies: Array<Record<string, unknown>> = [];
  let n = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      bodies.push(JSON.parse(body) as Record<string, unknown>);
      const h = handlers[Math.min(n++, handlers.length - 1)];
      h?.(req, body, res);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, bodies };
}

const json = (status: number, body: unknown): Handler => (_req, _body, res) => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
};
const hang: Handler = () => {};
/** Sends the status line and headers, then never finishes the body. */
const stallBody: Handler = (_req, _body, res) => {
  res.writeHead(202, { 'content-type': 'application/json' });
  res.write('{"event_id":');
};

describe('createClient against a real HTTP server', () => {
  it('retries a 503, a hung request and a stalled body with one key, then succeeds', async () => {
    const ok = { event_id: 'e1', job_ids: [] };
    const { url, bodies } = await serve([json(503, { error: { code: 'unavailable', message: 'x' } }), hang, stallBody, json(202, ok)]);
    const res = await createClient({ url, token: 'tok', timeoutMs: 100, backoff: { baseMs: 1, capMs: 2 } }).notify('a.b', { x: 1 });
    expect(res).toEqual({ ...ok, replayed: false });
    expect(bodies).toHaveLength(4);
    expect(new Set(bodies.map((b) => b.idempotency_key)).size).toBe(1);
  });

  it('reports a refused connection as a network error after the retries', async () => {
    // A port that was free a moment ago: nothing listens there now.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise((resolve) => probe.close(resolve));
    const dead = `http://127.0.0.1:${port}`;
    const err = await createClient({ url: dead, token: 'tok', retries: 1, backoff: { baseMs: 1, capMs: 2 } })
      .notify('a.b', 1)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AcwError);
    expect(err).toMatchObject({ status: 0, code: 'network_error', attempts: 2 });
    expect((err as AcwError).message).toMatch(/ECONNREFUSED/);
  });
});
