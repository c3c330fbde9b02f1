// `alerts.sinks` in the config (docs/operations.md#alert-sinks): bad input names its key, secrets
// and the URL's path stay out of the logged config, and the SSRF rules are the config endpoints'.
import { describe, expect, test } from 'vitest';
import { configWarnings, resolveSinks } from '../../src/config/endpoints.js';
import { ConfigError, maskConfig, parseConfig } from '../../src/config/load.js';

const SECRET = 'sink-S3cr3t-Zebra-42';

function issuesOf(raw: unknown): string[] {
  try {
    parseConfig(raw);
  } catch (err) {
    if (err instanceof ConfigError) return err.issues;
    throw err;
  }
  throw new Error('expected the config to be rejected');
}

const sinks = (...list: Record<string, unknown>[]) => ({ alerts: { sinks: list } });
/** A guarded sink on loopback, with `allow` as notify.webhook.allow_networks. */
const raw = (allow: string[]) => ({
  notify: { webhook: { allow_networks: allow } },
  ...sinks({ name: 'ops', url: 'http://127.0.0.1:9000/alerts', secret: SECRET, ssrf_guard: true }),
});

describe('alerts.sinks', () => {
  test('none by default', () => {
    expect(parseConfig({}).alerts).toEqual({ sinks: [] });
  });

  test('a sink of each format, with their defaults, as internal endpoints named sink:NAME with no topics', () => {
    const config = parseConfig(
      sinks(
        { name: 'ops', url: 'https://ops.example.com/acw', secret: SECRET },
        { name: 'chat', format: 'slack', url: 'https://hooks.slack.com/services/T0/B0/xyz', timeout: '3s', max_in_flight: 1 },
      ),
    );
    expect(config.alerts.sinks[0]).toMatchObject({ format: 'webhook', max_in_flight: 2, ssrf_guard: false, headers: {} });
    expect(resolveSinks(config).map((e) => [e.name, e.sink, e.topics, e.timeout, e.max_in_flight, e.scheme])).toEqual([
      ['sink:ops', 'webhook', [], 10_000, 2, 'acw'],
      ['sink:chat', 'slack', [], 3_000, 1, 'acw'],
    ]);
  });

  test('bad input names the key: a bad URL, a webhook sink with no secret, an unknown format, a duplicate name', () => {
    expect(issuesOf(sinks({ name: 'ops', url: 'ftp://ops.example.com', secret: SECRET }))).toEqual([
      'alerts.sinks[0].url: expected an http:// or https:// URL, got a "ftp:" URL',
    ]);
    expect(issuesOf(sinks({ name: 'ops', url: 'https://ops.example.com' }))).toEqual([
      'alerts.sinks[0].secret: required (non-empty) for a sink of format "webhook": its alerts are signed',
    ]);
    expect(issuesOf(sinks({ name: 'ops', format: 'teams', url: 'https://ops.example.com' }))).toEqual([
      'alerts.sinks[0].format: expected one of "webhook", "slack", got "teams"',
    ]);
    expect(
      issuesOf(
        sinks(
          { name: 'ops', url: 'https://a.example.com', secret: SECRET },
          { name: 'ops', format: 'slack', url: 'https://b.example.com' },
        ),
      ),
    ).toEqual(['alerts.sinks[1].name: duplicate sink name "ops" (also sinks[0])']);
    expect(issuesOf(sinks({ name: 'Ops Pager', url: 'https://a.example.com', secret: SECRET }))[0]).toMatch(/^alerts\.sinks\[0\]\.name: /);
  });

  test('the logged config hides the secret, header values and the URL past its origin (a slack URL is a credential)', () => {
    const config = parseConfig(
      sinks(
        { name: 'ops', url: 'https://ops.example.com/hook?token=abc', secret: SECRET, headers: { Authorization: 'Bearer xyz' } },
        { name: 'chat', format: 'slack', url: 'https://hooks.slack.com/services/T0/B0/xyz' },
      ),
    );
    const text = JSON.stringify(maskConfig(config).alerts);
    expect(maskConfig(config).alerts.sinks.map((s) => s.url)).toEqual([
      'https://ops.example.com/[redacted]',
      'https://hooks.slack.com/[redacted]',
    ]);
    for (const secret of [SECRET, 'xyz', 'abc', 'T0/B0']) expect(text).not.toContain(secret);
  });

  test('ssrf_guard as for config endpoints: a loopback sink is warned about unless allow_networks lets it through', () => {
    expect(configWarnings(parseConfig(raw([]))).filter((w) => w.startsWith('alerts.'))).toEqual([
      expect.stringMatching(
        /^alerts\.sinks\[0\]\.url: .*notify\.webhook\.allow_networks.*: every alert to it will fail \(ssrf_guard is on\)$/,
      ),
    ]);
    expect(configWarnings(parseConfig(raw(['127.0.0.0/8']))).filter((w) => w.startsWith('alerts.'))).toEqual([]);
    expect(resolveSinks(parseConfig(raw(['127.0.0.0/8'])))[0]).toMatchObject({ ssrf_guard: true, allow_networks: ['127.0.0.0/8'] });
  });
});
