/**
 * The README's generated blocks (lifecycle diagram, the commands, the exit codes and the error
 * codes) and fixtures/troupe.config.schema.json are what the code says now; `npm run docs`
 * regenerates them after a change. The README stays a front door (at most 16,000 bytes): the
 * reference is `troupe help <topic>` (src/cli/reference.ts), which its Reference section names.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HELP_TOPICS } from '../../src/cli/commandHelp.js';
import { README, regenerate, SCHEMA_FILE, schemaFile, writeDocs } from '../docs/generated.js';

/** The README's size limit in bytes: a guide that links to the reference, not the reference itself. */
const README_MAX_BYTES = 16_000;

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

  it(`README.md is a front door: at most ${README_MAX_BYTES.toLocaleString('en-US')} bytes, its Reference naming every troupe help topic`, () => {
    const readme = readFileSync(README);
    expect(readme.byteLength, 'README.md grew past 16,000 bytes: put reference material in troupe help <topic>, TSDoc or --help').toBeLessThanOrEqual(
      README_MAX_BYTES,
    );
    const reference = readme.toString('utf8').split(/^## Reference$/m)[1] ?? '';
    for (const topic of Object.keys(HELP_TOPICS)) expect(reference, topic).toContain(`\`${topic}\``);
  });

  it('fixtures/troupe.config.schema.json is CONFIG_SCHEMA (run npm run docs)', () => {
    expect(readFileSync(SCHEMA_FILE, 'utf8')).toBe(schemaFile());
  });
});
