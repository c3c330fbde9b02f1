import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { route } from '../route.js';

/**
 * The operator dashboard (docs/operations.md#dashboard): static files `npm run build` puts in
 * dist/dashboard (Vite, from dashboard/), served at `/` with a strict Content-Security-Policy:
 * scripts, styles and requests only from this server, no inline script, no framing. The page talks
 * to the public /v1 API with its session cookie.
 */

/** dist/dashboard of this package, from src/http/routes (tests) as from dist/http/routes. */
export const DASHBOARD_DIR = fileURLToPath(new URL('../../../dist/dashboard/', import.meta.url));

export const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
};

interface Asset {
  body: Buffer;
  type: string;
}

/** Every built file, read once: the bundle is small, and a request can then never name a path outside it. */
function loadAssets(dir: string): Map<string, Asset> {
  const out = new Map<string, Asset>();
  if (!existsSync(dir)) return out;
  const walk = (rel: string): void => {
    for (const e of readdirSync(join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(r);
      else if (TYPES[extname(e.name)]) out.set(r, { body: readFileSync(join(dir, r)), type: TYPES[extname(e.name)]! });
    }
  };
  walk('');
  return out;
}

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY')
    .header('cross-origin-opener-policy', 'same-origin');
}

export function dashboardRoutes(app: FastifyInstance, dir: string = DASHBOARD_DIR): void {
  const assets = loadAssets(dir);

  route(app, 'dashboard', async (_in, _req, reply) => {
    const index = assets.get('index.html');
    if (!index) {
      return secure(reply).code(503).type('text/plain; charset=utf-8').send('The dashboard is not built: run `npm run build`.\n');
    }
    // Always revalidated, so a new version's asset names are picked up at once.
    return secure(reply).header('cache-control', 'no-cache').type(index.type).send(index.body);
  });

  route(app, 'dashboardAsset', async (_in, req, reply) => {
    const name = (req.params as { '*': string })['*'];
    const asset = assets.get(`assets/${name}`);
    if (!asset) {
      return secure(reply)
        .code(404)
        .send({ error: { code: 'not_found', message: `no dashboard asset ${name.slice(0, 200)}` } });
    }
    // Vite puts a content hash in every asset name: cached for good.
    return secure(reply).header('cache-control', 'public, max-age=31536000, immutable').type(asset.type).send(asset.body);
  });
}
