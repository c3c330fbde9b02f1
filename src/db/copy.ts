import pg from 'pg';

/**
 * `COPY table (columns) FROM STDIN` for rows the caller has already written as text, answering how
 * many rows it wrote. `sql` may go on with statements of its own, without parameters: one simple
 * query runs them after the COPY, as psql does. PostgreSQL spends about half the CPU per row of an
 * `INSERT ... SELECT` from a JSON document on 1,000 rows, and a fifth less on 100
 * (bench/README.md#copy). Below COPY_MIN_ROWS the prepared statement is cheaper: a COPY is a
 * statement parsed and planned each time.
 *
 * Rows are in COPY's text format: fields separated by tabs, each line ending in a newline, fields
 * escaped by copyField. The text goes to the server in CopyData messages right behind the
 * statement, then CopyDone: all of it is in memory already, so there is no stream and no
 * back-pressure to wait on. Should a row fail (a unique violation, a check), the server answers an
 * error, drops the rest of the data, and the promise rejects; the connection stays usable, its
 * transaction aborted, as after any failed statement. Queued behind the client's other queries like
 * any of them. Not for a client in pg's pipeline mode, which refuses query objects of its own kind
 * (the service's pool does not use it).
 */
export function copyRows(client: pg.ClientBase, sql: string, rows: string): Promise<number> {
  return new Promise<number>((resolve, reject) => client.query(new CopyIn(sql, rows, resolve, reject)));
}

/** Fewer rows than this go by the prepared statement instead (see copyRows). */
export const COPY_MIN_ROWS = 50;

/** A field in COPY's text format: backslash, tab, newline and carriage return escaped; null is `\N`. */
export function copyField(value: string | null | undefined): string {
  if (value === null || value === undefined) return '\\N';
  return SPECIAL.test(value) ? value.replace(SPECIAL_ALL, (c) => ESCAPES[c]!) : value;
}

/** A text[] field (PostgreSQL's array literal, each element quoted), ready for COPY's text format. */
export function copyTextArray(values: readonly string[]): string {
  if (values.length === 0) return '{}';
  return copyField(`{${values.map((v) => `"${v.replace(/["\\]/g, '\\$&')}"`).join(',')}}`);
}

/**
 * A timestamp with microseconds, as COPY reads it, from epoch milliseconds with the microseconds as
 * their fraction (what withTransaction's `readNow` gives): exactly the transaction's now().
 */
export function timestampField(ms: number): string {
  const us = Math.round(ms * 1000);
  const seconds = Math.floor(us / 1e6);
  return `${new Date(seconds * 1000).toISOString().slice(0, 19)}.${String(us - seconds * 1e6).padStart(6, '0')}Z`;
}

const SPECIAL = /[\\\t\n\r]/;
const SPECIAL_ALL = /[\\\t\n\r]/g;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/** CopyData messages of at most this many bytes: PostgreSQL takes any split, rows included. */
const CHUNK = 1 << 20;

/** What pg's connection does (lib/connection.js) that its type declarations leave out. */
interface CopyConnection {
  query(text: string): void;
  sendCopyFromChunk(chunk: Buffer): void;
  endCopyFrom(): void;
}

/**
 * The query object pg's client runs in its turn (a "submittable"): it sends the statement as a
 * simple query, and pg hands it the server's answers. After an error pg calls handleError and then
 * no handleReadyForQuery; a lost connection calls handleError too.
 */
class CopyIn implements pg.Submittable {
  private rows = 0;
  private settled = false;

  constructor(
    /** The statement, under the name pg's own queries give it (what a wrapper of `query` logs). */
    readonly text: string,
    private readonly data: string,
    private readonly resolve: (rows: number) => void,
    private readonly reject: (err: Error) => void,
  ) {}

  submit(connection: pg.Connection): void {
    const c = connection as unknown as CopyConnection;
    // The statement, its data and the end of the data in one write, without waiting for the
    // server's CopyInResponse: a round trip less per COPY. Should the statement fail before the
    // copy begins, PostgreSQL ignores the CopyData and CopyDone that follow (as pgx also relies on).
    connection.stream.cork();
    c.query(this.text);
    const bytes = Buffer.from(this.data, 'utf8');
    for (let at = 0; at < bytes.length; at += CHUNK) c.sendCopyFromChunk(bytes.subarray(at, at + CHUNK));
    c.endCopyFrom();
    connection.stream.uncork();
  }

  handleCopyInResponse(): void {}

  handleCommandComplete(msg: { text?: string }): void {
    const m = /^COPY (\d+)/.exec(msg.text ?? '');
    if (m) this.rows = Number(m[1]);
  }

  /**
   * pg's `query_timeout` wraps this to clear its timer (and calls it, then handleError, when the
   * timer fires first): called once, when the COPY is over either way.
   */
  callback(): void {}

  handleReadyForQuery(): void {
    if (this.settled) return;
    this.settled = true;
    this.callback();
    this.resolve(this.rows);
  }

  handleError(err: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.callback();
    this.reject(err);
  }

  // Answers a COPY FROM never gets; pg would call them on a statement that is not one.
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}
