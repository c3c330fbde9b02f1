// The systems a scenario can run, by key (BENCH_SYSTEMS): each an adapter module (how to build its
// template, enqueue, tell "done" and run its worker) and one of its variants.
import * as acw from './acw.mjs';
import * as graphile from './graphile.mjs';
import * as pgboss from './pgboss.mjs';

export { acw, graphile, pgboss };

export const SYSTEMS = {
  'acw-default': { mod: acw, variant: 'default' },
  'acw-tuned': { mod: acw, variant: 'tuned' },
  'graphile-default': { mod: graphile, variant: 'default' },
  'graphile-tuned': { mod: graphile, variant: 'tuned' },
  'pgboss-tuned': { mod: pgboss, variant: 'tuned' },
};
export const ALL = Object.keys(SYSTEMS);

export const label = (key) => SYSTEMS[key].mod.variants[SYSTEMS[key].variant].label;
