import { ApiError } from '../errors.js';

/** Who acts, and what they may touch: a service only its own endpoints, within its granted topics. */
export interface Actor {
  name: string;
  role: 'admin' | 'viewer' | 'service';
}

/** A service may subscribe only to topics within its grants: an exact topic, or a pattern no wider than a granted one. */
export function withinGrants(topic: string, grants: readonly string[]): boolean {
  for (const g of grants) {
    if (g === '*') return true;
    if (g === topic) return true;
    if (g.endsWith('.*')) {
      const prefix = g.slice(0, -1); // keeps the dot
      const t = topic.endsWith('.*') ? topic.slice(0, -1) : topic;
      if (t.startsWith(prefix) && t.length > prefix.length) return true;
    }
  }
  return false;
}

/** A service's topics within its grants (a 403 naming the first one outside); admins pass. */
export function checkServiceTopics(actor: Actor, topics: readonly string[], grants: readonly string[]): void {
  if (actor.role !== 'service') return;
  if (grants.length === 0) {
    throw new ApiError(403, 'forbidden', 'role service may not manage endpoints: notify.webhook.service_endpoints.topics grants none');
  }
  topics.forEach((t, i) => {
    if (!withinGrants(t, grants)) {
      throw new ApiError(403, 'forbidden', `topics[${i}]: "${t}" is outside the topics granted to services (${grants.join(', ')})`, {
        field: `topics[${i}]`,
      });
    }
  });
}

export function notFound(name: string): ApiError {
  return new ApiError(404, 'not_found', `name: no endpoint named ${JSON.stringify(name.slice(0, 100))}`, { field: 'name' });
}
