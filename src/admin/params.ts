import { z } from 'zod';
import type { Endpoint } from '../config/index.js';
import { ApiError, badField } from '../errors.js';

/**
 * Checks of operator-supplied values, done before any SQL so a bad value is a 400 naming the field
 * and never a database error.
 */
const UUID = z.uuid();

/** The same test as the HTTP API's schemas, so a CLI argument and a route parameter agree. */
export function isUuid(s: unknown): s is string {
  return UUID.safeParse(s).success;
}

export function requireUuid(value: unknown, field: string): string {
  if (!isUuid(value)) throw badField(field, 'expected a UUID like "0b7e4c1a-3f2d-4b8e-9a6c-5d4e3f2a1b0c"');
  return value.toLowerCase();
}

const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/** Printable text: no control characters (PostgreSQL refuses NUL) and no lone surrogates. */
export function isPrintable(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return false;
  }
  return !LONE_SURROGATE.test(s);
}

export function requireText(value: unknown, field: string, max = 200): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max || !isPrintable(value)) {
    throw badField(field, `expected 1-${max} printable characters`);
  }
  return value;
}

export function requireLimit(value: unknown, field: string, dflt: number, max: number): number {
  if (value === undefined) return dflt;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw badField(field, `expected an integer from 1 to ${max}`);
  }
  return value;
}

/** A positive bigint id (audit row, inbox message) that fits PostgreSQL's bigint and JS numbers exactly. */
export function requireId(value: unknown, field: string): number {
  const n = typeof value === 'string' && /^\d{1,15}$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) throw badField(field, 'expected a non-negative integer id');
  return n;
}

export const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/**
 * Opaque keyset cursors: base64url of `parts` joined by `|`. Decoding checks the shape, so a
 * tampered cursor is a 400 naming `cursor`.
 */
export function encodeCursor(parts: readonly string[]): string {
  return Buffer.from(parts.join('|'), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: unknown, shape: readonly RegExp[], field = 'cursor'): string[] {
  const bad = () => badField(field, 'not a cursor this service issued (pass next_cursor back unchanged)');
  if (typeof cursor !== 'string' || cursor.length === 0 || cursor.length > 200 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad();
  const parts = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  if (parts.length !== shape.length || !parts.every((p, i) => shape[i]!.test(p))) throw bad();
  return parts;
}

/** The configured endpoint of that name, or the 404 naming `name` (before anything is written). */
export function requireEndpoint(endpoints: readonly Endpoint[], name: string): Endpoint {
  const ep = endpoints.find((e) => e.name === name);
  if (!ep) throw new ApiError(404, 'not_found', `name: no endpoint named ${JSON.stringify(name.slice(0, 100))}`, { field: 'name' });
  return ep;
}
