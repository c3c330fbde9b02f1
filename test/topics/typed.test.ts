// Typed producers (docs/integrate.md#typed-topics): `acw-webhooks topics types` prints a `Topics` map
// from the catalog's schemas, and a consumer's file (fixtures/producer.ts) compiled against it with
// tsc: its right calls compile, and each call marked `wrong:` (a misspelt field, a wrong type, a
// topic not in the catalog...) is a compile error, through both the client and notify(db, …).
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTopic } from '../../src/topics/store.js';
import { topicsDeclaration } from '../../src/topics/typegen.js';
import { runCliInProcess } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const FIXTURE = fileURLToPath(new URL('./fixtures/producer.ts', import.meta.url));
const TSC = join(ROOT, 'node_modules/.bin/tsc');

let db: TestDatabase;
let dir: string;

const ORDER = {
  type: 'object',
  properties: {
    order_id: { type: 'string', description: 'our order number' },
    total: { type: 'number' },
    lines: { type: 'array', items: { $ref: '#/$defs/line' } },
  },
  required: ['order_id'],
  additionalProperties: false,
  $defs: { line: { type: 'object', properties: { sku: { type: 'string' }, qty: { type: 'integer' } }, required: ['sku', 'qty'] } },
};
const USER = {
  type: 'object',
  properties: { email: { type: 'string', format: 'email' }, plan: { enum: ['free', 'pro'] } },
  required: ['email', 'plan'],
};

beforeAll(async () => {
  db = await createTestDatabase();
  const ctx = { pool: db.pool, channel: 'public.acw_topics' };
  await createTopic(ctx, { name: 'order.created', description: 'an order was placed', schema: ORDER, examples: [{ order_id: 'o' }] }, 't');
  await createTopic(ctx, { name: 'user.signed_up', schema: USER, examples: [{ email: 'a@b.c', plan: 'free' }] }, 't');
  // Inside the package, so the fixture's `acw-webhooks` imports resolve as a consumer's would (paths below).
  dir = mkdtempSync(join(ROOT, 'test/topics/.typed-'));
});
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await db?.drop();
});

describe('topics types', () => {
  it('prints the Topics map, from JSON Schema to TypeScript', async () => {
    const out = await runCliInProcess(['topics', 'types'], { ...process.env, DATABASE_URL: db.url });
    expect(out.code).toBe(0);
    expect(out.stdout).toContain('export interface Topics {');
    expect(out.stdout).toContain(
      '  /** an order was placed (schema version 1) */\n  "order.created": {\n    /** our order number */\n    order_id: string;',
    );
    expect(out.stdout).toContain('lines?: ({\n      sku: string;\n      qty: number;\n    })[];');
    expect(out.stdout).toContain('plan: "free" | "pro";');
    writeFileSync(join(dir, 'topics.ts'), out.stdout);
  });

  it('a wrong payload or topic fails tsc, through the client and notify(db, …); the right ones compile', async () => {
    copyFileSync(FIXTURE, join(dir, 'producer.ts'));
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          target: 'ES2023',
          lib: ['ES2023'],
          types: ['node'],
          typeRoots: [join(ROOT, 'node_modules/@types')],
          noEmit: true,
          skipLibCheck: true,
          // The package's own sources stand for its published types (dist/*.d.ts, built from them); the
          // main entry's notify is src/outbox.ts's, re-exported: taken from there, tsc need not check
          // the whole service that src/index.ts also exports.
          paths: {
            'acw-webhooks': [join(ROOT, 'src/outbox.ts')],
            'acw-webhooks/client': [join(ROOT, 'src/client.ts')],
            'acw-webhooks/testing': [join(ROOT, 'src/testing.ts')],
          },
        },
        files: ['producer.ts', 'topics.ts'],
      }),
    );
    const res = await promisify(execFile)(TSC, ['-p', dir], { cwd: dir }).catch((e: { stdout: string; code: number }) => e);
    const errors = String(res.stdout)
      .split('\n')
      .filter((l) => l.startsWith('producer.ts('))
      .map((l) => Number(/^producer\.ts\((\d+),/.exec(l)![1]));
    const lines = readFileSync(FIXTURE, 'utf8').split('\n');
    const wrong = lines.flatMap((l, i) => (l.includes('// wrong:') ? [i + 1] : []));
    expect(wrong).toHaveLength(9);
    expect(
      String(res.stdout)
        .split('\n')
        .filter((l) => l && !l.startsWith('producer.ts(') && !l.startsWith(' ')),
    ).toEqual([]);
    expect([...new Set(errors)]).toEqual(wrong);
  });

  it('the generator: unions, tuples, open maps, consts, refs too deep', () => {
    const d = topicsDeclaration([
      {
        name: 'x.y',
        description: '',
        version: 3,
        schema: {
          type: 'object',
          properties: {
            a: { type: ['string', 'null'] },
            b: { prefixItems: [{ const: 1 }, { type: 'boolean' }], items: false },
            c: { type: 'object', additionalProperties: { type: 'number' } },
            d: { anyOf: [{ type: 'string' }, { type: 'integer' }] },
            'e-f': { $ref: '#/properties/e-f' },
          },
          required: ['a', 'z'],
        },
      },
    ]);
    expect(d).toContain('a: (string | null);');
    expect(d).toContain('b?: [1, boolean];');
    expect(d).toContain('c?: {\n      [key: string]: number;\n    };');
    expect(d).toContain('d?: (string | number);');
    expect(d).toContain('"e-f"?: unknown;');
    expect(d).toContain('z: unknown;');
  });
});
