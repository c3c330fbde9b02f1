/**
 * Endpoint secrets encrypted at rest (docs/operations.md#secrets-at-rest): AES-256-GCM from
 * node:crypto, a fresh 96-bit IV per encryption, the 128-bit tag checked on every decryption.
 *
 * Stored form: `v1:<key id>:<base64 of iv | tag | ciphertext>`. The key id (8 hex digits derived
 * from the key) picks the key on decryption, so a new key can be configured while older ones still
 * decrypt (`secrets.old_encryption_keys`). The version, the key id and the caller's `context` are
 * authenticated too: a ciphertext moved to another row or given another key id fails like a
 * tampered one.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const KEY_BYTES = 32;

/** Why a stored secret could not be decrypted. The message never holds key or secret material. */
export class SecretBoxError extends Error {
  override readonly name = 'SecretBoxError';
  constructor(
    readonly reason: 'malformed' | 'unknown_key' | 'tampered',
    message: string,
  ) {
    super(message);
  }
}

/** The id stored with each ciphertext: 8 hex digits of a hash of the key (reveals nothing usable about it). */
export function keyIdOf(key: Buffer): string {
  return createHash('sha256').update('acw-webhooks secret key id\0').update(key).digest('hex').slice(0, 8);
}

// Standard or URL-safe alphabet, 43 characters and an optional `=`: exactly 32 bytes.
const KEY_TEXT = /^(?:[A-Za-z0-9+/]{43}|[A-Za-z0-9_-]{43})=?$/;

/**
 * A key from its config text: base64 of exactly 32 bytes (`openssl rand -base64 32`), surrounding
 * white space ignored. Returns what is wrong instead, without quoting the text.
 */
export function parseKey(text: string): Buffer | string {
  const t = text.trim();
  const wrong = 'expected base64 of exactly 32 bytes (e.g. from `openssl rand -base64 32`)';
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(t)) return `${wrong}, got a value of ${text.length} characters that is not base64`;
  const key = Buffer.from(t, 'base64');
  if (!KEY_TEXT.test(t) || key.length !== KEY_BYTES) return `${wrong}, got base64 of ${key.length} bytes`;
  return key;
}

export class SecretBox {
  /** The id new ciphertexts carry: the current key's. */
  readonly keyId: string;
  private readonly current: Buffer;
  private readonly keys = new Map<string, Buffer>();

  /** `current` encrypts and decrypts; `old` keys only decrypt (what was stored before a rotation). */
  constructor(current: Buffer, old: readonly Buffer[] = []) {
    for (const key of [current, ...old]) {
      if (key.length !== KEY_BYTES) throw new RangeError(`an encryption key must be ${KEY_BYTES} bytes, got ${key.length}`);
      const id = keyIdOf(key);
      if (!this.keys.has(id)) this.keys.set(id, Buffer.from(key));
    }
    this.keyId = keyIdOf(current);
    this.current = this.keys.get(this.keyId)!;
  }

  /** Every key id this box can decrypt, the current one first. */
  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  /** `plaintext` sealed under the current key; `context` (e.g. the endpoint's name) must be given again to open it. */
  encrypt(plaintext: string, context = ''): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.current, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad(this.keyId, context));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return `${VERSION}:${this.keyId}:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
  }

  /** The plaintext of `stored`; throws a SecretBoxError for an unknown key id, a malformed or a tampered value. */
  decrypt(stored: string, context = ''): string {
    const m = /^v1:([0-9a-f]{8}):([A-Za-z0-9+/]*={0,2})$/.exec(stored);
    if (!m) throw new SecretBoxError('malformed', 'not an encrypted secret (expected "v1:<key id>:<base64>")');
    const [, id, b64] = m as unknown as [string, string, string];
    const key = this.keys.get(id);
    if (key === undefined) {
      throw new SecretBoxError(
        'unknown_key',
        `encrypted with key id ${id}, which is neither secrets.encryption_key (${this.keyId}) nor in secrets.old_encryption_keys`,
      );
    }
    const raw = Buffer.from(b64, 'base64');
    if (raw.length < IV_BYTES + TAG_BYTES) throw new SecretBoxError('malformed', 'encrypted secret too short');
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
    decipher.setAAD(aad(id, context));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      // OpenSSL's "unable to authenticate data": nothing of the input is echoed.
      throw new SecretBoxError('tampered', `encrypted secret (key id ${id}) failed authentication: altered, or stored for another context`);
    }
  }

  /** True when `stored` was sealed with an older key: re-encrypt it with `encrypt` to finish a rotation. */
  needsRotation(stored: string): boolean {
    return !stored.startsWith(`${VERSION}:${this.keyId}:`);
  }
}

function aad(keyId: string, context: string): Buffer {
  return Buffer.from(`${VERSION}:${keyId}:${context}`, 'utf8');
}
