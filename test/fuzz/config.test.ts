// Property-based fuzzing of the config loader (issue 18): a valid config.yaml with generated
// changes (values replaced by hostile ones, keys removed or added), as a tree and as YAML text
// (also broken), and generated environment values. It answers a Config or a ConfigError whose
// every issue names its key (or the file), and no issue carries a secret from the environment.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { ConfigError, loadConfig, parseConfig } from '../../src/config/index.js';
import { oddString, RUNS, SEED } from './arbitraries.js';

const dir = mkdtempSync(join(tmpdir(), 'acw-fuzz-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Half the HTTP count: each case validates a whole configuration (a few ms), and 1,000 already cover every key many times.
const params = (name: string, runs = Math.ceil(RUNS / 2)): fc.Parameters<unknown> => {
  let h = SEED;
  for (const c of name) h = (Math.imul(h, 31) + c.charCodeAt(0)) | 0;
  return { seed: h, numRuns: runs };
};

type Tree = Record<string, unknown>;

/** A valid configuration using every section; secrets come from the environment. */
const TEMPLATE: Tree = {
  server: {
    listen: '127.0.0.1:8080',
    max_body: '1mb',
    auth: { users: [{ name: 'ops', role: 'admin', token: '${ADMIN_TOKEN}' }] },
  },
  database: { url: 'postgres://acw:${DB_PASSWORD}@127.0.0.1:5432/acw', pool_size: 10, migrate: true, schema: 'public', data_dir: '.acw' },
  log: { level: 'info' },
  jobs: {
    enabled: true,
    workers: 4,
    max_attempts: 6,
    poll_interval: '2s',
    shutdown_grace: '25s',
    retry: { base: '10s', max: '5m', jitter: 0.2 },
    job_reaper: { enabled: true, interval: '1m', lease_timeout: '5m' },
    job_purge: { enabled: true, interval: '24h', completed_retention: '168h', dead_retention: '720h', batch_size: 1000 },
  },
  secrets: { encryption_key: '${KEY}' },
  notify: {
    webhook: {
      url: 'https://hooks.example.com/acw',
      secret: '${WEBHOOK_SECRET}',
      topics: ['*'],
      timeout: '10s',
      max_in_flight: 16,
      rate_limit: '20/s',
      scheme: 'acw',
      headers: { 'X-Team': 'ops' },
      circuit: { enabled: true, failure_threshold: 10, failure_rate: 0.5, window: '1m', cooldown: '30s' },
      endpoints: [
        {
          name: 'billing',
          url: 'https://billing.example.com/hooks',
          secret: '${BILLING_SECRET}',
          topics: ['billing.*'],
          headers: { Authorization: 'Bearer ${BILLING_TOKEN}' },
          scheme: 'acw',
        },
      ],
      service_endpoints: { topics: ['billing.*'] },
      allow_networks: ['10.0.0.0/8'],
    },
  },
};

/** The environment variables holding secrets: their values must never appear in an error. */
const SECRET_VARS = ['ADMIN_TOKEN', 'DB_PASSWORD', 'WEBHOOK_SECRET', 'BILLING_SECRET', 'BILLING_TOKEN'] as const;

/** Every key path of a tree (containers included), for picking one to change. */
function paths(node: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [prefix];
  if (Array.isArray(node)) node.forEach((v, i) => out.push(...paths(v, [...prefix, i])));
  else if (node && typeof node === 'object') for (const [k, v] of Object.entries(node)) out.push(...paths(v, [...prefix, k]));
  return out;
}

type Op = { kind: 'replace' | 'delete' | 'add'; at: number; key: string; value: unknown };

function apply(tree: Tree, ops: Op[]): unknown {
  let root: unknown = structuredClone(tree);
  for (const op of ops) {
    const all = paths(root);
    const path = all[op.at % all.length]!;
    if (path.length === 0) {
      if (op.kind === 'replace') root = op.value;
      continue;
    }
    const parent = path.slice(0, -1).reduce<unknown>((n, k) => (n as Record<string | number, unknown>)[k], root) as Record<
      string | number,
      unknown
    >;
    const last = path.at(-1)!;
    if (op.kind === 'replace') parent[last] = op.value;
    else if (op.kind === 'delete') {
      if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete parent[last];
    } else {
      const target = parent[last];
      if (target && typeof target === 'object' && !Array.isArray(target)) (target as Record<string, unknown>)[op.key] = op.value;
      else if (Array.isArray(target)) target.push(op.value);
    }
  }
  return root;
}

/** Values a config key should never get, and interpolation in every form. */
const hostileValue: fc.Arbitrary<unknown> = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    oddString,
    fc.constantFrom(
      '${KEY}',
      '${UNSET_VAR}',
      '${UNSET_VAR:-fallback}',
      '${',
      '${}',
      '$${NOT_A_VAR}',
      '${bad name}',
      '${ADMIN_TOKEN',
      '0s',
      '-1s',
      '1e400',
      '99999999999h',
      '*',
      '',
      ' ',
      'http://',
      'postgres://x@/',
      '127.0.0.1:99999',
      '[::1]:0',
      '300.0.0.1/8',
    ),
    fc.integer(),
    fc.double(),
    fc.constantFrom(0, -1, 2 ** 53, Number.MAX_VALUE, Infinity, -Infinity, NaN, true, false, null),
    fc.array(tie('v'), { maxLength: 3 }),
    fc.dictionary(fc.oneof(oddString, fc.constantFrom('__proto__', 'constructor', 'name', 'url')), tie('v'), { maxKeys: 3 }),
  ),
})).v;

const opArb: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom('replace', 'replace', 'delete', 'add'),
  at: fc.nat(),
  key: fc.oneof(fc.constantFrom('unknown_key', 'listen', 'secret', 'urls', '__proto__'), oddString),
  value: hostileValue,
});

/** A secret value with a marker to look for, plus odd characters that break URLs and headers. */
const secretValue = fc
  .tuple(
    fc.uint8Array({ minLength: 4, maxLength: 4 }).map((b) => Buffer.from(b).toString('hex')),
    oddString,
  )
  .map(([h, tail]) => `Zq${h}${tail}`);
const envArb = fc.record(
  {
    ADMIN_TOKEN: secretValue,
    DB_PASSWORD: secretValue,
    WEBHOOK_SECRET: secretValue,
    BILLING_SECRET: secretValue,
    BILLING_TOKEN: secretValue,
    KEY: fc.oneof(
      fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('base64')),
      fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b).toString('base64')),
      oddString,
    ),
    DATABASE_URL: fc.oneof(fc.constantFrom('postgres://u:p@127.0.0.1/db', 'not a url', 'mysql://x', ''), oddString),
    ACW_ENCRYPTION_KEY: oddString,
  },
  { requiredKeys: ['ADMIN_TOKEN', 'DB_PASSWORD', 'WEBHOOK_SECRET', 'BILLING_SECRET', 'BILLING_TOKEN'] },
);

/** The secret markers (`Zq` + 8 hex) of an environment. */
const markers = (env: Record<string, string | undefined>): string[] => SECRET_VARS.map((k) => env[k]!.slice(0, 10));

/** Whether a hostile value placed in a non-secret key brought a secret variable there (then echoing it is no leak). */
const movesSecrets = (ops: Op[]): boolean =>
  JSON.stringify(ops).match(/\$\{(ADMIN_TOKEN|DB_PASSWORD|WEBHOOK_SECRET|BILLING_SECRET|BILLING_TOKEN)/) !== null;

let checked = 0;

function checkOutcome(run: () => unknown, env: Record<string, string | undefined>, ops: Op[], file?: string): void {
  checked++;
  let err: unknown;
  try {
    run();
    return;
  } catch (e) {
    err = e;
  }
  // Anything but a ConfigError (a TypeError from a value of the wrong shape) is a crash.
  if (!(err instanceof ConfigError))
    throw new Error(`not a ConfigError: ${String(err)}\nops: ${JSON.stringify(ops).slice(0, 500)}`, { cause: err });
  expect(err.issues.length, 'a ConfigError lists its issues').toBeGreaterThan(0);
  for (const issue of err.issues) {
    // `<key.path>: <message>`, or `<file>: <message>` for the file itself (unreadable, not YAML).
    const where = issue.slice(0, issue.indexOf(': '));
    expect(issue.indexOf(': '), `an issue names its key: ${issue}`).toBeGreaterThan(0);
    expect(
      where === file || /^[A-Za-z_[]|^config$/.test(where) || (file !== undefined && issue.startsWith(file)),
      `an issue names its key: ${issue}`,
    ).toBe(true);
  }
  const leaked = movesSecrets(ops) ? [] : markers(env).filter((m) => err.message.includes(m));
  expect(leaked, `a secret in a configuration error: ${err.message}`).toEqual([]);
}

describe(`fuzzing the config loader (seed ${SEED}, ${RUNS} cases per property)`, () => {
  it('a generated tree and environment: a Config or a ConfigError naming each key, never a secret', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 4 }), envArb, fc.boolean(), (ops, env, needSecrets) => {
        const tree = apply(TEMPLATE, ops);
        if (needSecrets) checkOutcome(() => parseConfig(tree, env), env, ops);
        else {
          // loadConfig without a file reads only the environment; with one, the tree as YAML.
          const file = join(dir, 'tree.yaml');
          writeFileSync(file, stringify(tree));
          checkOutcome(() => loadConfig({ path: file, env, needSecrets: false }), env, ops, file);
        }
      }),
      params('tree'),
    );
    expect(checked).toBe(params('tree').numRuns!);
  });

  it('generated YAML text (broken, tabs, anchors, tags, duplicate keys): a Config or a ConfigError, never a crash', () => {
    const edits = fc.constantFrom(
      '\t',
      ':',
      '- ',
      '&a ',
      '*a',
      '<<: *a\n',
      '!!binary ',
      '!!js/function ',
      '!!python/object ',
      '? ',
      '"',
      "'",
      '{',
      '[',
      '\n  ',
      '\u0000',
      '\ufeff',
      '%YAML 1.1\n---\n',
      '---\n',
      '...\n',
      'server: {}\n',
      'log: {level: info}\nlog: {level: debug}\n',
    );
    fc.assert(
      fc.property(
        fc.array(opArb, { maxLength: 2 }),
        fc.array(fc.tuple(fc.nat(), fc.oneof(edits, oddString)), { maxLength: 3 }),
        fc.option(fc.nat(), { nil: undefined }),
        envArb,
        (ops, inserts, cut, env) => {
          let text = stringify(apply(TEMPLATE, ops));
          for (const [at, s] of inserts) {
            const i = at % (text.length + 1);
            text = text.slice(0, i) + s + text.slice(i);
          }
          if (cut !== undefined) text = text.slice(0, cut % (text.length + 1));
          const file = join(dir, 'text.yaml');
          writeFileSync(file, text);
          checkOutcome(() => loadConfig({ path: file, env }), env, [...ops, { kind: 'add', at: 0, key: '', value: inserts }], file);
        },
      ),
      params('yaml'),
    );
    expect(checked).toBe(2 * params('yaml').numRuns!);
  });
});
