// A real HTTP receiver for delivery tests: records every request, answers as programmed.
import { createServer, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  method: string;
  url: string;
  /** Node's view: lower-cased names, repeated headers joined. */
  headers: IncomingHttpHeaders;
  /** Header names as sent on the wire (case preserved), `[name, value, name, value, ...]`. */
  rawHeaders: string[];
  body: Buffer;
  /** Date.now() when the request head arrived. */
  receivedAt: number;
  /** The client's source port: equal ports mean a reused (keep-alive) connection. */
  remotePort: number | undefined;
}

export interface ReceiverResponse {
  /** Default 200. */
  status?: number;
  headers?: OutgoingHttpHeaders;
  body?: string | Buffer;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Never answer (the connection is kept open until the client gives up or close() is called). */
  hang?: boolean;
  /** Send the status and headers, then never finish the body. */
  hangAfterHeaders?: boolean;
}

export type Responder = (req: ReceivedRequest) => ReceiverResponse | Promise<ReceiverResponse>;

export interface Receiver {
  /** Base URL, e.g. `http://127.0.0.1:54321`; any path is accepted. */
  url: string;
  requests: ReceivedRequest[];
  setResponder(fn: Responder): void;
  /** Resolves once `count` requests have been recorded (rejects after `timeoutMs`). */
  waitForRequests(count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

/** Header names as received, with their original case; repeated headers become arrays. */
export function rawHeaderObject(raw: string[]): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    const prev = out[name];
    out[name] = prev === undefined ? value : [...(Array.isArray(prev) ? prev : [prev]), value];
  }
  return out;
}

export async function startReceiver(handler?: Responder): Promise<Receiver> {
  let responder: Responder = handler ?? (() => ({ status: 200, body: 'ok' }));
  const requests: ReceivedRequest[] = [];
  const waiters = new Set<() => void>();
  const hanging = new Set<ServerResponse>();

  const server = createServer((req, res) => {
    const receivedAt = Date.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const record: ReceivedRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks),
        receivedAt,
        remotePort: req.socket.remotePort,
      };
      requests.push(record);
      for (const wake of waiters) wake();
      void respond(record, res);
    });
  });
  // A client that gives up mid-response (timeouts, truncated reads) is expected here.
  server.on('clientError', (_err, socket) => socket.destroy());

  async function respond(record: ReceivedRequest, res: ServerResponse): Promise<void> {
    res.on('error', () => {});
    let plan: ReceiverResponse;
    try {
      plan = await responder(record);
    } catch {
      plan = { status: 500, body: 'responder threw' };
    }
    if (plan.delayMs) await new Promise((r) => setTimeout(r, plan.delayMs));
    if (plan.hang) {
      hanging.add(res);
      return;
    }
    res.writeHead(plan.status ?? 200, plan.headers);
    if (plan.hangAfterHeaders) {
      res.flushHeaders();
      if (plan.body !== undefined) res.write(plan.body);
      hanging.add(res);
      return;
    }
    res.end(plan.body);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    setResponder(fn) {
      responder = fn;
    },
    waitForRequests(count, timeoutMs = 5_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (requests.length < count) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(requests.slice(0, count));
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`receiver got ${requests.length} of ${count} requests within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    async close() {
      for (const res of hanging) res.destroy();
      hanging.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
