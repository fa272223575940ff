/**
 * The README's generated blocks (lifecycle diagram, CLI commands and flags, exit codes, options,
 * config keys, error codes) and fixtures/troupe.config.schema.json are what the code says now.
 * `npm run docs` regenerates them after a change.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { README, regenerate, SCHEMA_FILE, schemaFile, writeDocs } from '../docs/generated.js';

describe('docs generated from code', () => {
  if (process.env.UPDATE_DOCS) writeDocs();

  it('every generated block of the README matches the code (run npm run docs)', () => {
    const readme = readFileSync(README, 'utf8');
    expect(regenerate(readme) === readme, 'README.md drifted from the code: run npm run docs').toBe(true);
  });

  it('every #link of the README (the contents) leads to a heading', () => {
    const readme = readFileSync(README, 'utf8');
    // GitHub's anchors: lower case, punctuation dropped, spaces to dashes.
    const slug = (heading: string) =>
      heading
        .toLowerCase()
        .replace(/[^\p{L}\p{N} -]/gu, '')
        .replace(/ /g, '-');
    const anchors = new Set([...readme.matchAll(/^#{1,4} (.*)$/gm)].map((m) => slug(m[1]!)));
    const links = [...readme.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]!);
    expect(links.length).toBeGreaterThan(10);
    expect(links.filter((l) => !anchors.has(l))).toEqual([]);
  });

  it('fixtures/troupe.config.schema.json is CONFIG_SCHEMA (run npm run docs)', () => {
    expect(readFileSync(SCHEMA_FILE, 'utf8')).toBe(schemaFile());
  });
});
