/**
 * Files that ship with the package (package.json, fixtures/), found from src/cli and from
 * dist/src/cli alike.
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The absolute path of `relative` (from the package root), or undefined if this install lacks it. */
export function packageFile(relative: string): string | undefined {
  for (const up of ['../../', '../../../']) {
    const path = fileURLToPath(new URL(`${up}${relative}`, import.meta.url));
    if (existsSync(path)) return path;
  }
  return undefined;
}

/** The version in package.json. */
export function packageVersion(): string {
  const path = packageFile('package.json');
  return path ? String((JSON.parse(readFileSync(path, 'utf8')) as { version?: unknown }).version) : 'unknown';
}
