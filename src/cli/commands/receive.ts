import { createServer } from 'node:http';
import type { Command } from 'commander';
import { parseListen } from '../../config/index.js';
import { verifyWebhookDetailed } from '../../verify.js';
import { EXIT, ExitError } from '../context.js';
import { watchForStop } from '../stop.js';

interface ReceiveOptions {
  listen: string;
  secret: string;
  status: string;
}

/** A local receiver for development: prints each delivery as a JSON line and whether it verifies. */
export function registerReceive(program: Command): void {
  program
    .command('receive')
    .description('run a local webhook receiver that prints each delivery and whether its signature verifies')
    .option('--listen <host:port>', 'where to listen', '127.0.0.1:9000')
    .requiredOption('--secret <secret>', 'the endpoint secret to verify with')
    .option('--status <code>', 'HTTP status to answer with', '200')
    .option('-c, --config <file>', 'config file (unused; accepted like every command)')
    .action(async (o: ReceiveOptions) => {
      let addr;
      try {
        addr = parseListen(o.listen);
      } catch (err) {
        throw new ExitError(EXIT.usage, `--listen: ${(err as Error).message}`);
      }
      const status = Number(o.status);
      if (!Number.isInteger(status) || status < 100 || status > 599) throw new ExitError(EXIT.usage, `--status: expected an HTTP status, got ${o.status}`);
      const server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const body = Buffer.concat(chunks);
          const v = verifyWebhookDetailed({ secret: o.secret, headers: req.headers, body });
          let parsed: unknown = body.toString('utf8');
          try {
            parsed = JSON.parse(body.toString('utf8'));
          } catch {
            // Not JSON: print it as text.
          }
          const h = req.headers;
          process.stdout.write(
            `${JSON.stringify({
              received_at: new Date().toISOString(),
              method: req.method,
              path: req.url,
              verified: v.ok,
              ...(v.ok ? { scheme: v.scheme } : { reason: v.reason }),
              id: h['x-acw-event-id'] ?? h['webhook-id'],
              topic: h['x-acw-topic'],
              body: parsed,
            })}\n`,
          );
          res.writeHead(status, { 'content-type': 'text/plain' }).end(v.ok ? 'ok' : 'signature did not verify');
        });
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(addr.port, addr.host, resolve);
      });
      const a = server.address();
      process.stderr.write(`listening on http://${o.listen.replace(/:\d+$/, '')}:${typeof a === 'object' && a ? a.port : addr.port}\n`);
      // SIGINT/SIGTERM, the parent exiting (npx's shell) or a closed stdout stop it.
      const stop = watchForStop({ onStdoutClosed: true });
      try {
        await stop.requested;
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      } finally {
        stop.dispose();
      }
    });
}
