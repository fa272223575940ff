/**
 * defineTool types a tool's arguments from its JSON Schema (compile-time checks: `npx tsc` fails
 * if an expectation here is wrong; `@ts-expect-error` lines fail if the type lets a mistake through).
 */
import { describe, expect, it } from 'vitest';
import { defineTool } from '../../../src/tools/defineTool.js';
import type { FromSchema } from '../../../src/tools/fromSchema.js';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const assertType = <T extends true>(value: T) => value;

describe('FromSchema', () => {
  it('objects with required and optional properties, arrays, enums, unions', () => {
    const _schema = {
      type: 'object',
      properties: {
        q: { type: 'string' },
        limit: { type: 'integer' },
        tags: { type: 'array', items: { type: 'string' } },
        mode: { enum: ['fast', 'deep'] },
        when: { anyOf: [{ type: 'string' }, { type: 'null' }] },
      },
      required: ['q', 'mode'],
    } as const;
    assertType<Equal<FromSchema<typeof _schema>, { q: string; mode: 'fast' | 'deep'; limit?: number; tags?: string[]; when?: string | null }>>(true);
    assertType<Equal<FromSchema<{ type: 'object' }>, Record<string, unknown>>>(true);
    assertType<Equal<FromSchema<{ description: 'anything' }>, unknown>>(true);
  });

  it('defineTool infers execute’s arguments from an inline schema (no as const)', async () => {
    const search = defineTool({
      name: 'search',
      description: 'Search the docs',
      parameters: { type: 'object', properties: { q: { type: 'string' }, max: { type: 'number' } }, required: ['q'] },
      execute: ({ q, max }) => {
        assertType<Equal<typeof q, string>>(true);
        assertType<Equal<typeof max, number | undefined>>(true);
        // @ts-expect-error q is a string, not a number
        const wrong: number = q;
        return { hits: [q.toUpperCase()], wrong, max: max ?? null };
      },
    });
    expect(await search.execute({ q: 'x' }, {} as never)).toEqual({ hits: ['X'], wrong: 'x', max: null });
    // An explicit type still works.
    const typed = defineTool<{ text: string }>({ name: 'echo', description: 'Echo', parameters: { type: 'object' }, execute: ({ text }) => text });
    expect(typed.execute({ text: 'hi' }, {} as never)).toBe('hi');
  });
});
