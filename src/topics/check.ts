/**
 * Validation at notify (docs/operations.md#topic-catalog): each event's data against the latest
 * schema version of its topic, under the topic's mode or `topics.validation`. Under `enforce` a
 * failing request is refused as a whole (a 400 listing every JSON Pointer); under `warn` each
 * failing event carries its warnings; `off` checks nothing.
 */
import type { ValidationMode } from '../config/index.js';
import { ApiError } from '../errors.js';
import type { Logger } from '../log.js';
import type { CatalogView } from './catalog.js';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import { latest, type Topic, type TopicVersion } from './rows.js';
import { compile, problemsOf, problemText, type Problem } from './validate.js';

/** What a checked event carries on: the version it was validated against, and its warnings. */
export interface TopicCheck {
  schema_version?: number;
  warnings?: string[];
}

/** Told of each failing event (a log line and a metric). */
export type OnMismatch = (topic: string, mode: ValidationMode, problems: readonly Problem[]) => void;

/** The log line and the metric of a failing event (docs/operations.md#logs). */
export function reportMismatch(
  log: Logger,
  topic: string,
  mode: ValidationMode,
  problems: readonly Problem[],
  metrics?: { schemaMismatch(topic: string, mode: string): void },
): void {
  metrics?.schemaMismatch(topic, mode);
  log.warn(
    { event: 'notify.schema_mismatch', topic, mode, problems: problems.slice(0, 10).map(problemText) },
    `an event of ${topic} does not match its schema (validation ${mode})`,
  );
}

/**
 * The compiled validator of one version, looked up by the version's object (the catalog's copy,
 * kept until the next read of a changed catalog): no schema text made per event. compile() keeps
 * them by schema text, so a catalog read again does not compile again.
 */
const byVersion = new WeakMap<TopicVersion, ValidateFunction>();
function validatorOf(v: TopicVersion): ValidateFunction {
  let fn = byVersion.get(v);
  if (fn === undefined) {
    fn = compile(v.schema);
    byVersion.set(v, fn);
  }
  return fn;
}

export function modeOf(view: CatalogView, topic: Topic | undefined): ValidationMode {
  return topic?.validation ?? view.mode;
}

/** One event: the outcome under its mode, problems as pointers under `prefix` (`/data`). */
export function checkOne(
  view: CatalogView,
  name: string,
  data: unknown,
  prefix: string,
): { mode: ValidationMode; version?: number; problems: Problem[]; warnings: string[] } {
  const topic = view.get(name);
  const declared = topic !== undefined && !topic.archived;
  if (!declared) {
    if (view.requireDeclared) {
      const why = topic ? 'is archived' : 'is not in the topic catalog';
      return {
        mode: 'enforce',
        problems: [{ pointer: prefix.replace(/\/data$/, '/topic'), message: `${why} (topics.require_declared)` }],
        warnings: [],
      };
    }
    return { mode: 'off', problems: [], warnings: [] };
  }
  const warnings = topic.deprecated ? [`topic ${name} is deprecated${topic.deprecation_note ? `: ${topic.deprecation_note}` : ''}`] : [];
  const mode = modeOf(view, topic);
  const v = latest(topic);
  if (mode === 'off' || !v) return { mode, problems: [], warnings };
  const fn = validatorOf(v);
  const problems = fn(data) ? [] : problemsOf(fn.errors, prefix);
  return { mode, version: v.version, problems, warnings };
}

/**
 * Check a request's events; throws the 400 `schema_mismatch` under enforce, naming every pointer
 * (`/data/order_id: required`; in a batch `/events/3/data/order_id: required`).
 */
export function checkEvents(
  view: CatalogView,
  events: ReadonlyArray<{ topic: string; data: unknown }>,
  batch: boolean,
  onMismatch?: OnMismatch,
): TopicCheck[] {
  const refused: Problem[] = [];
  const checks = events.map((ev, i) => {
    const r = checkOne(view, ev.topic, ev.data, batch ? `/events/${i}/data` : '/data');
    if (r.problems.length > 0) onMismatch?.(ev.topic, r.mode, r.problems);
    if (r.mode === 'enforce' && r.problems.length > 0) refused.push(...r.problems);
    const warnings = r.mode === 'warn' ? [...r.warnings, ...r.problems.map(problemText)] : r.warnings;
    const check: TopicCheck = {};
    if (r.version !== undefined) check.schema_version = r.version;
    if (warnings.length > 0) check.warnings = warnings;
    return check;
  });
  if (refused.length > 0) {
    const [first] = refused;
    const more = refused.length > 1 ? ` (and ${refused.length - 1} more)` : '';
    throw new ApiError(400, 'schema_mismatch', `${problemText(first!)}${more}`, {
      field: first!.pointer,
      problems: refused.slice(0, 100),
    });
  }
  return checks;
}
