import { parseConfig, type Config } from '../../src/config/index.js';
import { createPool } from '../../src/db/pool.js';
import { Service, type ServiceOptions } from '../../src/service.js';
import type { TestDatabase } from './db.js';
import { captureLogs } from './logs.js';

type Raw = Record<string, unknown>;

/** Deep merge of plain objects; arrays and scalars in `b` replace. */
export function merge(a: Raw, b: Raw): Raw {
  const out: Raw = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] =
      v && typeof v === 'object' && !Array.isArray(v) && prev && typeof prev === 'object' && !Array.isArray(prev)
        ? merge(prev as Raw, v as Raw)
        : v;
  }
  return out;
}

/** Config for tests: millisecond schedules, the test database, no migration (the template has it). */
export function testConfig(db: TestDatabase, over: Raw = {}): Config {
  const base: Raw = {
    database: { url: db.url, migrate: false, pool_size: 10 },
    log: { level: 'debug' },
    jobs: {
      workers: 8,
      poll_interval: '500ms',
      shutdown_grace: '2s',
      max_attempts: 3,
      retry: { base: '20ms', max: '100ms', jitter: 0 },
      job_reaper: { interval: '200ms', lease_timeout: '10s' },
      job_purge: { interval: '24h' },
    },
  };
  return parseConfig(merge(base, over));
}

/** A service in this process against the test database, with its log lines captured. */
export async function startTestService(db: TestDatabase, over: Raw = {}, extra: Partial<ServiceOptions> = {}) {
  const config = testConfig(db, over);
  const logs = captureLogs();
  const pool = createPool({ url: db.url, size: config.database.pool_size, schema: config.database.schema });
  const svc = await Service.start({
    config,
    log: logs.log,
    database: { url: db.url, pool, schema: config.database.schema, embedded: null, close: () => pool.end() },
    ...extra,
  });
  return { svc, ...logs };
}
