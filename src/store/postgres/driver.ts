/**
 * The `pg` driver, loaded at its first use (a store opened, a batch written) rather than with the
 * package: its ~40 CommonJS files cost a process ~70 ms, which `import 'troupe'` and every CLI
 * command on SQLite paid for nothing.
 * @module
 */
import type pg from 'pg';
import { loadedWhenUsed } from '../../whenUsed.js';

export const pgDriver = loadedWhenUsed<typeof pg>('pg');
