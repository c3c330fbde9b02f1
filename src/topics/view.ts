/** A topic as the API, the CLI and the dashboard show it (docs/operations.md#topic-catalog). */
import { isValidTopic, topicMatches, type Endpoint, type ValidationMode } from '../config/index.js';
import { latest, type Topic, type TopicVersion } from './rows.js';

export interface TopicView extends Omit<Topic, 'versions'> {
  effective_validation: ValidationMode;
  version: number | null;
  versions: TopicVersion[];
  endpoints: string[];
}

export function topicView(t: Topic, mode: ValidationMode, endpoints: readonly Endpoint[]): TopicView {
  return {
    ...t,
    effective_validation: t.validation ?? mode,
    version: latest(t)?.version ?? null,
    endpoints: endpoints.filter((e) => topicMatches(e.topics, t.name)).map((e) => e.name),
  };
}

/**
 * The patterns of an endpoint's whitelist that match no topic of the catalog (archived ones left
 * out), as warnings for its create or change answer. None while the catalog is empty: a service
 * that declares no topic is not told about it on every endpoint.
 */
export function unmatchedPatterns(patterns: readonly string[], topics: readonly Topic[]): string[] {
  const live = topics.filter((t) => !t.archived).map((t) => t.name);
  if (live.length === 0) return [];
  return patterns
    .filter((p) => !live.some((name) => topicMatches([p], name)))
    .map(
      (p) =>
        `topics: ${JSON.stringify(p)} matches no topic of the catalog${isValidTopic(p) ? ' (a typo, or a topic not declared yet?)' : ''}`,
    );
}
