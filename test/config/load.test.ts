import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, test } from 'vitest';
import { resolveEndpoints } from '../../src/config/endpoints.js';
import { interpolateString } from '../../src/config/interpolate.js';
import { ConfigError, configPath, interpolate, loadConfig, maskConfig, parseConfig } from '../../src/config/load.js';

const SECRET = 'sUp3r-S3cr3t-Zebra-42';
const EXAMPLE = fileURLToPath(new URL('../../config.example.yaml', import.meta.url));
const dirs: string[] = [];

/** A fresh directory holding the given files. */
function tempDir(files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'acw-config-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The defaults as loaded from a file in `dir`: data_dir is next to the file (see 'a relative data_dir'). */
const defaultsIn = (dir: string) => parseConfig({ database: { data_dir: join(dir, '.acw') } });

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('interpolation', () => {
  test('replaces ${VAR} and falls back to ${VAR:-default} when unset or empty', () => {
    const env = { A: 'x', EMPTY: '' };
    expect(interpolateString('${A}/${B:-dflt}/${EMPTY:-e}/${EMPTY}', env).value).toBe('x/dflt/e/');
    expect(interpolateString('${A:-unused}${B:-}', env).value).toBe('x');
  });

  test('$${ is a literal ${ and a lone $ stays', () => {
    expect(interpolateString('$${A} costs $5 ${A}', { A: 'x' }).value).toBe('${A} costs $5 x');
  });

  test('an unset variable without default names the variable and the key path', () => {
    const err = errorOf(() =>
      loadConfig({ path: join(tempDir({ 'c.yaml': 'notify:\n  webhook:\n    secret: ${WEBHOOK_SECRET}\n' }), 'c.yaml'), env: {} }),
    );
    expect(err.issues).toEqual(['notify.webhook.secret: environment variable WEBHOOK_SECRET is not set']);
  });

  test('a malformed reference is an error', () => {
    expect(interpolateString('${not valid}', {}, ['k']).issues).toEqual([
      { path: ['k'], message: 'expected ${NAME} or ${NAME:-default} after "${" (write "$${" for a literal "${")' },
    ]);
    expect(interpolateString('abc ${UNCLOSED', {}).issues).toHaveLength(1);
  });

  test('works on values only, so a value with YAML syntax cannot add keys', () => {
    const tree = interpolate('notify:\n  webhook:\n    secret: ${S}\n', { S: 'x\n    url: https://evil.example.com\n' });
    expect(tree).toEqual({ notify: { webhook: { secret: 'x\n    url: https://evil.example.com\n' } } });
  });

  test('interpolated values in list items and flow mappings are replaced', () => {
    const config = parseConfig({ server: { auth: { users: [{ name: 'ops', role: 'admin', token: '${T:-}' }] } } }, { T: SECRET });
    expect(config.server.auth.users[0]?.token).toBe(SECRET);
  });

  test('a variable holding the secret never shows in the messages about it', () => {
    const dir = tempDir({ 'c.yaml': 'notify:\n  webhook:\n    url: https://h.example.com\n    scheme: standard\n    secret: ${S}\n' });
    const err = errorOf(() => loadConfig({ path: join(dir, 'c.yaml'), env: { S: SECRET } }));
    expect(err.issues).toEqual([
      `notify.webhook.secret: scheme "standard" needs a secret like "whsec_<base64>", got a value of ${SECRET.length} characters`,
    ]);
    expect(err.message).not.toContain(SECRET);
  });

  test('an unset variable and other problems are all reported together, without noise for that key', () => {
    const dir = tempDir({
      'c.yaml': 'jobs:\n  workers: ${W}\n  wokers: 1\nnotify:\n  webhook:\n    url: https://h.example.com\n    secret: ${S}\n',
    });
    expect(errorOf(() => loadConfig({ path: join(dir, 'c.yaml'), env: {} })).issues).toEqual([
      'jobs.workers: environment variable W is not set',
      'jobs.wokers: unknown key (did you mean "workers"?)',
      'notify.webhook.secret: environment variable S is not set',
    ]);
  });
});

describe('loadConfig', () => {
  test('uses the built-in defaults when no file is given or found', () => {
    const cwd = tempDir();
    expect(configPath({ cwd, env: {} })).toBeNull();
    expect(loadConfig({ cwd, env: {} })).toEqual(parseConfig({}));
  });

  test('finds ./config.yaml, then ACW_CONFIG, then an explicit path, each winning over the one before', () => {
    const cwd = tempDir({
      'config.yaml': 'jobs: { workers: 1 }\n',
      'other.yaml': 'jobs: { workers: 2 }\n',
      'cli.yaml': 'jobs: { workers: 3 }\n',
    });
    expect(loadConfig({ cwd, env: {} }).jobs.workers).toBe(1);
    expect(configPath({ cwd, env: {} })).toBe(join(cwd, 'config.yaml'));
    expect(loadConfig({ cwd, env: { ACW_CONFIG: 'other.yaml' } }).jobs.workers).toBe(2);
    expect(loadConfig({ cwd, env: { ACW_CONFIG: 'other.yaml' }, path: 'cli.yaml' }).jobs.workers).toBe(3);
    expect(configPath({ cwd, env: { ACW_CONFIG: '' } })).toBe(join(cwd, 'config.yaml'));
  });

  test('a missing explicitly given file is an error naming it', () => {
    const cwd = tempDir();
    const err = errorOf(() => loadConfig({ cwd, env: {}, path: 'nope.yaml' }));
    expect(err.issues).toEqual([`${join(cwd, 'nope.yaml')}: config file not found`]);
    expect(errorOf(() => loadConfig({ cwd, env: { ACW_CONFIG: '/no/such.yaml' } })).message).toContain('/no/such.yaml');
  });

  test('a directory given as the file is an error naming it', () => {
    const cwd = tempDir();
    mkdirSync(join(cwd, 'd'));
    expect(errorOf(() => loadConfig({ cwd, env: {}, path: 'd' })).message).toContain(join(cwd, 'd'));
  });

  test('a YAML syntax error names the file and line, without quoting the source', () => {
    const cwd = tempDir({ 'config.yaml': `notify:\n  webhook:\n    secret: ${SECRET}: x\n` });
    const err = errorOf(() => loadConfig({ cwd, env: {} }));
    expect(err.issues[0]).toMatch(new RegExp(`^${join(cwd, 'config.yaml')}:3:\\d+: `));
    expect(err.message).not.toContain(SECRET);
    expect(err.file).toBe(join(cwd, 'config.yaml'));
  });

  test('duplicate keys are a syntax error', () => {
    const cwd = tempDir({ 'config.yaml': 'jobs:\n  workers: 1\n  workers: 2\n' });
    expect(errorOf(() => loadConfig({ cwd, env: {} })).issues[0]).toMatch(/config\.yaml:3:\d+: .*unique/);
  });

  test('an empty file or one with only comments means the defaults', () => {
    const cwd = tempDir({ 'config.yaml': '# nothing here\n' });
    expect(loadConfig({ cwd, env: {} })).toEqual(defaultsIn(cwd));
  });

  test('empty keys (YAML null) take their defaults', () => {
    const cwd = tempDir({ 'config.yaml': 'jobs:\n  retry:\nnotify:\n  webhook:\n    endpoints:\n    url:\n' });
    expect(loadConfig({ cwd, env: {} })).toEqual(defaultsIn(cwd));
  });

  test('a relative data_dir (the default .acw too) is relative to the config file, not to where the command runs', () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'etc'));
    writeFileSync(join(dir, 'etc', 'given.yaml'), 'database: { data_dir: ../state }\n');
    writeFileSync(join(dir, 'etc', 'unset.yaml'), 'jobs: { workers: 1 }\n');
    writeFileSync(join(dir, 'etc', 'absolute.yaml'), 'database: { data_dir: /srv/acw }\n');
    const elsewhere = tempDir();
    expect(loadConfig({ cwd: elsewhere, env: {}, path: join(dir, 'etc', 'given.yaml') }).database.data_dir).toBe(join(dir, 'state'));
    expect(loadConfig({ cwd: elsewhere, env: {}, path: join(dir, 'etc', 'unset.yaml') }).database.data_dir).toBe(join(dir, 'etc', '.acw'));
    expect(loadConfig({ cwd: dir, env: { ACW_CONFIG: 'etc/unset.yaml' } }).database.data_dir).toBe(join(dir, 'etc', '.acw'));
    expect(loadConfig({ cwd: elsewhere, env: {}, path: join(dir, 'etc', 'absolute.yaml') }).database.data_dir).toBe('/srv/acw');
    // No file: relative to the working directory, as the process opens it.
    expect(loadConfig({ cwd: elsewhere, env: {} }).database.data_dir).toBe('.acw');
  });

  test('a non-empty DATABASE_URL overrides database.url; an empty one does not', () => {
    const cwd = tempDir({ 'config.yaml': 'database:\n  url: postgres://file@h/db\n  pool_size: 3\n' });
    const env = { DATABASE_URL: 'postgres://env@h/db' };
    expect(loadConfig({ cwd, env }).database).toMatchObject({ url: 'postgres://env@h/db', pool_size: 3 });
    expect(loadConfig({ cwd, env: { DATABASE_URL: '' } }).database.url).toBe('postgres://file@h/db');
    expect(loadConfig({ cwd: tempDir(), env }).database.url).toBe('postgres://env@h/db');
    expect(parseConfig({}, env).database.url).toBe('postgres://env@h/db');
  });
});

describe('needSecrets: false (commands that never deliver)', () => {
  const secrets = [
    'server:',
    '  auth:',
    '    users: [{ name: ci, role: service, token: "${CI_TOKEN}" }]',
    'notify:',
    '  webhook:',
    '    url: http://127.0.0.1:9/hook',
    '    secret: ${WEBHOOK_SECRET}',
    '    headers: { Authorization: "Bearer ${HOOK_TOKEN}" }',
    '    topics: ["a.*"]',
    '    endpoints:',
    '      - { name: b, url: "http://127.0.0.1:9/b", secret: "", topics: ["*"], headers: { X-Key: "${B_KEY}" } }',
    '',
  ].join('\n');

  test('unset variables in secrets, header values and tokens, and an empty secret, are no error; the rest of the config is whole', () => {
    const path = join(tempDir({ 'c.yaml': secrets }), 'c.yaml');
    const config = loadConfig({ path, env: {}, needSecrets: false });
    expect(resolveEndpoints(config).map((e) => [e.name, e.url, e.secret, e.topics, e.headers])).toEqual([
      ['default', 'http://127.0.0.1:9/hook', '', ['a.*'], { Authorization: 'Bearer ' }],
      ['b', 'http://127.0.0.1:9/b', '', ['*'], { 'X-Key': '' }],
    ]);
    expect(config.server.auth.users).toEqual([{ name: 'ci', role: 'service', token: '' }]);
  });

  test('by default (serve, worker, config check) every one of them is an error', () => {
    const path = join(tempDir({ 'c.yaml': secrets }), 'c.yaml');
    expect(errorOf(() => loadConfig({ path, env: {} })).issues).toEqual([
      'server.auth.users[0].token: environment variable CI_TOKEN is not set',
      'notify.webhook.secret: environment variable WEBHOOK_SECRET is not set',
      'notify.webhook.headers.Authorization: environment variable HOOK_TOKEN is not set',
      'notify.webhook.endpoints[0].secret: required (non-empty) for every endpoint',
      'notify.webhook.endpoints[0].headers.X-Key: environment variable B_KEY is not set',
    ]);
  });

  test('still refuses everything else: an unset variable elsewhere, and a secret that is set but malformed', () => {
    const path = join(
      tempDir({
        'c.yaml':
          'jobs: { workers: "${WORKERS}" }\nnotify:\n  webhook:\n    url: "${HOOK_URL}"\n    endpoints:\n      - { name: s, url: "http://127.0.0.1:9/s", secret: nope, scheme: standard }\n',
      }),
      'c.yaml',
    );
    expect(errorOf(() => loadConfig({ path, env: {}, needSecrets: false })).issues).toEqual([
      'jobs.workers: environment variable WORKERS is not set',
      'notify.webhook.url: environment variable HOOK_URL is not set',
      'notify.webhook.endpoints[0].secret: scheme "standard" needs a secret like "whsec_<base64>", got a value of 4 characters',
    ]);
  });
});

describe('config.example.yaml', () => {
  test('loads as shipped with an empty environment and equals the defaults apart from the bootstrap user', () => {
    const config = loadConfig({ path: EXAMPLE, env: {} });
    const defaults = defaultsIn(dirname(EXAMPLE));
    expect(config.server.auth.users).toEqual([{ name: 'ops', role: 'admin', token: '' }]);
    expect({ ...config, server: { ...config.server, auth: defaults.server.auth } }).toEqual(defaults);
  });

  test('its commented examples are valid once uncommented', () => {
    const lines = readFileSync(EXAMPLE, 'utf8').split('\n');
    const start = lines.findIndex((l) => l.includes('# example (seed 003)'));
    const replaced = new Set(['    url: ""', '    secret: ""', '    topics: []', '    endpoints: []']);
    const text = [
      ...lines.slice(0, start).filter((l) => !replaced.has(l.replace(/\s+#.*$/, ''))),
      ...lines.slice(start).flatMap((l) => (/^ {4}# (?:[a-z_]+:| )/.test(l) ? [l.replace('    # ', '    ')] : [])),
    ].join('\n');
    const dir = tempDir({ 'config.yaml': text });
    const env = { WEBHOOK_SECRET: SECRET, BILLING_WEBHOOK_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' };
    const endpoints = resolveEndpoints(loadConfig({ cwd: dir, env }));
    expect(endpoints.map((e) => [e.name, e.scheme, e.topics])).toEqual([
      ['default', 'acw', ['workspace.sync_failed', 'worktree.prune_pending']],
      ['billing', 'standard', ['billing.*', 'workspace.sync_failed']],
    ]);
  });

  test('DATABASE_URL and ACW_ADMIN_TOKEN flow into it from the environment', () => {
    const config = loadConfig({ path: EXAMPLE, env: { DATABASE_URL: 'postgres://u@h/db', ACW_ADMIN_TOKEN: SECRET } });
    expect(config.database.url).toBe('postgres://u@h/db');
    expect(config.server.auth.users[0]?.token).toBe(SECRET);
  });
});

describe('maskConfig', () => {
  test('hides secrets, tokens, header values and the database password, and keeps empty ones empty', () => {
    const config = parseConfig({
      database: { url: `postgres://acw:${SECRET}@db.example.com:5432/acw?sslmode=require` },
      server: {
        auth: {
          users: [
            { name: 'ops', role: 'admin', token: SECRET },
            { name: 'ci', role: 'service' },
          ],
        },
      },
      notify: {
        webhook: {
          url: 'https://a.example.com',
          secret: SECRET,
          headers: { Authorization: `Bearer ${SECRET}` },
          endpoints: [{ name: 'b', url: 'https://b.example.com', secret: SECRET, headers: { 'X-Key': SECRET } }],
        },
      },
    });
    const masked = maskConfig(config);
    expect(JSON.stringify(masked)).not.toContain(SECRET);
    expect(masked.database.url).toBe('postgres://acw:[redacted]@db.example.com:5432/acw?sslmode=require');
    expect(masked.server.auth.users).toEqual([
      { name: 'ops', role: 'admin', token: '[redacted]' },
      { name: 'ci', role: 'service', token: '' },
    ]);
    expect(masked.notify.webhook.secret).toBe('[redacted]');
    expect(masked.notify.webhook.headers).toEqual({ Authorization: '[redacted]' });
    expect(masked.notify.webhook.endpoints[0]).toMatchObject({
      secret: '[redacted]',
      headers: { 'X-Key': '[redacted]' },
      url: 'https://b.example.com',
    });
    expect(Object.isFrozen(masked)).toBe(false);
    expect(config.notify.webhook.secret).toBe(SECRET);
  });

  test('hides a password given as a connection parameter', () => {
    const masked = maskConfig(parseConfig({ database: { url: `postgresql://h/db?user=a&password=${SECRET}` } }));
    expect(masked.database.url).toBe('postgresql://h/db?user=a&password=[redacted]');
  });

  test('hides credential-named query parameters of endpoint URLs (token, api_key, sig…), keeping the rest', () => {
    const url = `https://hooks.example.com/in?team=7&token=${SECRET}&api_key=${SECRET}&X-Amz-Signature=${SECRET}#frag`;
    const masked = maskConfig(parseConfig({ notify: { webhook: { url, secret: 's' } } }));
    expect(masked.notify.webhook.url).toBe(
      'https://hooks.example.com/in?team=7&token=[redacted]&api_key=[redacted]&X-Amz-Signature=[redacted]#frag',
    );
    const more = maskConfig(
      parseConfig({
        notify: {
          webhook: {
            url: `https://${SECRET}@h.example.com/x?apiKey=${SECRET}&design=1&monkey=2&author=3#access_token=${SECRET}`,
            secret: 's',
          },
        },
      }),
    );
    // A user with no password (a key), camelCase names and fragment parameters too; names that merely contain "sig" or "key" stay.
    expect(more.notify.webhook.url).toBe(
      'https://[redacted]@h.example.com/x?apiKey=[redacted]&design=1&monkey=2&author=3#access_token=[redacted]',
    );
  });

  test('a URL that does not parse is named in the error with its credentials hidden', () => {
    let message = '';
    try {
      parseConfig({ notify: { webhook: { url: `https://exa mple.com/x?token=${SECRET}`, secret: 's' } } });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('notify.webhook.url: expected an http:// or https:// URL, got "https://exa mple.com/x?token=[redacted]"');
    expect(message).not.toContain(SECRET);
  });
});

describe('the built-in bootstrap user', () => {
  test('is ops (admin) with the token from ACW_ADMIN_TOKEN when the config names no users', () => {
    expect(parseConfig({}, { ACW_ADMIN_TOKEN: 'tok-from-env' }).server.auth.users).toEqual([
      { name: 'ops', role: 'admin', token: 'tok-from-env' },
    ]);
    expect(parseConfig({}, {}).server.auth.users).toEqual([{ name: 'ops', role: 'admin', token: '' }]);
    expect(parseConfig({ server: { auth: { users: [] } } }, { ACW_ADMIN_TOKEN: 'x' }).server.auth.users).toEqual([]);
  });
});
