/**
 * A commit as one round trip (issue 36 item 7). A batch's statements are gathered, their values
 * written into them as SQL literals, and the lot is sent as one simple-protocol query: PostgreSQL
 * runs a query of several statements as one implicit transaction, so it commits all of them or
 * none, and the client waits for one answer instead of one per statement (BEGIN, the fence, each
 * table, COMMIT: 5 to 8 round trips before).
 *
 * Values are written as the untyped literals the extended protocol would have sent as parameters
 * (pg sends every parameter as text of unknown type), so each statement means what it meant with
 * `$n` placeholders. A statement that must touch one row (the fence, a new run, an updated run)
 * raises through `troupe_require` (PostgreSQL migration 15) when it does not, which aborts the
 * whole batch: nothing after it is applied and nothing before it is kept.
 *
 * The statements with values go as EXECUTEs of statements prepared on the connection (`on`): the
 * same one-query batch, without parsing and planning each statement again. On the local server a
 * commit's p50 went from 1.22 to 0.84 ms (three alternating runs of 1,100 commits each; in the
 * bench 1.31-1.68 to 0.78-0.88); its p99 (4-6 ms) is the disk's. A connection that turns out not to
 * hold them switches its store to plain text (lease.ts).
 * @module
 */
import { TroupeError } from '../../errors.js';

/** The SQLSTATE `troupe_require` raises (migration 15): its message is one of `RequiredCode`. */
export const REQUIRE_SQLSTATE = 'TRP01';

/** What a batch statement may require, and the error its failure becomes. */
type RequiredCode = 'LEASE_LOST' | 'CONFIG_INVALID' | 'RUN_NOT_FOUND';
const REQUIRED_CODES: ReadonlySet<string> = new Set<RequiredCode>(['LEASE_LOST', 'CONFIG_INVALID', 'RUN_NOT_FOUND']);

/** An array element as pg writes it in an array literal (quoted, `\` and `"` escaped). */
const element = (value: unknown): string => (value === null || value === undefined ? 'NULL' : `"${text(value).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`);

/** A parameter's text, as pg's prepareValue makes it (arrays as array literals, objects as JSON). */
function text(value: unknown): string {
  if (Array.isArray(value)) return `{${value.map(element).join(',')}}`;
  switch (typeof value) {
    case 'string':
      return value;
    case 'number':
    case 'bigint':
    case 'boolean':
      return String(value);
    case 'object':
      return JSON.stringify(value);
    default:
      throw new TypeError(`a commit cannot write a ${typeof value} as an SQL value`);
  }
}

/**
 * `s` quoted as pg's `escapeLiteral` quotes it: `'` doubled; with a backslash, every backslash
 * doubled and the literal written ` E'…'`. pg's walks the string a character at a time: with it a
 * batch's text took 70-92 µs, with this 49-51 (one agent's 6,000 commits of 1.4-3.3 KB, three
 * alternating runs). A unit property holds the two equal on any string.
 */
export function quoteLiteral(s: string): string {
  const quoted = s.replace(/'/g, "''");
  return s.includes('\\') ? ` E'${quoted.replace(/\\/g, '\\\\')}'` : `'${quoted}'`;
}

/** `value` as an SQL literal: NULL, or its text quoted (untyped, as a bound parameter is). */
const sqlLiteral = (value: unknown): string => (value === null || value === undefined ? 'NULL' : quoteLiteral(text(value)));

/** `sql` with each `$n` replaced by `values[n-1]` as a literal (one pass: a value's own text is never read as a placeholder). */
export function inline(sql: string, values: readonly unknown[]): string {
  return sql.replace(/\$(\d+)/g, (_, n: string) => {
    const i = Number(n) - 1;
    if (i < 0 || i >= values.length) throw new RangeError(`statement refers to $${n} but has ${values.length} values`);
    return sqlLiteral(values[i]);
  });
}

/** A statement of a batch: its text with `$n` placeholders and their values (none: sent as it is). */
interface Statement {
  sql: string;
  values?: readonly unknown[];
}

/** This process's name for each statement it prepares (a few dozen texts: the ops' statements). */
const names = new Map<string, string>();
/** The names each connection has prepared (a connection that fails is destroyed, and its set with it). */
const preparedOn = new WeakMap<object, Set<string>>();

/**
 * SQLSTATEs of a connection whose prepared statements are not what this process recorded: one does
 * not exist (26000) or already does (42P05). A pooler between (PgBouncer in transaction mode) hands
 * each transaction another server connection; the store then sends plain statements (lease.ts).
 */
const PREPARED_STATES: ReadonlySet<string> = new Set(['26000', '42P05']);
export const preparedStatementsLost = (err: unknown): boolean => PREPARED_STATES.has(String((err as { code?: unknown } | null)?.code));

/** The statements of one commit, in order, sent together by `text()`. */
export class StatementBatch {
  private readonly statements: Statement[] = [];

  /** Add a statement, its `$n` placeholders filled from `values`. */
  add(sql: string, values?: readonly unknown[]): void {
    this.statements.push(values ? { sql, values } : { sql });
  }

  /**
   * Add `dml` (an INSERT, UPDATE or DELETE without RETURNING) and require it to touch exactly one
   * row: else the batch fails with `code` and `message` (see `requiredFailure`).
   */
  require(dml: string, values: readonly unknown[], code: RequiredCode, message: string): void {
    const n = values.length;
    this.statements.push({
      sql: `WITH touched AS (${dml} RETURNING 1) SELECT troupe_require(count(*) = 1, $${n + 1}, $${n + 2}) FROM touched`,
      values: [...values, code, message],
    });
  }

  get length(): number {
    return this.statements.length;
  }

  /** One query text: the statements in order, values written in (a simple-protocol query runs them as one transaction). */
  text(): string {
    return this.statements.map((s) => (s.values ? inline(s.sql, s.values) : s.sql)).join(';\n');
  }

  /**
   * The batch as one query on `connection`: each statement with values as an EXECUTE of a statement
   * prepared on that connection, the PREPAREs it lacks first, in the same text (one round trip still).
   * `prepared()` records the PREPAREs as done: call it once the text ran past them (it committed, or
   * a statement after them raised). A rollback does not undo a PREPARE.
   */
  on(connection: object): { text: string; prepared: () => void } {
    const known = preparedOn.get(connection) ?? new Set<string>();
    const prepare = new Map<string, string>();
    const body = this.statements.map(({ sql, values }) => {
      if (!values) return sql;
      let name = names.get(sql);
      if (name === undefined) names.set(sql, (name = `troupe_${names.size + 1}`));
      if (!known.has(name)) prepare.set(name, `PREPARE ${name} AS ${sql}`);
      return values.length === 0 ? `EXECUTE ${name}` : `EXECUTE ${name}(${values.map(sqlLiteral).join(', ')})`;
    });
    return {
      text: [...prepare.values(), ...body].join(';\n'),
      prepared: () => {
        for (const name of prepare.keys()) known.add(name);
        preparedOn.set(connection, known);
      },
    };
  }
}

/** The error a batch failed with through `troupe_require`, or null for any other failure. */
export function requiredFailure(err: unknown): TroupeError | null {
  const e = err as { code?: unknown; message?: unknown; detail?: unknown } | null;
  if (e?.code !== REQUIRE_SQLSTATE || typeof e.message !== 'string' || !REQUIRED_CODES.has(e.message)) return null;
  return new TroupeError(e.message as RequiredCode, typeof e.detail === 'string' ? e.detail : e.message);
}
