import { describe, expect, test } from 'vitest';
import { configWarnings, resolveEndpoints } from '../../src/config/endpoints.js';
import { ConfigError, parseConfig } from '../../src/config/load.js';

/** The issues a config produces (fails the test if it is accepted). */
function issuesOf(raw: unknown, env: Record<string, string> = {}): string[] {
  try {
    parseConfig(raw, env);
  } catch (err) {
    if (err instanceof ConfigError) return err.issues;
    throw err;
  }
  throw new Error('expected the config to be rejected');
}

const SECRET = 'sUp3r-S3cr3t-Zebra-42';
const WHSEC = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const webhook = (w: Record<string, unknown>) => ({ notify: { webhook: w } });
const endpointWith = (name: string, over: Record<string, unknown> = {}) => ({
  name,
  url: 'https://h.example.com',
  secret: SECRET,
  ...over,
});
/** [name, timeout, connect_timeout] of each endpoint `notify.webhook: w` resolves to. */
const connect = (w: Record<string, unknown>) =>
  resolveEndpoints(parseConfig(webhook(w))).map((e) => [e.name, e.timeout, e.connect_timeout]);

describe('defaults', () => {
  test('an empty config yields every default of spec §2', () => {
    expect(parseConfig({})).toEqual({
      database: { url: '', data_dir: '.acw', pool_size: 10, migrate: true, schema: 'public' },
      server: {
        listen: '127.0.0.1:8080',
        max_body: 1_048_576,
        public_url: '',
        session_ttl: 43_200_000,
        auth: { users: [{ name: 'ops', role: 'admin', token: '' }] },
      },
      log: { level: 'info' },
      jobs: {
        enabled: true,
        workers: 32,
        shutdown_grace: 25_000,
        max_attempts: 6,
        poll_interval: 2000,
        retry: { base: 10_000, max: 300_000, jitter: 0.2 },
        job_reaper: { enabled: true, interval: 60_000, lease_timeout: 300_000 },
        job_purge: {
          enabled: true,
          interval: 86_400_000,
          completed_retention: 604_800_000,
          dead_retention: 2_592_000_000,
          audit_retention: 31_536_000_000,
          notification_retention: 7_776_000_000,
          success_body_retention: 0,
          batch_size: 1000,
        },
      },
      secrets: { encryption_key: '', old_encryption_keys: [] },
      notify: {
        idempotency_retention: 86_400_000,
        webhook: {
          enabled: true,
          url: '',
          secret: '',
          timeout: 10_000,
          max_in_flight: 16,
          max_in_flight_total: 2000,
          propagate_trace: false,
          rate_limit: 0,
          circuit: {
            enabled: true,
            failure_threshold: 10,
            failure_rate: 0.5,
            min_attempts: 20,
            window: 60_000,
            cooldown: 10_000,
            cooldown_max: 30_000,
            alert_after: 30_000,
            resolve_after: 30_000,
          },
          max_age: 259_200_000,
          service_endpoints: { topics: [] },
          topics: [],
          scheme: 'acw',
          ordering: 'relaxed',
          headers: {},
          endpoints: [],
          allow_networks: [],
        },
      },
      topics: { validation: 'warn', require_declared: false, catalog: {} },
      alerts: { sinks: [] },
      tracing: {
        disabled: false,
        endpoint: '',
        traces_endpoint: '',
        protocol: 'http/protobuf',
        headers: {},
        service_name: 'acw-webhooks',
        sampler: 'parentbased_always_on',
        sampler_arg: 1,
        resource_attributes: {},
      },
    });
  });

  test('null and undefined roots are the defaults too', () => {
    expect(parseConfig(null)).toEqual(parseConfig({}));
    expect(parseConfig(undefined)).toEqual(parseConfig({}));
  });

  test('the result is deeply frozen', () => {
    const config = parseConfig({ notify: { webhook: { topics: ['a'] } } });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.jobs.retry)).toBe(true);
    expect(Object.isFrozen(config.notify.webhook.topics)).toBe(true);
  });

  test('numbers and booleans given as text (from ${VAR}) are accepted', () => {
    const config = parseConfig({ jobs: { workers: '${W}', enabled: 'false', retry: { jitter: '0.5' } } }, { W: '4' });
    expect(config.jobs.workers).toBe(4);
    expect(config.jobs.enabled).toBe(false);
    expect(config.jobs.retry.jitter).toBe(0.5);
  });
});

describe('field messages', () => {
  test('a bad duration reads exactly as the spec shows', () => {
    expect(issuesOf({ jobs: { job_reaper: { lease_timeout: '5 minutes' } } })).toEqual([
      'jobs.job_reaper.lease_timeout: expected a duration like "5m", got "5 minutes"',
    ]);
  });

  test.each([
    [{ jobs: { workers: 0 } }, 'jobs.workers: expected an integer from 1 to 1000, got 0'],
    [{ jobs: { workers: 2.5 } }, 'jobs.workers: expected an integer from 1 to 1000, got 2.5'],
    [{ jobs: { max_attempts: 101 } }, 'jobs.max_attempts: expected an integer from 1 to 100, got 101'],
    [{ jobs: { retry: { jitter: 1.5 } } }, 'jobs.retry.jitter: expected a number from 0 to 1, got 1.5'],
    [{ jobs: { enabled: 'yes' } }, 'jobs.enabled: expected true or false, got "yes"'],
    [{ jobs: { poll_interval: 10 } }, 'jobs.poll_interval: expected a duration like "5m", got 10'],
    [{ jobs: { poll_interval: '0s' } }, 'jobs.poll_interval: must be longer than 0, got "0s"'],
    [
      { log: { level: 'verbose' } },
      'log.level: expected one of "fatal", "error", "warn", "info", "debug", "trace", "silent", got "verbose"',
    ],
    [{ server: { max_body: '1 mb' } }, 'server.max_body: expected a size like "1mb", got "1 mb"'],
    [{ server: { public_url: 'acw.example.com' } }, 'server.public_url: expected an http:// or https:// URL, got "acw.example.com"'],
    [{ server: { session_ttl: '0s' } }, 'server.session_ttl: must be longer than 0, got "0s"'],
    [
      { server: { listen: 'localhost:99999' } },
      'server.listen: expected HOST:PORT like "127.0.0.1:8080" (port 0-65535), got "localhost:99999"',
    ],
    [{ database: { schema: 'Public' } }, 'database.schema: expected a lowercase SQL identifier like "public", got "Public"'],
    [{ database: { schema: 'a'.repeat(41) } }, 'database.schema: must be at most 40 characters, got 41'],
    [{ database: { pool_size: 1001 } }, 'database.pool_size: expected an integer from 1 to 1000, got 1001'],
    [{ jobs: 'none' }, 'jobs: expected a mapping, got "none"'],
    [[1, 2], 'config: expected a mapping, got a list'],
    [{ notify: { webhook: { topics: 'a.b' } } }, 'notify.webhook.topics: expected a list, got "a.b"'],
  ])('%j is rejected', (raw, message) => {
    expect(issuesOf(raw)).toEqual([message]);
  });

  test('a missing required key says so', () => {
    expect(issuesOf(webhook({ endpoints: [{ name: 'a', secret: SECRET }] }))).toEqual(['notify.webhook.endpoints[0].url: required']);
    expect(issuesOf({ server: { auth: { users: [{ name: 'ops' }] } } })).toEqual(['server.auth.users[0].role: required']);
  });
});

describe('unknown keys', () => {
  test('a misspelt key is an error that suggests the known one', () => {
    expect(issuesOf({ jobs: { wokers: 4 } })).toEqual(['jobs.wokers: unknown key (did you mean "workers"?)']);
  });

  test.each([
    ['maxInFlight', 'max_in_flight'],
    ['max-in-flight', 'max_in_flight'],
    ['Timeout', 'timeout'],
    ['secrte', 'secret'],
  ])('%s suggests %s', (key, known) => {
    expect(issuesOf(webhook({ [key]: 1 }))).toEqual([`notify.webhook.${key}: unknown key (did you mean "${known}"?)`]);
  });

  test('a key far from every known one gets no suggestion', () => {
    expect(issuesOf({ database: { hostname: 'x' } })).toEqual(['database.hostname: unknown key']);
  });

  test('unknown keys are found at every level, including list items', () => {
    expect(issuesOf({ colour: 1, server: { auth: { users: [{ name: 'a', role: 'admin', tokn: 'x' }] } } })).toEqual([
      'colour: unknown key',
      'server.auth.users[0].tokn: unknown key (did you mean "token"?)',
    ]);
  });
});

describe('cross-field rules', () => {
  test('the top-level url needs a secret', () => {
    expect(issuesOf(webhook({ url: 'https://h.example.com/x' }))).toEqual([
      'notify.webhook.secret: required when notify.webhook.url is set',
    ]);
  });

  test('every endpoint needs a secret', () => {
    expect(issuesOf(webhook({ endpoints: [{ name: 'a', url: 'https://h.example.com' }] }))).toEqual([
      'notify.webhook.endpoints[0].secret: required (non-empty) for every endpoint',
    ]);
  });

  test('urls must be http or https', () => {
    expect(issuesOf(webhook({ url: 'ftp://h.example.com', secret: SECRET }))).toEqual([
      'notify.webhook.url: expected an http:// or https:// URL, got a "ftp:" URL',
    ]);
    expect(issuesOf(webhook({ endpoints: [{ name: 'a', url: 'not a url', secret: SECRET }] }))).toEqual([
      'notify.webhook.endpoints[0].url: expected an http:// or https:// URL, got "not a url"',
    ]);
  });

  test('endpoint names are unique, and "default" is reserved while the top-level url is set', () => {
    const ep = (name: string) => ({ name, url: 'https://h.example.com', secret: SECRET });
    expect(issuesOf(webhook({ endpoints: [ep('a'), ep('b'), ep('a')] }))).toEqual([
      'notify.webhook.endpoints[2].name: duplicate endpoint name "a" (also endpoints[0])',
    ]);
    expect(issuesOf(webhook({ url: 'https://h.example.com', secret: SECRET, endpoints: [ep('default')] }))).toEqual([
      'notify.webhook.endpoints[0].name: "default" is reserved for the endpoint given by notify.webhook.url',
    ]);
    expect(parseConfig(webhook({ endpoints: [ep('default')] })).notify.webhook.endpoints[0]?.name).toBe('default');
  });

  test('the delivery budget is 1 to 100,000, and no endpoint may have a higher max_in_flight than it', () => {
    expect(parseConfig({}).notify.webhook.max_in_flight_total).toBe(2000);
    expect(issuesOf(webhook({ max_in_flight_total: 0 }))).toEqual([
      'notify.webhook.max_in_flight_total: expected an integer from 1 to 100000, got 0',
    ]);
    expect(issuesOf(webhook({ max_in_flight_total: 100_001 }))).toEqual([
      'notify.webhook.max_in_flight_total: expected an integer from 1 to 100000, got 100001',
    ]);
    expect(
      issuesOf(
        webhook({
          max_in_flight_total: 10,
          max_in_flight: 8,
          endpoints: [{ name: 'a', url: 'https://h.example.com', secret: SECRET, max_in_flight: 11 }],
        }),
      ),
    ).toEqual(['notify.webhook.endpoints[0].max_in_flight: must not exceed notify.webhook.max_in_flight_total (10), got 11']);
    expect(issuesOf(webhook({ max_in_flight_total: 10 }))).toEqual([
      'notify.webhook.max_in_flight: must not exceed notify.webhook.max_in_flight_total (10), got 16',
    ]);
  });

  test('circuit, max_age and rate limits: bad values are refused naming the key', () => {
    expect(issuesOf(webhook({ circuit: { failure_threshold: 0 } }))).toEqual([
      'notify.webhook.circuit.failure_threshold: expected an integer from 1 to 100000, got 0',
    ]);
    expect(issuesOf(webhook({ circuit: { failure_threshold: -3 } }))).toEqual([
      'notify.webhook.circuit.failure_threshold: expected an integer from 1 to 100000, got -3',
    ]);
    expect(issuesOf(webhook({ circuit: { cooldown: '20m' } }))).toEqual([
      'notify.webhook.circuit.cooldown: must not exceed notify.webhook.circuit.cooldown_max (30s), got 20m',
    ]);
    expect(issuesOf(webhook({ max_age: '10s' }))).toEqual([
      'notify.webhook.max_age: must not be shorter than notify.webhook.circuit.cooldown_max (30s), got 10s',
    ]);
    // The bound is the longest wait between probes, not the first one.
    expect(issuesOf(webhook({ max_age: '5m', circuit: { cooldown_max: '10m' } }))).toEqual([
      'notify.webhook.max_age: must not be shorter than notify.webhook.circuit.cooldown_max (10m), got 5m',
    ]);
    for (const bad of ['20', '20/h', '0/s', '-1/s', 'fast', 20]) {
      expect(issuesOf(webhook({ endpoints: [{ name: 'a', url: 'https://h.example.com', secret: SECRET, rate_limit: bad }] }))).toEqual([
        `notify.webhook.endpoints[0].rate_limit: expected a rate like "20/s" or "600/min" (more than 0), got ${JSON.stringify(bad)}`,
      ]);
    }
    expect(issuesOf(webhook({ rate_limit: '5 per second' }))).toEqual([
      'notify.webhook.rate_limit: expected a rate like "20/s" or "600/min" (more than 0), got "5 per second"',
    ]);
    const cfg = parseConfig(
      webhook({
        rate_limit: '600/min',
        endpoints: [
          { name: 'a', url: 'https://h.example.com', secret: SECRET, rate_limit: '20/s' },
          { name: 'b', url: 'https://h.example.com', secret: SECRET },
        ],
      }),
    );
    expect(resolveEndpoints(cfg).map((e) => [e.name, e.rate_limit])).toEqual([
      ['a', 20],
      ['b', 10],
    ]);
  });

  test('topics must be exact topics, prefix patterns or *', () => {
    expect(issuesOf(webhook({ topics: ['a.b', 'a.*', '*', 'Bad', 'a.*.b'] }))).toEqual([
      'notify.webhook.topics[3]: expected a topic like "workspace.sync_failed", a pattern like "workspace.*", or "*", got "Bad"',
      'notify.webhook.topics[4]: expected a topic like "workspace.sync_failed", a pattern like "workspace.*", or "*", got "a.*.b"',
    ]);
  });

  test('scheme standard needs a whsec_ secret with a non-empty base64 key', () => {
    const ep = (secret: string) => webhook({ endpoints: [{ name: 'a', url: 'https://h.example.com', secret, scheme: 'standard' }] });
    expect(parseConfig(ep(WHSEC)).notify.webhook.endpoints[0]?.scheme).toBe('standard');
    for (const bad of [SECRET, 'whsec_', 'whsec_not base64!', 'whsec_abc']) {
      expect(issuesOf(ep(bad))).toEqual([
        `notify.webhook.endpoints[0].secret: scheme "standard" needs a secret like "whsec_<base64>", got a value of ${bad.length} characters`,
      ]);
    }
    expect(issuesOf(webhook({ url: 'https://h.example.com', secret: SECRET, scheme: 'standard' }))).toHaveLength(1);
  });

  test('retry.base may not exceed retry.max', () => {
    expect(issuesOf({ jobs: { retry: { base: '10m', max: '5m' } } })).toEqual([
      'jobs.retry.base: must not exceed jobs.retry.max (5m), got 10m',
    ]);
  });

  test('a connect_timeout of 0 or above the timeout it applies to is refused, naming the key', () => {
    expect(issuesOf(webhook({ connect_timeout: '0s' }))).toEqual(['notify.webhook.connect_timeout: must be longer than 0, got "0s"']);
    expect(issuesOf(webhook({ endpoints: [endpointWith('a', { connect_timeout: '0s' })] }))).toEqual([
      'notify.webhook.endpoints[0].connect_timeout: must be longer than 0, got "0s"',
    ]);
    expect(issuesOf(webhook({ connect_timeout: '20s' }))).toEqual([
      'notify.webhook.connect_timeout: must not exceed notify.webhook.timeout (10s), got 20s',
    ]);
    expect(issuesOf(webhook({ endpoints: [endpointWith('a', { timeout: '2s', connect_timeout: '3s' })] }))).toEqual([
      "notify.webhook.endpoints[0].connect_timeout: must not exceed this endpoint's timeout (2s), got 3s",
    ]);
    // Inherited from the top level: the endpoint's key is named, where the fix belongs.
    expect(issuesOf(webhook({ connect_timeout: '3s', endpoints: [endpointWith('a', { timeout: '2s' })] }))).toEqual([
      'notify.webhook.endpoints[0].connect_timeout: unset, so notify.webhook.connect_timeout (3s) applies, ' +
        "which exceeds this endpoint's timeout (2s): set one of at most 2s",
    ]);
    // The endpoint inherits the top-level timeout too.
    expect(issuesOf(webhook({ timeout: '1s', endpoints: [endpointWith('a', { connect_timeout: '2s' })] }))).toEqual([
      "notify.webhook.endpoints[0].connect_timeout: must not exceed this endpoint's timeout (1s), got 2s",
    ]);
    // Unset everywhere: a short timeout alone is fine (the default connect timeout shrinks to it).
    expect(() => parseConfig(webhook({ timeout: '300ms', endpoints: [endpointWith('a', { timeout: '1s' })] }))).not.toThrow();
    expect(() =>
      parseConfig(webhook({ connect_timeout: '2s', endpoints: [endpointWith('a', { timeout: '1s', connect_timeout: '1s' })] })),
    ).not.toThrow();
  });

  test('user names are unique', () => {
    const users = [
      { name: 'ops', role: 'admin' },
      { name: 'ci', role: 'service' },
      { name: 'ops', role: 'viewer' },
    ];
    expect(issuesOf({ server: { auth: { users } } })).toEqual(['server.auth.users[2].name: duplicate user name "ops" (also users[0])']);
  });

  test('headers must be valid names the service does not set itself', () => {
    const issues = issuesOf(webhook({ headers: { 'X-Team': 'a', 'bad name': 'b', 'X-ACW-Signature': 'c' } }));
    expect(issues).toEqual([
      'notify.webhook.headers["bad name"]: expected an HTTP header name, got "bad name"',
      'notify.webhook.headers.X-ACW-Signature: "X-ACW-Signature" is set by the service and cannot be configured',
    ]);
  });
});

describe('secrets in messages', () => {
  test('no message ever contains a secret or token value', () => {
    const issues = issuesOf({
      database: { url: `mysql://u:${SECRET}@h/db` },
      server: {
        auth: {
          users: [
            { name: 'ops', role: 'boss', token: SECRET },
            { name: 'x', role: 'admin', token: 42 },
          ],
        },
      },
      notify: {
        webhook: {
          url: 'https://h.example.com',
          secret: SECRET,
          scheme: 'standard',
          headers: { Authorization: `Bearer ${SECRET}\n` },
          endpoints: [
            { name: 'a', url: 'https://h.example.com', secret: SECRET, scheme: 'standard' },
            { name: 'b', secret: 123 },
          ],
        },
      },
    });
    expect(issues.length).toBeGreaterThanOrEqual(6);
    for (const issue of issues) {
      expect(issue).not.toContain(SECRET);
      expect(issue).not.toContain('Zebra');
      expect(issue).not.toContain('123');
    }
  });
});

test('every problem is reported at once, cross-field ones included, in the order of the input', () => {
  const issues = issuesOf({
    jobs: { wokers: 4, job_reaper: { lease_timeout: '5 minutes' }, retry: { base: '1h' } },
    log: { level: 'loud' },
    notify: { webhook: { url: 'https://h.example.com', timeout: 'soon', topics: ['Nope'] } },
  });
  expect(issues).toEqual([
    'jobs.wokers: unknown key (did you mean "workers"?)',
    'jobs.job_reaper.lease_timeout: expected a duration like "5m", got "5 minutes"',
    'jobs.retry.base: must not exceed jobs.retry.max (5m), got 1h',
    'log.level: expected one of "fatal", "error", "warn", "info", "debug", "trace", "silent", got "loud"',
    // An absent key is reported where its parent mapping starts.
    'notify.webhook.secret: required when notify.webhook.url is set',
    'notify.webhook.timeout: expected a duration like "5m", got "soon"',
    'notify.webhook.topics[0]: expected a topic like "workspace.sync_failed", a pattern like "workspace.*", or "*", got "Nope"',
  ]);
});

describe('resolveEndpoints', () => {
  test('lists the top-level form as "default", then endpoints with inherited timeout and max_in_flight', () => {
    const config = parseConfig(
      webhook({
        url: 'https://a.example.com',
        secret: SECRET,
        topics: ['a.*'],
        timeout: '3s',
        max_in_flight: 5,
        endpoints: [
          { name: 'b', url: 'https://b.example.com', secret: WHSEC, scheme: 'standard', headers: { 'X-Team': 'b' } },
          { name: 'c', url: 'http://c.example.com', secret: SECRET, timeout: '1s', max_in_flight: 2, enabled: false, topics: ['*'] },
        ],
      }),
    );
    expect(resolveEndpoints(config)).toEqual([
      {
        name: 'default',
        url: 'https://a.example.com',
        secret: SECRET,
        topics: ['a.*'],
        timeout: 3000,
        connect_timeout: 3000,
        max_in_flight: 5,
        rate_limit: 0,
        scheme: 'acw',
        ordering: 'relaxed',
        headers: {},
        enabled: true,
        ssrf_guard: false,
        allow_networks: [],
        propagate_trace: false,
      },
      {
        name: 'b',
        url: 'https://b.example.com',
        secret: WHSEC,
        topics: [],
        timeout: 3000,
        connect_timeout: 3000,
        max_in_flight: 5,
        rate_limit: 0,
        scheme: 'standard',
        ordering: 'relaxed',
        headers: { 'X-Team': 'b' },
        enabled: true,
        ssrf_guard: false,
        allow_networks: [],
        propagate_trace: false,
      },
      {
        name: 'c',
        url: 'http://c.example.com',
        secret: SECRET,
        topics: ['*'],
        timeout: 1000,
        connect_timeout: 1000,
        max_in_flight: 2,
        rate_limit: 0,
        scheme: 'acw',
        ordering: 'relaxed',
        headers: {},
        enabled: false,
        ssrf_guard: false,
        allow_networks: [],
        propagate_trace: false,
      },
    ]);
  });

  test('connect_timeout: 5s unless the timeout is shorter; an endpoint inherits notify.webhook.connect_timeout', () => {
    const ep = endpointWith;
    expect(
      connect({
        url: 'https://a.example.com',
        secret: SECRET,
        endpoints: [ep('b', { timeout: '2s' }), ep('c', { connect_timeout: '1s' })],
      }),
    ).toEqual([
      ['default', 10_000, 5_000],
      ['b', 2_000, 2_000],
      ['c', 10_000, 1_000],
    ]);
    expect(connect({ connect_timeout: '1500ms', endpoints: [ep('b', { timeout: '2s' }), ep('c', { connect_timeout: '300ms' })] })).toEqual([
      ['b', 2_000, 1_500],
      ['c', 10_000, 300],
    ]);
  });

  test('ssrf_guard: true applies the guard to a config endpoint (default off), with notify.webhook.allow_networks', () => {
    const config = parseConfig(
      webhook({
        url: 'https://a.example.com',
        secret: SECRET,
        allow_networks: ['10.20.0.0/16', 'fd00::/8'],
        endpoints: [endpointWith('b', { ssrf_guard: true }), endpointWith('c')],
      }),
    );
    expect(resolveEndpoints(config).map((e) => [e.name, e.ssrf_guard, e.allow_networks])).toEqual([
      ['default', false, ['10.20.0.0/16', 'fd00::/8']],
      ['b', true, ['10.20.0.0/16', 'fd00::/8']],
      ['c', false, ['10.20.0.0/16', 'fd00::/8']],
    ]);
  });

  test('warns about a guarded config endpoint whose URL the guard refuses, unless allow_networks opens it', () => {
    const endpoints = [
      endpointWith('a', { url: 'http://127.0.0.1:9000/h', ssrf_guard: true, topics: ['*'] }),
      endpointWith('b', { url: 'http://127.0.0.1:9000/h', topics: ['*'] }),
      endpointWith('c', { url: 'https://user:pw@[fd00::1]/h', ssrf_guard: true, topics: ['*'] }),
      endpointWith('d', { url: 'https://hooks.example.com/h', ssrf_guard: true, topics: ['*'] }),
    ];
    expect(configWarnings(parseConfig(webhook({ endpoints })))).toEqual([
      'notify.webhook.endpoints[0].url: 127.0.0.1 is in loopback 127.0.0.0/8: not a global unicast address ' +
        '(to allow it, add "127.0.0.0/8" to notify.webhook.allow_networks): every delivery will fail (ssrf_guard is on)',
      'notify.webhook.endpoints[2].url: fd00::1 is in unique local (ULA) fc00::/7: not a global unicast address ' +
        '(to allow it, add "fc00::/7" to notify.webhook.allow_networks): every delivery will fail (ssrf_guard is on)',
    ]);
    // Opened, the endpoints warn no more; what is left is the warning about the opened ranges themselves.
    expect(configWarnings(parseConfig(webhook({ endpoints, allow_networks: ['127.0.0.0/8', 'fd00::/8'] })))).toEqual([
      expect.stringMatching(
        /^notify\.webhook\.allow_networks: the SSRF guard lets endpoints reach 127\.0\.0\.0\/8 \(loopback\), fd00::\/8/,
      ),
    ]);
  });

  test('notify.webhook.allow_networks: each bad network is refused naming its index', () => {
    expect(issuesOf(webhook({ allow_networks: ['127.0.0.0/8', '10.0.0.0/33', 'intranet', '10.1.0.0/8', 7] }))).toEqual([
      'notify.webhook.allow_networks[1]: expected a prefix length from 0 to 32, got "10.0.0.0/33"',
      'notify.webhook.allow_networks[2]: expected a network like "10.0.0.0/8" or "fd00::/8", got "intranet"',
      'notify.webhook.allow_networks[3]: "10.1.0.0/8" has host bits set past /8: write the network address',
      'notify.webhook.allow_networks[4]: expected a string, got 7',
    ]);
    expect(issuesOf(webhook({ allow_networks: '127.0.0.0/8' }))).toEqual([
      'notify.webhook.allow_networks: expected a list, got "127.0.0.0/8"',
    ]);
    expect(issuesOf(webhook({ endpoints: [endpointWith('b', { ssrf_guard: 'yes' })] }))).toEqual([
      'notify.webhook.endpoints[0].ssrf_guard: expected true or false, got "yes"',
    ]);
  });

  test('has no "default" when the top-level url is empty', () => {
    expect(resolveEndpoints(parseConfig({}))).toEqual([]);
  });

  test('notify.webhook.enabled: false disables every endpoint', () => {
    const config = parseConfig(
      webhook({
        enabled: false,
        url: 'https://a.example.com',
        secret: SECRET,
        endpoints: [{ name: 'b', url: 'https://b.example.com', secret: SECRET }],
      }),
    );
    expect(resolveEndpoints(config).map((e) => e.enabled)).toEqual([false, false]);
  });
});
