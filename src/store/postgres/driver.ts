/**
 * The `pg` driver, loaded at its first use (a store opened, a batch written) rather than with the
 * package: its ~40 CommonJS files cost a process ~70 ms, which `import 'troupe'` and every CLI
 * command on SQLite paid for nothing.
 * @module
 */
import { createRequire } from 'node:module';
import type pg from 'pg';

let driver: typeof pg | undefined;

export const pgDriver = (): typeof pg => (driver ??= createRequire(import.meta.url)('pg') as typeof pg);
