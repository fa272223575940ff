/**
 * A CommonJS dependency loaded at its first use instead of with the module that names it: for a
 * package a process may never call — `pg` on SQLite, `@opentelemetry/api` with no SDK, ajv with no
 * schema — whose loading cost every process tens of milliseconds (measured in each user's comment).
 * @module
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** `loadedWhenUsed<typeof import('pg')>('pg')`: the package's exports, required at the first call. */
export function loadedWhenUsed<T>(id: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= require(id) as T);
}
