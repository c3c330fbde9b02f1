/**
 * `${VAR}` / `${VAR:-default}` in config values. It runs on the parsed YAML tree, not the text,
 * so every problem has a key path and a variable's value can never add keys or structure.
 */
import { LineCounter, parseDocument } from 'yaml';
import { ConfigError, formatIssue, type Issue, type KeyPath } from './errors.js';

export type Env = Readonly<Record<string, string | undefined>>;

const REFERENCE = /^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$/s;

/**
 * One string value; `$${` is a literal `${`. Unset variables are issues named by `path`, or with
 * `unsetIsEmpty` read as "" (a secret that the command at hand never uses).
 */
export function interpolateString(text: string, env: Env, path: KeyPath = [], unsetIsEmpty = false): { value: string; issues: Issue[] } {
  const issues: Issue[] = [];
  let out = '';
  let i = 0;
  while (i < text.length) {
    const dollar = text.indexOf('$', i);
    if (dollar < 0) {
      out += text.slice(i);
      break;
    }
    out += text.slice(i, dollar);
    if (text.startsWith('$${', dollar)) {
      out += '${';
      i = dollar + 3;
      continue;
    }
    if (!text.startsWith('${', dollar)) {
      out += '$';
      i = dollar + 1;
      continue;
    }
    const close = text.indexOf('}', dollar + 2);
    // The reference text is not echoed: in a secret it may be part of the secret.
    const ref = close < 0 ? null : REFERENCE.exec(text.slice(dollar + 2, close));
    if (!ref) {
      issues.push({ path, message: 'expected ${NAME} or ${NAME:-default} after "${" (write "$${" for a literal "${")' });
      break;
    }
    const [, name = '', fallback] = ref;
    const value = env[name];
    if (fallback !== undefined) out += value === undefined || value === '' ? fallback : value;
    else if (value !== undefined) out += value;
    else if (!unsetIsEmpty) issues.push({ path, message: `environment variable ${name} is not set` });
    i = close + 1;
  }
  return { value: out, issues };
}

export interface Interpolated {
  readonly value: unknown;
  readonly issues: Issue[];
  /** Keys whose value could not be interpolated (left as ""): their schema errors are noise. */
  readonly failed: KeyPath[];
}

/** Every string value in a plain tree (mapping keys are left alone); `unsetIsEmpty` picks the keys where an unset variable reads as "". */
export function interpolateTree(tree: unknown, env: Env, unsetIsEmpty: (path: KeyPath) => boolean = () => false): Interpolated {
  const issues: Issue[] = [];
  const failed: KeyPath[] = [];
  const walk = (node: unknown, path: PropertyKey[]): unknown => {
    if (typeof node === 'string') {
      const r = interpolateString(node, env, path, unsetIsEmpty(path));
      if (r.issues.length === 0) return r.value;
      issues.push(...r.issues);
      failed.push(path);
      return '';
    }
    if (Array.isArray(node)) return node.map((item, i) => walk(item, [...path, i]));
    if (typeof node === 'object' && node !== null) {
      return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, walk(v, [...path, k])]));
    }
    return node;
  };
  return { value: walk(tree, []), issues, failed };
}

/** Parses YAML text to a plain tree; syntax errors name the file, line and column (no source excerpt). */
export function parseYaml(text: string, file = 'config.yaml'): unknown {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    // The excerpt yaml would print could hold a secret written inline, so only the position is given.
    const issues = doc.errors.map((e) => {
      const { line, col } = lineCounter.linePos(e.pos[0]);
      return `${file}:${line}:${col}: ${e.message.split('\n')[0] ?? 'invalid YAML'}`;
    });
    throw new ConfigError(issues, { file });
  }
  try {
    return doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    throw new ConfigError([`${file}: ${err instanceof Error ? err.message : String(err)}`], { file, cause: err });
  }
}

/**
 * YAML text to a plain tree with every `${VAR}` in its values replaced from `env`.
 * Throws a ConfigError listing every syntax error or unset variable.
 */
export function interpolate(text: string, env: Env = process.env, file = 'config.yaml'): unknown {
  const { value, issues } = interpolateTree(parseYaml(text, file), env);
  if (issues.length > 0) throw new ConfigError(issues.map(formatIssue), { file });
  return value;
}
