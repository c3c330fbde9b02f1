// Where the encryption key comes from (docs/operations.md#secrets-at-rest): the config (or
// ACW_ENCRYPTION_KEY), else a key file the embedded default creates under data_dir, else "missing";
// bad keys refused at start naming the key, never quoting it.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, maskConfig, parseConfig } from '../../src/config/load.js';
import { encryptionKeyMissing, KEY_FILE, loadSecretBox, readOrCreateKeyFile } from '../../src/crypto/keys.js';
import { keyIdOf, SecretBox } from '../../src/crypto/secret-box.js';
import { captureLogs } from '../helpers/logs.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'acw-keys-'));
  dirs.push(dir);
  return dir;
}

const KEY = randomBytes(32);
const OLD = randomBytes(32);
const EXTERNAL = 'postgres://acw@db.example.com/acw';

/** A config on the embedded database under `dataDir`, or on an external one. */
const config = (over: { dataDir?: string; url?: string; secrets?: Record<string, unknown> } = {}, env: Record<string, string> = {}) =>
  parseConfig({ database: { url: over.url ?? '', data_dir: over.dataDir ?? tempDir() }, secrets: over.secrets ?? {} }, env);

function issuesOf(raw: unknown, env: Record<string, string> = {}): string[] {
  try {
    parseConfig(raw, env);
  } catch (err) {
    if (err instanceof ConfigError) return err.issues;
    throw err;
  }
  throw new Error('expected the config to be rejected');
}

describe('the key from the config', () => {
  it('secrets.encryption_key, with old keys that still decrypt', async () => {
    const before = new SecretBox(OLD).encrypt('s3cr3t');
    const box = await loadSecretBox(
      config({ url: EXTERNAL, secrets: { encryption_key: KEY.toString('base64'), old_encryption_keys: [OLD.toString('base64')] } }),
    );
    expect(box?.keyId).toBe(keyIdOf(KEY));
    expect(box?.decrypt(before)).toBe('s3cr3t');
  });

  it('comes from ACW_ENCRYPTION_KEY when the key is not set, or through ${VAR} like any key', async () => {
    const env = { ACW_ENCRYPTION_KEY: KEY.toString('base64'), MY_KEY: OLD.toString('base64') };
    expect((await loadSecretBox(config({ url: EXTERNAL }, env)))?.keyId).toBe(keyIdOf(KEY));
    expect((await loadSecretBox(config({ url: EXTERNAL, secrets: { encryption_key: '${MY_KEY}' } }, env)))?.keyId).toBe(keyIdOf(OLD));
    expect(config({ url: EXTERNAL }).secrets.encryption_key).toBe('');
  });

  it('an external database with no key: missing (null), and the 503 the write routes answer names the key', async () => {
    expect(await loadSecretBox(config({ url: EXTERNAL }))).toBeNull();
    const err = encryptionKeyMissing();
    expect(err).toMatchObject({ status: 503, code: 'encryption_key_missing', details: { key: 'secrets.encryption_key' } });
    expect(err.message).toMatch(/^secrets\.encryption_key is not set/);
    // And says how to make one.
    expect(err.message).toContain('(or ACW_ENCRYPTION_KEY) to base64 of 32 random bytes (openssl rand -base64 32)');
  });

  it('refuses a bad key in a config built by hand (past the schema), naming the key', async () => {
    const good = config({ url: EXTERNAL });
    const bad = (secrets: Partial<typeof good.secrets>) => loadSecretBox({ ...good, secrets: { ...good.secrets, ...secrets } });
    await expect(bad({ encryption_key: 'short' })).rejects.toThrow(
      'secrets.encryption_key: expected base64 of exactly 32 bytes (e.g. from `openssl rand -base64 32`), got base64 of 3 bytes',
    );
  });

  it('refuses a key that is not base64 of 32 bytes at start, naming the key and index, never quoting it', () => {
    const short = randomBytes(16).toString('base64');
    const words = 'correct horse battery staple';
    const issues = issuesOf({ secrets: { encryption_key: short, old_encryption_keys: [KEY.toString('base64'), words, 7] } });
    expect(issues).toEqual([
      'secrets.encryption_key: expected base64 of exactly 32 bytes (e.g. from `openssl rand -base64 32`), got base64 of 16 bytes',
      'secrets.old_encryption_keys[1]: expected base64 of exactly 32 bytes (e.g. from `openssl rand -base64 32`), got a value of 28 characters that is not base64',
      'secrets.old_encryption_keys[2]: expected a string, got a number',
    ]);
    expect(issues.join('\n')).not.toContain(short);
    expect(issues.join('\n')).not.toContain('horse');
    expect(issuesOf({}, { ACW_ENCRYPTION_KEY: short })).toEqual([
      'secrets.encryption_key: expected base64 of exactly 32 bytes (e.g. from `openssl rand -base64 32`), got base64 of 16 bytes',
    ]);
    expect(issuesOf({ secrets: { encryption_key: KEY.toString('base64'), key: 'x' } })).toEqual(['secrets.key: unknown key']);
  });

  it('is masked in the logged config', () => {
    const masked = maskConfig(
      config({ secrets: { encryption_key: KEY.toString('base64'), old_encryption_keys: [OLD.toString('base64')] } }),
    );
    expect(masked.secrets).toEqual({ encryption_key: '[redacted]', old_encryption_keys: ['[redacted]'] });
    expect(JSON.stringify(masked)).not.toContain(KEY.toString('base64'));
    expect(maskConfig(config()).secrets.encryption_key).toBe('');
  });
});

describe('the embedded default: a key file under data_dir', () => {
  it('is created once (mode 0600, logged without the key) and read back on the next start', async () => {
    const dataDir = join(tempDir(), 'nested', '.acw');
    const first = captureLogs();
    const box = await loadSecretBox(config({ dataDir }), first.log);
    const file = join(dataDir, KEY_FILE);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const stored = readFileSync(file, 'utf8');
    expect(stored).toMatch(/^[A-Za-z0-9+/]{43}=\n$/);
    expect(box?.keyId).toBe(keyIdOf(Buffer.from(stored.trim(), 'base64')));
    expect(first.events('secrets.key_created')).toEqual([
      expect.objectContaining({
        path: file,
        key_id: box?.keyId,
        msg: `created the encryption key for endpoint secrets: back up ${file} with the database, or set secrets.encryption_key`,
      }),
    ]);
    expect(first.raw()).not.toContain(stored.trim());

    const second = captureLogs();
    const again = await loadSecretBox(config({ dataDir }), second.log);
    expect(again?.keyId).toBe(box?.keyId);
    expect(again?.decrypt(box!.encrypt('s3cr3t'))).toBe('s3cr3t');
    expect(second.lines).toEqual([]);
    expect(readdirSync(dataDir)).toEqual([KEY_FILE]);
  });

  it('concurrent starts all end with the same key, created by exactly one of them', async () => {
    const dataDir = tempDir();
    const logs = captureLogs();
    const keys = await Promise.all(Array.from({ length: 12 }, () => readOrCreateKeyFile(join(dataDir, KEY_FILE), logs.log)));
    expect(new Set(keys.map((k) => k.toString('hex'))).size).toBe(1);
    expect(keys[0]!.equals(Buffer.from(readFileSync(join(dataDir, KEY_FILE), 'utf8').trim(), 'base64'))).toBe(true);
    expect(logs.events('secrets.key_created')).toHaveLength(1);
    // No temporary file left behind by the ones that lost.
    expect(readdirSync(dataDir)).toEqual([KEY_FILE]);
  });

  it('a key file that is not a key stops the start, naming the file and never quoting it', async () => {
    const dataDir = tempDir();
    writeFileSync(join(dataDir, KEY_FILE), 'not-a-key-at-all\n', { mode: 0o600 });
    const err = await loadSecretBox(config({ dataDir })).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(new RegExp(`^${join(dataDir, KEY_FILE)}: expected base64 of exactly 32 bytes`));
    expect(err?.message).toContain(
      'It holds the key of the stored endpoint secrets: restore it from a backup, or set secrets.encryption_key to the key they were encrypted with',
    );
    expect(err?.message).not.toContain('not-a-key-at-all');
  });

  it('a key file that cannot be read stops the start, naming the file and the error, and creates nothing', async () => {
    const dataDir = tempDir();
    // A directory where the key file belongs: EISDIR on read.
    mkdirSync(join(dataDir, KEY_FILE));
    const err = await loadSecretBox(config({ dataDir })).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toBe(
      `${join(dataDir, KEY_FILE)}: cannot read or create the encryption key (EISDIR); check database.data_dir or set secrets.encryption_key`,
    );
    expect((err?.cause as NodeJS.ErrnoException | undefined)?.code).toBe('EISDIR');
    expect(readdirSync(dataDir)).toEqual([KEY_FILE]);
  });

  it('warns when the key file is readable by others', async () => {
    const dataDir = tempDir();
    writeFileSync(join(dataDir, KEY_FILE), `${KEY.toString('base64')}\n`);
    chmodSync(join(dataDir, KEY_FILE), 0o644);
    const logs = captureLogs();
    expect((await loadSecretBox(config({ dataDir }), logs.log))?.keyId).toBe(keyIdOf(KEY));
    const file = join(dataDir, KEY_FILE);
    expect(logs.events('secrets.key_file_mode')).toEqual([
      expect.objectContaining({ path: file, mode: '644', msg: `${file} is readable by others: chmod 600 it` }),
    ]);
    // Without a logger it is read all the same.
    expect(await readOrCreateKeyFile(file)).toEqual(KEY);
  });

  it('a configured key wins, and the key file left from before still decrypts', async () => {
    const dataDir = tempDir();
    const fromFile = await loadSecretBox(config({ dataDir }));
    const stored = fromFile!.encrypt('s3cr3t');
    const box = await loadSecretBox(config({ dataDir, secrets: { encryption_key: KEY.toString('base64') } }));
    expect(box?.keyId).toBe(keyIdOf(KEY));
    expect(box?.decrypt(stored)).toBe('s3cr3t');
    expect(box?.needsRotation(stored)).toBe(true);
  });

  it('is never created for an external database', async () => {
    const dataDir = tempDir();
    expect(await loadSecretBox(config({ dataDir, url: EXTERNAL }))).toBeNull();
    expect(readdirSync(dataDir)).toEqual([]);
  });
});
