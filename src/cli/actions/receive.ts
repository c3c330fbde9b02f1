import { mkdirSync, openSync, writeSync, closeSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { parseListen } from '../../config/index.js';
import { verifyWebhookDetailed, type VerifyFailureReason } from '../../verify.js';
import { EXIT, ExitError } from '../exit.js';
import { printJson, type CliIo } from '../io.js';
import { readSecretFile } from '../secret-file.js';
import { watchForStop } from '../stop.js';

interface ReceiveOptions {
  listen: string;
  secret?: string[];
  secretFile?: string;
  status: string;
  acceptInvalid?: boolean;
  save?: string;
}

/** The headers a signature check reads, per scheme, in the case the service sends them. */
const SIGNATURE_HEADERS = {
  acw: ['X-ACW-Event-Id', 'X-ACW-Timestamp', 'X-ACW-Signature'],
  // Sent only during a secret rotation, so never reported missing.
  acwOptional: ['X-ACW-Signature-Next', 'X-ACW-Topic'],
  standard: ['webhook-id', 'webhook-timestamp', 'webhook-signature'],
} as const;

const TOLERANCE_S = 300;

/** The signature-related headers as received (names in their case on the wire), and those missing. */
function signatureHeaders(req: IncomingMessage): { scheme: 'acw' | 'standard'; got: Record<string, string>; missing: string[] } {
  const has = (name: string): boolean => req.headers[name.toLowerCase()] !== undefined;
  const scheme = !has('x-acw-signature') && SIGNATURE_HEADERS.standard.some(has) ? 'standard' : 'acw';
  const wanted: readonly string[] = [...SIGNATURE_HEADERS[scheme], ...(scheme === 'acw' ? SIGNATURE_HEADERS.acwOptional : [])];
  const got: Record<string, string> = {};
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    if (wanted.some((w) => w.toLowerCase() === name.toLowerCase()))
      got[name] = got[name] === undefined ? (raw[i + 1] as string) : `${got[name]}, ${raw[i + 1]}`;
  }
  return { scheme, got, missing: SIGNATURE_HEADERS[scheme].filter((n) => !has(n)) };
}

/** Why a delivery did not verify, in words that point at the fix. */
function why(reason: VerifyFailureReason, scheme: 'acw' | 'standard', missing: string[], timestamp: string | undefined): string {
  const [tsHeader, sigHeader] = scheme === 'acw' ? ['X-ACW-Timestamp', 'X-ACW-Signature'] : ['webhook-timestamp', 'webhook-signature'];
  const age = timestamp !== undefined && /^\d+$/.test(timestamp.trim()) ? Math.floor(Date.now() / 1000) - Number(timestamp) : undefined;
  switch (reason) {
    case 'missing_header':
      return `missing header${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`;
    case 'malformed_header':
      return scheme === 'acw'
        ? `malformed ${tsHeader}/${sigHeader}: expected Unix seconds and "sha256=<hex>", each sent once`
        : `malformed ${tsHeader}/${sigHeader}: expected Unix seconds and "v1,<base64>"`;
    case 'timestamp_too_old':
      return `${tsHeader} is ${age ?? '?'} s old (more than ${TOLERANCE_S} s): a replayed delivery, or a clock that is off`;
    case 'timestamp_in_future':
      return `${tsHeader} is ${age === undefined ? '?' : -age} s in the future (more than ${TOLERANCE_S} s): a clock that is off`;
    case 'signature_mismatch':
      return `${sigHeader}${scheme === 'acw' ? ' (and X-ACW-Signature-Next, if sent)' : ''} does not match this body with --secret: the endpoint's secret is not the one given here, or the body changed on the way`;
    case 'bad_secret':
      return scheme === 'standard' ? '--secret must be whsec_<base64> for an endpoint with scheme: standard' : '--secret is empty';
  }
}

/** Write the raw body and the headers as received, under a name no earlier delivery has; returns the path without extension. */
function save(dir: string, id: string | undefined, req: IncomingMessage, body: Buffer): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '');
  const base = `${stamp}-${(id ?? 'no-id').replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 80)}`;
  for (let n = 1; ; n++) {
    const path = join(dir, n === 1 ? base : `${base}-${n}`);
    let fd: number;
    try {
      fd = openSync(`${path}.body`, 'wx');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw err;
    }
    try {
      writeSync(fd, body);
    } finally {
      closeSync(fd);
    }
    const lines: string[] = [];
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\n`);
    const hfd = openSync(`${path}.headers`, 'w');
    try {
      writeSync(hfd, lines.join(''));
    } finally {
      closeSync(hfd);
    }
    return path;
  }
}

/** The environment variable `receive` reads a secret from (not on the command line, where `ps` shows it). */
export const RECEIVE_SECRET_ENV = 'ACW_RECEIVE_SECRET';

/**
 * The secrets to verify with: `--secret-file` (one a line; two during a rotation), then
 * $ACW_RECEIVE_SECRET, then `--secret` (kept for old scripts, with a warning: any user on the host
 * sees it in `ps`, and the shell keeps it in its history).
 */
function secretsOf(io: CliIo, o: ReceiveOptions): string[] {
  const out: string[] = [];
  if (o.secretFile !== undefined) out.push(...readSecretFile(o.secretFile));
  const env = io.env[RECEIVE_SECRET_ENV];
  if (env) out.push(env);
  if (o.secret !== undefined && o.secret.length > 0) {
    io.stderr.write(
      `warning: --secret shows the secret to every user of this host (ps) and in your shell history; use --secret-file FILE or ${RECEIVE_SECRET_ENV}\n`,
    );
    out.push(...o.secret);
  }
  if (out.length === 0) throw new ExitError(EXIT.usage, `no secret: give --secret-file FILE or set ${RECEIVE_SECRET_ENV} (or --secret S)`);
  return out;
}

/**
 * A local receiver for development: prints each delivery as a JSON line, whether it verifies and
 * why not, and answers 401 to one that does not (so a wrong secret shows up as a failing
 * endpoint, as it would at a real receiver). Never prints the secret; the signature it prints is
 * its own copy of what was sent.
 */
export async function receive(io: CliIo, o: ReceiveOptions): Promise<void> {
  let addr;
  try {
    addr = parseListen(o.listen);
  } catch (err) {
    throw new ExitError(EXIT.usage, `--listen: ${(err as Error).message}`);
  }
  const status = Number(o.status);
  if (!Number.isInteger(status) || status < 100 || status > 599)
    throw new ExitError(EXIT.usage, `--status: expected an HTTP status, got ${o.status}`);
  const secrets = secretsOf(io, o);
  const dir = o.save;
  if (dir !== undefined) {
    try {
      mkdirSync(dir, { recursive: true });
    } catch (err) {
      throw new ExitError(EXIT.usage, `--save: cannot create ${dir}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  const stop = watchForStop(io, { onStdoutClosed: true });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const v = verifyWebhookDetailed({ secret: secrets, headers: req.headers, body, toleranceSeconds: TOLERANCE_S });
      const sig = signatureHeaders(req);
      const h = req.headers;
      const id = [h['x-acw-event-id'], h['webhook-id']].find((x): x is string => typeof x === 'string');
      let saved: string | undefined;
      let saveError: string | undefined;
      if (dir !== undefined) {
        try {
          saved = save(dir, id, req, body);
        } catch (err) {
          saveError = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
        }
      }
      const answer = v.ok || o.acceptInvalid ? status : 401;
      let parsed: unknown = body.toString('utf8');
      try {
        parsed = JSON.parse(body.toString('utf8'));
      } catch {
        // Not JSON: print it as text.
      }
      const timestamp = sig.got[Object.keys(sig.got).find((n) => /^(x-acw|webhook)-timestamp$/i.test(n)) ?? ''];
      printJson(io, {
        received_at: new Date().toISOString(),
        method: req.method,
        path: req.url,
        verified: v.ok,
        ...(v.ok
          ? { scheme: v.scheme, ...(secrets.length > 1 ? { secret_index: v.secretIndex } : {}) }
          : { reason: v.reason, why: why(v.reason, sig.scheme, sig.missing, timestamp) }),
        ...(sig.missing.length > 0 ? { missing: sig.missing } : {}),
        answered: answer,
        id,
        topic: h['x-acw-topic'],
        headers: sig.got,
        ...(saved !== undefined ? { saved } : {}),
        ...(saveError !== undefined ? { save_error: saveError } : {}),
        body: parsed,
      });
      res.writeHead(answer, { 'content-type': 'text/plain' }).end(v.ok ? 'ok' : `signature did not verify: ${v.reason}`);
    });
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(addr.port, addr.host, resolve);
    });
    const a = server.address();
    io.stderr.write(`listening on http://${o.listen.replace(/:\d+$/, '')}:${typeof a === 'object' && a ? a.port : addr.port}\n`);
    await stop.requested;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  } finally {
    stop.dispose();
  }
}
