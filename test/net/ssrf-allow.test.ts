// What an operator reads when the SSRF guard refuses an address (docs/operations.md#ssrf-guard): every
// refusal names notify.webhook.allow_networks and the entry that would allow the address, and a
// config that opens loopback or a private range is warned about (config check, and at every start).
import { describe, expect, it } from 'vitest';
import { configWarnings } from '../../src/config/endpoints.js';
import { parseConfig } from '../../src/config/load.js';
import { ApiError } from '../../src/errors.js';
import { allowHint, BlockedAddressError, SsrfGuard } from '../../src/net/ssrf.js';

const webhook = (w: Record<string, unknown>) => parseConfig({ notify: { webhook: w } });
const allowWarnings = (w: Record<string, unknown>) =>
  configWarnings(webhook(w)).filter((m) => m.startsWith('notify.webhook.allow_networks:'));

describe('a refusal names the key that would allow it', () => {
  it('at endpoint create (API and CLI share checkUrl): the key and the range to add, nothing of the URL past its host', () => {
    let err: unknown;
    try {
      new SsrfGuard().checkUrl('http://127.0.0.1:9000/hook?token=very-secret');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ApiError);
    const message = (err as ApiError).message;
    expect(message).toBe(
      'url: 127.0.0.1 is in loopback 127.0.0.0/8: not a global unicast address (to allow it, add "127.0.0.0/8" to notify.webhook.allow_networks)',
    );
    expect(message).not.toContain('very-secret');
  });

  it('at delivery: a host name that resolves into a private range', () => {
    const err = new BlockedAddressError('hooks.internal', '10.1.2.3', { name: 'private (RFC 1918)', cidr: '10.0.0.0/8' });
    expect(err.message).toBe(
      'hooks.internal resolves to 10.1.2.3, which is in private (RFC 1918) 10.0.0.0/8: not a global unicast address ' +
        '(to allow it, add "10.0.0.0/8" to notify.webhook.allow_networks)',
    );
  });

  it('suggests the address alone when its range is too wide to open (reserved ::/0)', () => {
    expect(allowHint('4000::1', { name: 'reserved', cidr: '::/0' })).toBe(
      'to allow it, add "4000::1/128" to notify.webhook.allow_networks',
    );
    expect(allowHint('0.0.0.1', { name: '"this network"', cidr: '0.0.0.0/8' })).toBe(
      'to allow it, add "0.0.0.0/8" to notify.webhook.allow_networks',
    );
  });

  it('the suggested entry is valid and does allow the address', () => {
    for (const address of ['127.0.0.1', '10.9.8.7', 'fd00::1', '::1', '169.254.169.254', '4000::1']) {
      const range = new SsrfGuard().refusal(address)!;
      const entry = /add "([^"]+)"/.exec(allowHint(address, range))![1]!;
      expect({ address, refused: new SsrfGuard({ allowNetworks: [entry] }).refusal(address) }).toEqual({ address, refused: null });
    }
  });
});

describe('a config that opens loopback or a private range is warned about', () => {
  it('names each opened entry and its range, in one warning', () => {
    expect(allowWarnings({ allow_networks: ['127.0.0.0/8', '10.20.0.0/16'] })).toEqual([
      'notify.webhook.allow_networks: the SSRF guard lets endpoints reach 127.0.0.0/8 (loopback), 10.20.0.0/16 (private (RFC 1918)): ' +
        'anyone who may create an endpoint can make this service send requests there; keep it for development or a known internal ' +
        'receiver (docs/operations.md#ssrf-guard)',
    ]);
  });

  it('says nothing when nothing is opened, or only global addresses are listed', () => {
    expect(allowWarnings({})).toEqual([]);
    expect(allowWarnings({ allow_networks: ['93.184.216.0/24'] })).toEqual([]);
  });
});
