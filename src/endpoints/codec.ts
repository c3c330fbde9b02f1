import type { SecretBox } from '../crypto/secret-box.js';

/**
 * Seals and opens what a stored endpoint keeps secret at rest (src/crypto): its signing secrets and
 * its header values (docs/operations.md#secrets-at-rest). The store never sees a key. The context
 * is authenticated with the value, so a sealed value copied to another row, swapped with the row's
 * other secret, or moved to another header, fails to open.
 */
export interface SecretCodec {
  seal(plain: string, context: string): string;
  open(sealed: string, context: string): string;
}

/** What a stored secret is bound to. */
export function secretContext(name: string, which: 'secret' | 'secret_next'): string {
  return `endpoint:${name}:${which}`;
}

/** What a stored header value is bound to: the endpoint, and the header's name (case does not matter in HTTP). */
export function headerContext(name: string, header: string): string {
  return `endpoint:${name}:header:${header.toLowerCase()}`;
}

/** The secret box (src/crypto) as the store uses it. */
export function codecOf(box: SecretBox | null): SecretCodec | null {
  return box ? { seal: (p, ctx) => box.encrypt(p, ctx), open: (s, ctx) => box.decrypt(s, ctx) } : null;
}

/** Every value of `headers` sealed for endpoint `name`; the names stay readable (audit rows and views show them). */
export function sealHeaders(codec: SecretCodec, name: string, headers: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, codec.seal(v, headerContext(name, k))]));
}

/** The plain values of sealed `headers`; throws (a SecretBoxError) when one does not open for its endpoint and name. */
export function openHeaders(codec: SecretCodec, name: string, headers: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, codec.open(v, headerContext(name, k))]));
}
