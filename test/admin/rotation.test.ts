// planRotation (src/admin/rotation.ts): what a rotation of a stored endpoint writes, and its refusals.
import { describe, expect, it } from 'vitest';
import { DEFAULT_OVERLAP, planRotation } from '../../src/admin/rotation.js';
import { newSigningSecret as newSecret } from '../../src/crypto/signing-secret.js';
import { isStandardSecret } from '../../src/config/rules.js';
import { signingSecrets } from '../../src/webhook/sign.js';
import { refusal as refusedWith } from '../helpers/refusal.js';

const NOW = Date.parse('2026-12-01T06:00:00Z');
const OLD = 'old-secret-0123456789';
const NEW = 'new-secret-9876543210';

function refusal(fn: () => unknown): { status: number; code: string; field: unknown; message: string } {
  const err = refusedWith(fn);
  return { status: err.status, code: err.code, field: err.details?.['field'], message: err.message };
}

describe('planRotation', () => {
  it('keeps the secret in force, adds the new one until now + overlap; signingSecrets then signs with both, then the new one', () => {
    const plan = planRotation({ scheme: 'acw', secret: OLD }, { overlap: '2h', secret: NEW }, NOW);
    expect(plan).toEqual({ secret: OLD, secret_next: NEW, rotate_until: NOW + 2 * 3600_000, generated: false });
    expect(signingSecrets(plan, NOW + 3600_000)).toEqual({ secret: OLD, next: NEW });
    expect(signingSecrets(plan, NOW + 2 * 3600_000)).toEqual({ secret: NEW });
    expect(DEFAULT_OVERLAP).toBe('24h');
    expect(planRotation({ scheme: 'acw', secret: OLD }, {}, NOW).rotate_until).toBe(NOW + 24 * 3600_000);
  });

  it('generates a secret of the scheme when none is given', () => {
    const acw = planRotation({ scheme: 'acw', secret: OLD }, {}, NOW);
    expect(acw.generated).toBe(true);
    expect(acw.secret_next).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const std = planRotation({ scheme: 'standard', secret: newSecret('standard') }, {}, NOW);
    expect(isStandardSecret(std.secret_next)).toBe(true);
    expect(newSecret('acw')).not.toBe(newSecret('acw'));
  });

  it('after a finished overlap, the previous new secret is the one kept', () => {
    const ep = { scheme: 'acw' as const, secret: OLD, secret_next: NEW, rotate_until: NOW - 1 };
    expect(planRotation(ep, { secret: 'third-secret-abcdefgh' }, NOW)).toMatchObject({ secret: NEW, secret_next: 'third-secret-abcdefgh' });
  });

  it('refuses, naming the field and never the secret: an overlap outside 1m to 30 days, a short or malformed secret, the same secret, a rotation under way', () => {
    const acw = { scheme: 'acw' as const, secret: OLD };
    const cases: Array<[() => unknown, number, string]> = [
      [() => planRotation(acw, { overlap: '59s' }, NOW), 400, 'overlap'],
      [() => planRotation(acw, { overlap: '721h' }, NOW), 400, 'overlap'],
      [() => planRotation(acw, { overlap: 'a day' }, NOW), 400, 'overlap'],
      [() => planRotation(acw, { secret: 'short-secret' }, NOW), 400, 'secret'],
      [() => planRotation(acw, { secret: 'has a space in it 0123' }, NOW), 400, 'secret'],
      [() => planRotation(acw, { secret: OLD }, NOW), 400, 'secret'],
      [() => planRotation({ scheme: 'standard', secret: newSecret('standard') }, { secret: NEW }, NOW), 400, 'secret'],
      [
        () =>
          planRotation(
            { scheme: 'standard', secret: newSecret('standard') },
            { secret: `whsec_${Buffer.from('tiny').toString('base64')}` },
            NOW,
          ),
        400,
        'secret',
      ],
      [() => planRotation({ ...acw, secret_next: NEW, rotate_until: NOW + 1 }, {}, NOW), 409, 'secret'],
    ];
    for (const [fn, status, field] of cases) {
      const r = refusal(fn);
      expect({ status: r.status, field: r.field }).toEqual({ status, field });
      expect(r.message).toMatch(new RegExp(`^${field}: `));
      expect(r.message).not.toMatch(/short-secret|has a space|old-secret|new-secret/);
    }
    expect(planRotation(acw, { overlap: '1m' }, NOW).rotate_until).toBe(NOW + 60_000);
    expect(planRotation(acw, { overlap: '720h' }, NOW).rotate_until).toBe(NOW + 720 * 3600_000);
  });
});
