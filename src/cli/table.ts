/**
 * Output for people at a terminal (README.md#operator-cli): aligned tables and short lines. Only
 * when stdout is a terminal and `--json` is not given; a pipe or `--json` gets the JSON lines
 * scripts read, unchanged. No colour and no dependency: padding, and lines cut to the terminal's
 * width so a long URL or error never wraps a row onto the next.
 */
import { writeLine, type CliIo } from './io.js';

/** `--json` on the commands that print for people. */
export interface JsonOption {
  json?: boolean;
}

/** True when this run prints for a person: stdout is a terminal and `--json` was not given. */
export function forPeople(io: CliIo, o: JsonOption): boolean {
  return io.isTTY === true && o.json !== true;
}

/** A cell: text, or nothing (shown as `-`). */
export type Cell = string | number | boolean | null | undefined;

/** Column-aligned lines, a header first; the last column is not padded. */
export function formatTable(headers: readonly string[], rows: readonly (readonly Cell[])[], width?: number): string[] {
  const text = [headers, ...rows.map((r) => r.map(cellText))];
  const widths = headers.map((_, i) => Math.max(...text.map((r) => (r[i] ?? '').length)));
  return text.map((r) => cut(r.map((c, i) => (i === r.length - 1 ? c : (c ?? '').padEnd(widths[i]!))).join('  '), width));
}

/** Print a table, or `empty` alone when there are no rows; false once stdout is closed. */
export function printTable(io: CliIo, headers: readonly string[], rows: readonly (readonly Cell[])[], empty: string): boolean {
  if (rows.length === 0) return writeLine(io, empty);
  for (const line of formatTable(headers, rows, io.columns)) if (!writeLine(io, line)) return false;
  return true;
}

/** A line cut to the terminal's width, marked with `…` where it was cut. */
export function cut(line: string, width: number | undefined): string {
  const fits = width === undefined || width < 20 || line.length <= width;
  return fits ? line.trimEnd() : `${line.slice(0, width - 1)}…`;
}

/** An ISO time as `2026-12-02 08:46:41Z` (UTC, to the second); `-` for none. */
export function shortTime(iso: unknown): string {
  if (typeof iso !== 'string' || iso === '') return '-';
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}Z`;
}

/** How long ago an ISO time was, coarsely: `4s`, `3m`, `2h`, `5d`. */
export function age(iso: unknown, nowMs = Date.now()): string {
  if (typeof iso !== 'string') return '-';
  const s = Math.max(0, Math.round((nowMs - Date.parse(iso)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
}

function cellText(c: Cell): string {
  if (c === null || c === undefined || c === '') return '-';
  if (typeof c === 'boolean') return c ? 'yes' : 'no';
  // One line per row: a newline in an error message would break the alignment.
  return String(c).replace(/\s+/g, ' ');
}
