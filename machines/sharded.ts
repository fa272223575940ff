/**
 * A record of many entries split into fixed shards, so that an immutable update copies the shard
 * index and one small shard instead of the whole record. JSON-safe (XState contexts are
 * serialised by the inspector): an array of branches, each an array of leaves, prototype-less
 * objects mapping ids to values.
 *
 * Why: spreading a plain object with 1,000 keys costs ~190 µs on this machine (V8 keeps large
 * objects in dictionary mode), which would make every registration and status change in the
 * coordinator O(n). The index is an array, not an object keyed `s0`…`s63`: that object was in
 * dictionary mode too, so every update copied a hash table (setSharded and getSharded were 6 % of
 * a 1,000-child fan-out in memory, measured); an array copies as a flat slice.
 *
 * Two levels (64 × 64 leaves), not 64 shards: at 10,000 agents a shard held ~156 records, and
 * copying it on every status change made setSharded and getSharded 2.3 % of the main thread's
 * CPU in the scale bench (CPU profile, K = 10,000, memory); at 100,000 agents a shard would hold
 * ~1,560. A leaf holds ~2 at 10,000 and ~24 at 100,000: an update copies two arrays of 64 and
 * one small leaf.
 * @module
 */

/** One leaf: ids to values. */
type Leaf<T> = Readonly<Record<string, T>>;

export type Sharded<T> = readonly (readonly Leaf<T>[])[];

/** Branches of the index, and leaves per branch. */
const WIDTH = 64;

/** The id's branch and leaf, from one hash: the low six bits pick the branch, the next six the leaf. */
function hashOf(id: string): number {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) | 0;
  return h >>> 0;
}

/**
 * A leaf without a prototype: an assignment defines an own property for any id ("__proto__" too),
 * and V8 keeps such objects as hash tables. Leaves built as object literals each had their own
 * hidden class: at 100,000 records a read cost 0.93 µs against 0.45, and an update 23 µs against 8.
 */
const leafOf = <T>(from: Leaf<T> | null): Record<string, T> => Object.assign(Object.create(null) as Record<string, T>, from);

/** Shared by every empty leaf (never written: an update copies it). */
const EMPTY: Leaf<never> = Object.freeze(leafOf<never>(null));

export const emptySharded = <T>(): Sharded<T> => Array.from({ length: WIDTH }, () => Array.from({ length: WIDTH }, () => EMPTY as Leaf<T>));

/**
 * Build from many values, each under its own id, at once in O(n) (restoring 10,000 agents one set
 * at a time copies ~2M properties). Values, not [id, value] pairs: a resume restores 100,000.
 */
export function shardedById<T extends { readonly id: string }>(values: readonly T[]): Sharded<T> {
  const map = Array.from({ length: WIDTH }, () => Array.from({ length: WIDTH }, () => EMPTY as Record<string, T>));
  for (const value of values) {
    const h = hashOf(value.id);
    const branch = map[h % WIDTH]!;
    const j = (h >>> 6) % WIDTH;
    if (branch[j] === EMPTY) branch[j] = leafOf<T>(null);
    branch[j]![value.id] = value;
  }
  return map;
}

/** Own properties only: an id such as "toString" or "__proto__" is not found on the prototype. */
export function getSharded<T>(map: Sharded<T>, id: string): T | undefined {
  const h = hashOf(id);
  const leaf = map[h % WIDTH]?.[(h >>> 6) % WIDTH];
  return leaf !== undefined && Object.hasOwn(leaf, id) ? leaf[id] : undefined;
}

export function setSharded<T>(map: Sharded<T>, id: string, value: T): Sharded<T> {
  const h = hashOf(id);
  const i = h % WIDTH;
  const j = (h >>> 6) % WIDTH;
  const leaf = leafOf(map[i]![j]!);
  leaf[id] = value;
  const branch = map[i]!.slice();
  branch[j] = leaf;
  const next = map.slice();
  next[i] = branch;
  return next;
}

export function* shardedValues<T>(map: Sharded<T>): Generator<T> {
  for (const branch of map) for (const leaf of branch) if (leaf !== EMPTY) yield* Object.values(leaf);
}
