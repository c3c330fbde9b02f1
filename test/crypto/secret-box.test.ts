// Endpoint secrets at rest (docs/operations.md#secrets-at-rest): AES-256-GCM round trips, a fresh IV
// each time, every altered byte refused, the key picked by its id, and errors that quote nothing secret;
// and the signing secrets generated for new endpoints.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isStandardSecret } from '../../src/config/index.js';
import { keyIdOf, parseKey, SecretBox, SecretBoxError } from '../../src/crypto/secret-box.js';
import { newSigningSecret } from '../../src/crypto/signing-secret.js';

const KEY_A = Buffer.alloc(32, 0xa1);
const KEY_B = Buffer.alloc(32, 0xb2);
const SECRET = 'whsec_c3VwZXItc2VjcmV0LXNpZ25pbmcta2V5';

function errorOf(fn: () => unknown): SecretBoxError {
  try {
    fn();
  } catch (err) {
    if (err instanceof SecretBoxError) return err;
    throw err;
  }
  throw new Error('did not throw');
}

/** The stored form with one byte of its decoded payload flipped. */
function flip(stored: string, index: number): string {
  const [v, id, b64] = stored.split(':') as [string, string, string];
  const raw = Buffer.from(b64, 'base64');
  raw[index] = raw[index]! ^ 0x01;
  return `${v}:${id}:${raw.toString('base64')}`;
}

describe('SecretBox', () => {
  it('round-trips text, including empty and non-ASCII, in the v1:<key id>:<base64> form', () => {
    const box = new SecretBox(KEY_A);
    for (const text of [SECRET, '', 'ünïcødé ✓ 🔑', 'x'.repeat(10_000)]) {
      const sealed = box.encrypt(text);
      expect(sealed).toMatch(new RegExp(`^v1:${keyIdOf(KEY_A)}:[A-Za-z0-9+/]+={0,2}$`));
      expect(box.decrypt(sealed)).toBe(text);
    }
    // 12-byte IV + 16-byte tag + the plaintext's length.
    expect(Buffer.from(box.encrypt('abc').split(':')[2]!, 'base64')).toHaveLength(12 + 16 + 3);
  });

  it('uses a fresh IV each time: the same plaintext never seals the same twice', () => {
    const box = new SecretBox(KEY_A);
    const sealed = new Set(Array.from({ length: 200 }, () => box.encrypt(SECRET)));
    expect(sealed.size).toBe(200);
    const ivs = new Set([...sealed].map((s) => Buffer.from(s.split(':')[2]!, 'base64').subarray(0, 12).toString('hex')));
    expect(ivs.size).toBe(200);
  });

  it('never stores the plaintext', () => {
    const sealed = new SecretBox(KEY_A).encrypt(SECRET);
    expect(sealed).not.toContain(SECRET);
    expect(Buffer.from(sealed.split(':')[2]!, 'base64').includes(Buffer.from(SECRET))).toBe(false);
  });

  it('refuses every altered byte (IV, tag or ciphertext), a truncation, and a changed key id or context', () => {
    const box = new SecretBox(KEY_A, [KEY_B]);
    const sealed = box.encrypt(SECRET, 'billing');
    const length = Buffer.from(sealed.split(':')[2]!, 'base64').length;
    for (let i = 0; i < length; i++) {
      const err = errorOf(() => box.decrypt(flip(sealed, i), 'billing'));
      expect(err.reason).toBe('tampered');
    }
    const [v, , b64] = sealed.split(':');
    // The same bytes under the other known key's id: authenticated data and key both differ.
    expect(errorOf(() => box.decrypt(`${v}:${keyIdOf(KEY_B)}:${b64}`, 'billing')).reason).toBe('tampered');
    // Moved to another endpoint's row.
    expect(errorOf(() => box.decrypt(sealed, 'crm')).reason).toBe('tampered');
    expect(errorOf(() => box.decrypt(sealed)).reason).toBe('tampered');
    const short = Buffer.from(b64!, 'base64').subarray(0, 20).toString('base64');
    expect(errorOf(() => box.decrypt(`${v}:${keyIdOf(KEY_A)}:${short}`)).reason).toBe('malformed');
    expect(box.decrypt(sealed, 'billing')).toBe(SECRET);
  });

  it('refuses what is not a v1 value', () => {
    const box = new SecretBox(KEY_A);
    const sealed = box.encrypt(SECRET);
    for (const bad of [
      SECRET,
      '',
      'v2:00000000:AAAA',
      `v1:${keyIdOf(KEY_A)}:not base64!`,
      `v1:XYZ:${'A'.repeat(40)}`,
      // A valid value inside other text is not one.
      ` ${sealed}`,
      `x${sealed}`,
      `${sealed}!`,
      `${sealed}:`,
    ]) {
      const err = errorOf(() => box.decrypt(bad));
      expect([err.name, err.reason, err.message]).toEqual([
        'SecretBoxError',
        'malformed',
        'not an encrypted secret (expected "v1:<key id>:<base64>")',
      ]);
    }
  });

  it('names what is wrong: too short, or failed authentication', () => {
    const box = new SecretBox(KEY_A);
    const id = keyIdOf(KEY_A);
    const short = errorOf(() => box.decrypt(`v1:${id}:${Buffer.alloc(27).toString('base64')}`));
    expect([short.reason, short.message]).toEqual(['malformed', 'encrypted secret too short']);
    // 28 bytes (IV and tag, nothing sealed) is long enough to be checked, and fails the check.
    const empty = errorOf(() => box.decrypt(`v1:${id}:${Buffer.alloc(28).toString('base64')}`));
    expect([empty.reason, empty.message]).toEqual([
      'tampered',
      `encrypted secret (key id ${id}) failed authentication: altered, or stored for another context`,
    ]);
  });

  it('picks the key by its id: after a rotation old values still open, new ones use the new key', () => {
    const before = new SecretBox(KEY_A);
    const old = before.encrypt(SECRET);
    const rotated = new SecretBox(KEY_B, [KEY_A]);
    expect(rotated.keyId).toBe(keyIdOf(KEY_B));
    expect(rotated.keyIds).toEqual([keyIdOf(KEY_B), keyIdOf(KEY_A)]);
    expect(rotated.decrypt(old)).toBe(SECRET);
    expect(rotated.needsRotation(old)).toBe(true);
    const fresh = rotated.encrypt(SECRET);
    expect(fresh.split(':')[1]).toBe(keyIdOf(KEY_B));
    expect(rotated.needsRotation(fresh)).toBe(false);
    // The old box cannot read what the new key sealed: an unknown key id, named, nothing else.
    const err = errorOf(() => before.decrypt(fresh));
    expect(err.reason).toBe('unknown_key');
    expect(err.message).toBe(
      `encrypted with key id ${keyIdOf(KEY_B)}, which is neither secrets.encryption_key (${keyIdOf(KEY_A)}) nor in secrets.old_encryption_keys`,
    );
  });

  it('no error message holds the plaintext, the key or the ciphertext', () => {
    const box = new SecretBox(KEY_A);
    const sealed = box.encrypt(SECRET);
    const messages = [
      errorOf(() => box.decrypt(flip(sealed, 20))).message,
      errorOf(() => new SecretBox(KEY_B).decrypt(sealed)).message,
      errorOf(() => box.decrypt(sealed.slice(0, -8))).message,
    ];
    for (const m of messages) {
      for (const secret of [SECRET, KEY_A.toString('base64'), KEY_A.toString('hex'), sealed.split(':')[2]!.slice(0, 16)]) {
        expect(m).not.toContain(secret);
      }
    }
  });

  it('key ids differ between keys and are stable', () => {
    // Stored with every value: the derivation may never change, or stored secrets stop opening.
    expect(keyIdOf(KEY_A)).toBe('847e2a06');
    expect(keyIdOf(Buffer.from(KEY_A))).toBe(keyIdOf(KEY_A));
    expect(keyIdOf(KEY_A)).not.toBe(keyIdOf(KEY_B));
    expect(() => new SecretBox(randomBytes(16))).toThrow('an encryption key must be 32 bytes, got 16');
  });
});

describe('parseKey', () => {
  it('accepts base64 (standard or URL-safe, padding optional, surrounding white space ignored) of 32 bytes', () => {
    const key = randomBytes(32);
    for (const text of [
      key.toString('base64'),
      key.toString('base64url'),
      key.toString('base64').replace('=', ''),
      ` ${key.toString('base64')}\n`,
    ]) {
      expect(parseKey(text)).toEqual(key);
    }
  });

  it('refuses other lengths and non-base64, without quoting the text', () => {
    expect(parseKey(randomBytes(16).toString('base64'))).toBe(
      'expected base64 of exactly 32 bytes (e.g. from `openssl rand -base64 32`), got base64 of 16 bytes',
    );
    expect(parseKey(randomBytes(33).toString('base64'))).toMatch(/got base64 of 33 bytes$/);
    expect(parseKey('correct horse battery staple!')).toBe(
      'expected base64 of exactly 32 bytes (e.g. from `openssl rand -base64 32`), got a value of 29 characters that is not base64',
    );
    expect(parseKey('')).toMatch(/got base64 of 0 bytes$/);
  });

  it('refuses a text that decodes to 32 bytes but is not one key written one way', () => {
    const std = Buffer.alloc(32, 0xfb).toString('base64');
    expect(std).toBe('+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/s=');
    for (const text of [
      // Both alphabets at once.
      `-${std.slice(1)}`,
      // Two padding characters where one belongs.
      `${std}=`,
    ]) {
      expect(Buffer.from(text.trim(), 'base64')).toHaveLength(32);
      expect(parseKey(text)).toBe('expected base64 of exactly 32 bytes (e.g. from `openssl rand -base64 32`), got base64 of 32 bytes');
    }
  });
});

describe('newSigningSecret', () => {
  it('gives 32 random bytes in the form each scheme expects', () => {
    const acw = newSigningSecret('acw');
    expect(acw).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(acw, 'base64url')).toHaveLength(32);
    const standard = newSigningSecret('standard');
    expect(isStandardSecret(standard)).toBe(true);
    expect(Buffer.from(standard.slice(6), 'base64')).toHaveLength(32);
    expect(newSigningSecret('acw')).not.toBe(acw);
  });
});
