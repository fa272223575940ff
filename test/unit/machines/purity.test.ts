import { readdirSync, readFileSync } from 'node:fs';
import { expect, it } from 'vitest';

// machines/ must stay pure: it may import only xstate and its own files (no I/O, nothing from src/).
it('machines/ imports only xstate and relative files', () => {
  const dir = new URL('../../../machines/', import.meta.url);
  const files = readdirSync(dir).filter((f) => f.endsWith('.ts'));
  expect(files.length).toBeGreaterThan(3);
  for (const file of files) {
    const source = readFileSync(new URL(file, dir), 'utf8');
    for (const [, spec] of source.matchAll(/from ['"]([^'"]+)['"]/g)) {
      expect(spec === 'xstate' || spec!.startsWith('./'), `${file} imports ${spec}`).toBe(true);
    }
  }
});
