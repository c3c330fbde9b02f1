/**
 * Finding, reading and validating `config.yaml`. Parse once at start, then pass the frozen
 * result down: path from the caller (`-c`), else ACW_CONFIG, else ./config.yaml, else defaults.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { ConfigError, isUnder, type Issue, type KeyPath } from './errors.js';
import { interpolateTree, parseYaml, type Env } from './interpolate.js';
import { isObject, missingSecrets } from './rules.js';
import { withTracingEnv } from './tracing.js';
import { APP_RUNNERS, appRunner, type AppRunnerConfig, type Config, type ConfigData } from './schema.js';
import { knownKeysAt, sortByInput, validate } from './validate.js';

export { ConfigError } from './errors.js';
export { interpolate, type Env } from './interpolate.js';
export { maskConfig } from './mask.js';

export interface LoadOptions {
  /** An explicit file (`-c FILE`); relative to `cwd`. It must exist. */
  path?: string | undefined;
  /** Defaults to `process.env`. */
  env?: NodeJS.ProcessEnv | Env;
  /** Defaults to `process.cwd()`. */
  cwd?: string;
  /**
   * False for commands that never deliver (migrate, notify, jobs, users, alerts): an unset `${VAR}`
   * in an endpoint secret, a header value, a user token or a `secrets` key reads as "", and an empty endpoint secret
   * is no error. Default true: serve, worker and `config check` need every one.
   */
  needSecrets?: boolean;
  /**
   * Names of the periodic runners the host application registers: a `jobs.<name>` block for each
   * loads like those of APP_RUNNERS (docs/integrate.md#periodic-runners) instead of being an
   * unknown key.
   */
  runners?: readonly string[];
}

/** The file `loadConfig` reads with these options, or null when the built-in defaults apply. */
export function configPath(opts: LoadOptions = {}): string | null {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const given = opts.path || env['ACW_CONFIG']; // an empty ACW_CONFIG counts as unset
  if (given) return resolve(cwd, given);
  const local = resolve(cwd, 'config.yaml');
  return existsSync(local) ? local : null;
}

/** Reads, interpolates and validates the configuration; throws a ConfigError listing every problem. */
export function loadConfig(opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  const file = configPath(opts);
  const needSecrets = opts.needSecrets ?? true;
  if (file === null) return build({}, env, needSecrets, undefined, opts.runners);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'config file not found' : `cannot read config file (${code ?? String(err)})`;
    throw new ConfigError([`${file}: ${why}`], { file, cause: err });
  }
  return build(parseYaml(text, file), env, needSecrets, file, opts.runners);
}

/**
 * Validates a configuration tree without a file (tests, embedding). `${VAR}` in its string values
 * and DATABASE_URL come from `env`, which defaults to none so the result does not depend on the shell.
 */
export function parseConfig(raw: unknown, env: NodeJS.ProcessEnv | Env = {}, opts: Pick<LoadOptions, 'runners'> = {}): Config {
  return build(raw, env, true, undefined, opts.runners);
}

function build(raw: unknown, env: Env, needSecrets = true, file?: string, runners: readonly string[] = []): Config {
  const interpolated = interpolateTree(withDefaultKey(withDefaultUsers(raw)), env, needSecrets ? () => false : isServiceSecret);
  const full = withTracingEnv(withDatabaseUrl(withoutNulls(interpolated.value), env), env);
  const { tree, blocks } = withoutRunnerBlocks(full, runners);
  const result = validate(tree, interpolated.failed);
  const runnerBlocks = validateRunnerBlocks(blocks);
  // Without secrets an empty one is no error either: the command never uses it.
  const missing = needSecrets ? missingSecrets(tree).filter((i) => !interpolated.failed.some((p) => isUnder(i.path, p))) : [];
  const issues = [...interpolated.issues, ...(result.ok ? [] : result.issues), ...runnerBlocks.issues, ...missing];
  if (issues.length > 0 || !result.ok) throw ConfigError.from(sortByInput(issues, full), file);
  const value = { ...result.value, jobs: { ...result.value.jobs, ...runnerBlocks.value } };
  return deepFreeze(file === undefined ? value : withDataDirFrom(value, dirname(file)));
}

/**
 * The `jobs.<name>` blocks of host-registered runners taken out of the tree (the schema knows only
 * the three names of APP_RUNNERS), to be checked on their own with the same rules.
 */
function withoutRunnerBlocks(tree: unknown, runners: readonly string[]): { tree: unknown; blocks: Record<string, unknown> } {
  const root = tree ?? {};
  if (runners.length === 0 || !isObject(root) || !isObject(root['jobs'])) return { tree, blocks: {} };
  const known = new Set(knownKeysAt(['jobs']));
  const jobs = { ...root['jobs'] };
  const blocks: Record<string, unknown> = {};
  for (const name of runners) {
    if (known.has(name) || !(name in jobs)) continue;
    blocks[name] = jobs[name];
    delete jobs[name];
  }
  return { tree: { ...root, jobs }, blocks };
}

function validateRunnerBlocks(blocks: Record<string, unknown>): { value: Record<string, AppRunnerConfig>; issues: Issue[] } {
  const value: Record<string, AppRunnerConfig> = {};
  const issues: Issue[] = [];
  for (const [name, block] of Object.entries(blocks)) {
    const r = appRunner.safeParse(block);
    if (r.success) value[name] = r.data;
    else for (const iss of r.error.issues) issues.push({ path: ['jobs', name, ...iss.path], message: iss.message });
  }
  return { value, issues };
}

/** The `jobs.<name>` block of an application runner (one of APP_RUNNERS, or one the host registered), if the config has one. */
export function runnerConfig(config: Config, name: string): AppRunnerConfig | undefined {
  // Our own jobs keys (workers, retry, job_reaper…) are not runner blocks, though some are mappings.
  if (knownKeysAt(['jobs']).includes(name) && !(APP_RUNNERS as readonly string[]).includes(name)) return undefined;
  const block = (config.jobs as unknown as Record<string, unknown>)[name];
  return isObject(block) ? (block as AppRunnerConfig) : undefined;
}

/**
 * A relative `database.data_dir` (the default `.acw` too) is relative to the config file, so every
 * command using that file finds the same embedded PostgreSQL wherever it is run from.
 */
function withDataDirFrom(config: ConfigData, dir: string): ConfigData {
  const dataDir = config.database.data_dir;
  return isAbsolute(dataDir) ? config : { ...config, database: { ...config.database, data_dir: resolve(dir, dataDir) } };
}

/** What only delivering and serving use: endpoint secrets and header values, the bootstrap users' tokens, and the encryption keys. */
function isServiceSecret(path: KeyPath): boolean {
  const [a, b, c, d, e] = path;
  if (a === 'secrets') return true;
  if (a === 'server') return path.length === 5 && b === 'auth' && c === 'users' && typeof d === 'number' && e === 'token';
  if (a === 'alerts') return b === 'sinks' && typeof c === 'number' && (d === 'secret' || (d === 'headers' && path.length === 5));
  if (a !== 'notify' || b !== 'webhook') return false;
  const rest = c === 'endpoints' && typeof d === 'number' ? path.slice(4) : path.slice(2);
  return (rest.length === 1 && (rest[0] === 'secret' || rest[0] === 'secret_next')) || (rest.length === 2 && rest[0] === 'headers');
}

/**
 * The built-in bootstrap user (config.example.yaml, server.auth.users): `ops` (admin) with the token from ACW_ADMIN_TOKEN, so
 * `ACW_ADMIN_TOKEN=... npm start` works without a config file. Skipped at start while the token is empty.
 */
const DEFAULT_USERS = [{ name: 'ops', role: 'admin', token: '${ACW_ADMIN_TOKEN:-}' }];

function withDefaultUsers(raw: unknown): unknown {
  const root = raw ?? {};
  if (!isObject(root)) return raw;
  const server = root['server'] ?? {};
  if (!isObject(server)) return raw;
  const auth = server['auth'] ?? {};
  if (!isObject(auth) || auth['users'] !== undefined) return raw;
  return { ...root, server: { ...server, auth: { ...auth, users: DEFAULT_USERS } } };
}

/** `secrets.encryption_key` unset: `${ACW_ENCRYPTION_KEY}`, so the environment alone can carry the key (docs/operations.md#secrets-at-rest). */
function withDefaultKey(raw: unknown): unknown {
  const root = raw ?? {};
  if (!isObject(root)) return raw;
  const secrets = root['secrets'] ?? {};
  if (!isObject(secrets) || secrets['encryption_key'] !== undefined) return raw;
  return { ...root, secrets: { ...secrets, encryption_key: '${ACW_ENCRYPTION_KEY:-}' } };
}

/** DATABASE_URL, when set and non-empty, wins over `database.url` (twelve-factor deployments set only it). */
function withDatabaseUrl(tree: unknown, env: Env): unknown {
  const url = env['DATABASE_URL'];
  if (!url) return tree;
  const root = tree ?? {};
  if (!isObject(root)) return tree; // not a mapping: the schema reports it
  const db = root['database'] ?? {};
  if (!isObject(db)) return tree;
  return { ...root, database: { ...db, url } };
}

/** `key:` with no value (YAML null) means "not set": the key takes its default. */
function withoutNulls(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutNulls);
  if (!isObject(node)) return node;
  return Object.fromEntries(
    Object.entries(node)
      .filter(([, v]) => v !== null)
      .map(([k, v]) => [k, withoutNulls(v)]),
  );
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
