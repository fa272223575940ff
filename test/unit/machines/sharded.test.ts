import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { emptySharded, getSharded, setSharded, shardedById, shardedValues, type Sharded } from '../../../machines/sharded.js';

describe('sharded records', () => {
  it('behaves as an immutable map: every version keeps what it held, and bulk building equals setting one by one', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.oneof(fc.string({ minLength: 1, maxLength: 12 }), fc.constantFrom('__proto__', 'toString', 'constructor')), fc.integer()), {
          maxLength: 300,
        }),
        (writes) => {
          const model = new Map<string, number>();
          const versions: [Sharded<number>, Map<string, number>][] = [];
          let map = emptySharded<number>();
          for (const [id, value] of writes) {
            versions.push([map, new Map(model)]);
            map = setSharded(map, id, value);
            model.set(id, value);
          }
          for (const [id, value] of model) expect(getSharded(map, id)).toBe(value);
          for (const absent of ['\u0000absent', '__proto__', 'toString', 'constructor'])
            if (!model.has(absent)) expect(getSharded(map, absent)).toBeUndefined();
          expect(new Set(shardedValues(map))).toEqual(new Set(model.values()));
          expect([...shardedValues(map)]).toHaveLength(model.size);
          // An update never changes an earlier version (XState keeps old snapshots).
          for (const [old, held] of versions) {
            expect([...shardedValues(old)]).toHaveLength(held.size);
            for (const [id, value] of held) expect(getSharded(old, id)).toBe(value);
          }
          const bulk = shardedById([...model].map(([id, value]) => ({ id, value })));
          for (const [id, value] of model) expect(getSharded(bulk, id)?.value).toBe(value);
          expect([...shardedValues(bulk)]).toHaveLength(model.size);
          // JSON-safe: the inspector serialises the coordinator's context.
          expect(JSON.parse(JSON.stringify(bulk))).toEqual(bulk);
        },
      ),
      { numRuns: 200 },
    );
  });
});
