/**
 * Where the key of the SecretBox comes from (docs/operations.md#secrets-at-rest):
 * 1. `secrets.encryption_key` (by default `${ACW_ENCRYPTION_KEY}`), with `secrets.old_encryption_keys`;
 * 2. else, on the embedded database (no `database.url`), `<data_dir>/encryption.key`, created on
 *    first start (mode 0600) and read back on later ones;
 * 3. else none: the routes that write endpoint secrets answer `encryptionKeyMissing()`.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { link, mkdir, open, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../config/index.js';
import { ApiError } from '../errors.js';
import type { Logger } from '../log.js';
import { KEY_BYTES, keyIdOf, parseKey, SecretBox } from './secret-box.js';

/** The config key an operator sets; named by every refusal. */
export const ENCRYPTION_KEY = 'secrets.encryption_key';
/** The key file of the embedded default, under `database.data_dir`. */
export const KEY_FILE = 'encryption.key';

/** `503 encryption_key_missing`: what a route that writes endpoint secrets answers when `loadSecretBox` found no key. */
export function encryptionKeyMissing(): ApiError {
  return new ApiError(
    503,
    'encryption_key_missing',
    `${ENCRYPTION_KEY} is not set: endpoint secrets cannot be stored without it. Set it (or ACW_ENCRYPTION_KEY) to ` +
      'base64 of 32 random bytes (openssl rand -base64 32) in every process; config endpoints work without it',
    { key: ENCRYPTION_KEY },
  );
}

/**
 * The SecretBox this process uses, or null when there is no key (an external database and no
 * `secrets.encryption_key`). Throws, naming the file, when the data_dir key file is unreadable or
 * not a key (the configured keys were already checked by the config schema).
 */
export async function loadSecretBox(config: Config, log?: Logger): Promise<SecretBox | null> {
  const old = config.secrets.old_encryption_keys.map((text) => configKey(text));
  const embedded = config.database.url === '';
  const file = join(config.database.data_dir, KEY_FILE);
  if (config.secrets.encryption_key !== '') {
    // A key file left from before a key was configured still decrypts what was stored under it.
    const fromFile = embedded ? await readKeyFile(file, log) : null;
    return new SecretBox(configKey(config.secrets.encryption_key), fromFile ? [...old, fromFile] : old);
  }
  if (!embedded) return null;
  return new SecretBox(await readOrCreateKeyFile(file, log), old);
}

function configKey(text: string): Buffer {
  const key = parseKey(text);
  // The schema refuses bad keys at start; this guards callers that build a Config by hand.
  if (typeof key === 'string') throw new Error(`${ENCRYPTION_KEY}: ${key}`);
  return key;
}

/**
 * `<data_dir>/encryption.key`, created when missing. Two processes starting at once end with the
 * same key: each writes a complete file of its own (0600, flushed) and hard-links it into place,
 * which fails for all but one (EEXIST); the others read the winner's. No reader ever sees a
 * half-written key.
 */
export async function readOrCreateKeyFile(file: string, log?: Logger): Promise<Buffer> {
  const existing = await readKeyFile(file, log);
  if (existing !== null) return existing;
  const dir = join(file, '..');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const key = randomBytes(KEY_BYTES);
  const tmp = `${file}.${process.pid}.${randomUUID()}.tmp`;
  const handle = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    await handle.writeFile(`${key.toString('base64')}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw keyFileError(file, err);
    const winner = await readKeyFile(file, log);
    if (winner === null) throw keyFileError(file, err); // removed again at once: not ours to guess
    return winner;
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
  await syncDir(dir);
  log?.info(
    { event: 'secrets.key_created', path: file, key_id: keyIdOf(key) },
    `created the encryption key for endpoint secrets: back up ${file} with the database, or set ${ENCRYPTION_KEY}`,
  );
  return key;
}

/** The key in `file`, or null when there is none; throws naming the file when it cannot be used. */
async function readKeyFile(file: string, log?: Logger): Promise<Buffer | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw keyFileError(file, err);
  }
  const key = parseKey(text);
  if (typeof key === 'string') {
    throw new Error(
      `${file}: ${key}. It holds the key of the stored endpoint secrets: restore it from a backup, ` +
        `or set ${ENCRYPTION_KEY} to the key they were encrypted with`,
    );
  }
  const mode = (await stat(file)).mode & 0o777;
  if ((mode & 0o077) !== 0) {
    log?.warn({ event: 'secrets.key_file_mode', path: file, mode: mode.toString(8) }, `${file} is readable by others: chmod 600 it`);
  }
  return key;
}

function keyFileError(file: string, err: unknown): Error {
  const code = (err as NodeJS.ErrnoException).code ?? String(err);
  return new Error(`${file}: cannot read or create the encryption key (${code}); check database.data_dir or set ${ENCRYPTION_KEY}`, {
    cause: err,
  });
}

/** Makes the new directory entry durable: a crash right after start must not lose the key it announced. */
async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r').catch(() => null);
  if (handle === null) return;
  await handle.sync().catch(() => undefined); // not every filesystem lets a directory be synced
  await handle.close();
}
