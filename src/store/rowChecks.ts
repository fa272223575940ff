/**
 * The vocabulary the row decoders are written in: small `Check` predicates, combinators over them
 * (`nullable`, `optional`, `oneOf`, `arrayOf`, `shape`), and the two ways a decoder rejects a row
 * (`expect` for fields, `parseJson` for a JSON column). Every rejection is `STORE_CORRUPT` built by
 * `corrupt`, naming the table, the row and the field — never a SyntaxError or a TypeError.
 * @module
 */
import { TroupeError } from '../errors.js';

/** The error for a row that failed its checks. */
export function corrupt(table: string, row: string | number, why: string): TroupeError {
  return new TroupeError('STORE_CORRUPT', `${table} row ${JSON.stringify(String(row))} is damaged: ${why}`);
}

export type Check = (value: unknown) => boolean;

export const isString: Check = (v) => typeof v === 'string';
export const isBoolean: Check = (v) => typeof v === 'boolean';
export const isNumber: Check = (v) => typeof v === 'number' && Number.isFinite(v);
export const isCount: Check = (v) => Number.isSafeInteger(v) && (v as number) >= 0;
export const isFlag: Check = (v) => v === 0 || v === 1;
export const nullable =
  (check: Check): Check =>
  (v) =>
    v === null || check(v);
export const optional =
  (check: Check): Check =>
  (v) =>
    v === undefined || check(v);
export const oneOf =
  (...values: readonly unknown[]): Check =>
  (v) =>
    values.includes(v);
export const arrayOf =
  (check: Check): Check =>
  (v) =>
    Array.isArray(v) && v.every(check);
export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
export const shape =
  (spec: Record<string, Check>): Check =>
  (v) =>
    isRecord(v) && badField(v, spec) === null;

/** The first field of `value` that fails its check, or null. */
function badField(value: Record<string, unknown>, spec: Record<string, Check>): string | null {
  // for-in, not Object.entries: no array per row (resume decodes every agent row twice; entries
  // made badField 12 % of a 10,000-agent resume's profile).
  for (const key in spec) if (!spec[key]!(value[key])) return key;
  return null;
}

/** Throw unless every listed field passes. `what` names the column (or JSON value) checked. */
export function expect(table: string, id: string | number, what: string, value: unknown, spec: Record<string, Check>): void {
  if (!isRecord(value)) throw corrupt(table, id, `${what} is not an object`);
  const bad = badField(value, spec);
  if (bad !== null) throw corrupt(table, id, `${what === 'row' ? '' : `${what}.`}${bad} is ${describe(value[bad])}`);
}

const describe = (v: unknown) => (v === undefined ? 'missing' : `invalid (${typeof v === 'string' ? JSON.stringify(v.slice(0, 40)) : String(v).slice(0, 40)})`);

/** JSON.parse that names the row instead of throwing a SyntaxError. */
export function parseJson(table: string, id: string | number, column: string, text: unknown): unknown {
  if (typeof text !== 'string') throw corrupt(table, id, `${column} is not text`);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw corrupt(table, id, `${column} is not valid JSON (${(err as Error).message})`);
  }
}
