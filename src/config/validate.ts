/** Runs the schema and turns zod's issues into `<key.path>: <message>` problems. */
import { z } from 'zod';
import { formatPath, isUnder, type Issue, type KeyPath } from './errors.js';
import { configSchema, type ConfigData } from './schema.js';
import { closestKey } from './suggest.js';

/** The keys a strict mapping at `path` accepts, found by walking the schema. */
export function knownKeysAt(path: KeyPath, schema: z.ZodType = configSchema): string[] {
  let node: unknown = schema;
  let i = 0;
  for (;;) {
    if (node instanceof z.ZodDefault || node instanceof z.ZodPrefault || node instanceof z.ZodOptional) {
      node = node.unwrap();
    } else if (node instanceof z.ZodPipe) {
      node = node.in;
    } else if (i === path.length) {
      return node instanceof z.ZodObject ? Object.keys(node.shape) : [];
    } else if (node instanceof z.ZodObject) {
      node = (node.shape as Record<PropertyKey, unknown>)[path[i++] ?? ''];
    } else if (node instanceof z.ZodArray) {
      node = node.element;
      i++;
    } else if (node instanceof z.ZodRecord) {
      node = node.valueType;
      i++;
    } else {
      return [];
    }
  }
}

function unknownKey(path: KeyPath, key: string): Issue {
  const guess = closestKey(key, knownKeysAt(path));
  return { path: [...path, key], message: guess === undefined ? 'unknown key' : `unknown key (did you mean "${guess}"?)` };
}

function toIssues(issue: z.core.$ZodIssue): Issue[] {
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((key) => unknownKey(issue.path, key));
    case 'invalid_key':
      // The key's own check says what is wrong with it; the record's message would not.
      return [{ path: issue.path, message: issue.issues[0]?.message ?? issue.message }];
    case 'invalid_type':
    case 'invalid_value':
      return [{ path: issue.path, message: issue.input === undefined ? 'required' : issue.message }];
    default:
      return [{ path: issue.path, message: issue.message }];
  }
}

export type Validated = { ok: true; value: ConfigData } | { ok: false; issues: Issue[] };

/**
 * Validates an (already interpolated) tree. Issues under `skip` are dropped: those keys already
 * have a better message (an unset variable) and their placeholder value would only add noise.
 */
export function validate(raw: unknown, skip: readonly KeyPath[] = []): Validated {
  const result = configSchema.safeParse(raw ?? {}, { reportInput: true });
  if (result.success) return { ok: true, value: result.data };
  const issues = result.error.issues.flatMap(toIssues).filter((iss) => !skip.some((p) => isUnder(iss.path, p)));
  return { ok: false, issues };
}

/** Issues in the order their keys appear in the input, so they read top to bottom like the file. */
export function sortByInput(issues: readonly Issue[], tree: unknown): Issue[] {
  const position = new Map<string, number>();
  const visit = (node: unknown, path: PropertyKey[]): void => {
    position.set(formatPath(path), position.size);
    if (Array.isArray(node)) node.forEach((item, i) => visit(item, [...path, i]));
    else if (typeof node === 'object' && node !== null) for (const [k, v] of Object.entries(node)) visit(v, [...path, k]);
  };
  visit(tree, []);
  // A key that is absent from the input (a missing required key) sorts with its nearest present parent.
  const rank = (path: KeyPath): number => {
    for (let n = path.length; n >= 0; n--) {
      const at = position.get(formatPath(path.slice(0, n)));
      if (at !== undefined) return at;
    }
    return 0;
  };
  return issues
    .map((issue) => ({ issue, at: rank(issue.path) }))
    .toSorted((a, b) => a.at - b.at)
    .map(({ issue }) => issue);
}
