/** Configuration problems: every one names its key path, and they are all reported at once. */

export type KeyPath = readonly PropertyKey[];

/** One problem before formatting: where it is and what is wrong (never a secret's value). */
export interface Issue {
  readonly path: KeyPath;
  readonly message: string;
}

/** Thrown for every configuration problem; `issues` holds one `<key.path>: <message>` line each. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly issues: string[];
  /** The file the configuration came from, when there was one. */
  readonly file: string | undefined;

  constructor(issues: readonly string[], opts: { file?: string | undefined; cause?: unknown } = {}) {
    super(issues.join('\n'), opts.cause === undefined ? undefined : { cause: opts.cause });
    this.issues = [...issues];
    this.file = opts.file;
  }

  static from(issues: readonly Issue[], file?: string): ConfigError {
    return new ConfigError(issues.map(formatIssue), { file });
  }
}

const PLAIN_KEY = /^[A-Za-z0-9_-]+$/;

/** `notify.webhook.endpoints[0].secret`; odd keys are quoted: `headers["X Y"]`. */
export function formatPath(path: KeyPath): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else if (typeof key === 'string' && PLAIN_KEY.test(key)) out += out === '' ? key : `.${key}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out === '' ? 'config' : out;
}

export function formatIssue(issue: Issue): string {
  return `${formatPath(issue.path)}: ${issue.message}`;
}

/** A value as it may appear in a message: strings quoted, containers by kind only. */
export function show(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return String(value);
}

/** Like `show`, for keys whose values are secret: the kind and length, never the text. */
export function showSecret(value: unknown): string {
  if (typeof value === 'string') return `a value of ${value.length} characters`;
  if (value === null || value === undefined || typeof value === 'object') return show(value);
  return `a ${typeof value}`; // a number or boolean secret is still a secret
}

/** True when `path` is `prefix` or lies under it. */
export function isUnder(path: KeyPath, prefix: KeyPath): boolean {
  return prefix.length <= path.length && prefix.every((k, i) => path[i] === k);
}
