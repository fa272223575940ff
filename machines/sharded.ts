/**
 * A record of many entries split into fixed shards, so that an immutable update copies the shard
 * index and one small shard instead of the whole record. JSON-safe (XState contexts are
 * serialised by the inspector): an array of objects mapping ids to values (prototype-less when
 * built in bulk, so that any id is an own property).
 *
 * Why: spreading a plain object with 1,000 keys costs ~190 µs on this machine (V8 keeps large
 * objects in dictionary mode), which would make every registration and status change in the
 * coordinator O(n). The index is an array, not an object keyed `s0`…`s63`: that object was in
 * dictionary mode too, so every update copied a hash table (setSharded and getSharded were 6 % of
 * a 1,000-child fan-out in memory, measured); an array copies as a flat slice.
 * @module
 */

export type Sharded<T> = readonly Readonly<Record<string, T>>[];

const SHARDS = 64;

function shardOf(id: string): number {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) | 0;
  return (h >>> 0) % SHARDS;
}

export const emptySharded = <T>(): Sharded<T> => Array.from({ length: SHARDS }, () => ({}));

/**
 * Build from many values, each under its own id, at once in O(n) (restoring 10,000 agents one set
 * at a time copies ~2M properties). Values, not [id, value] pairs: a resume restores 100,000.
 */
export function shardedById<T extends { readonly id: string }>(values: readonly T[]): Sharded<T> {
  // Without a prototype, so that an assignment defines an own property for any id ("__proto__" too).
  const shards = Array.from({ length: SHARDS }, () => Object.create(null) as Record<string, T>);
  for (const value of values) shards[shardOf(value.id)]![value.id] = value;
  return shards;
}

/** Own properties only: an id such as "toString" or "__proto__" is not found on the prototype. */
export function getSharded<T>(map: Sharded<T>, id: string): T | undefined {
  const shard = map[shardOf(id)];
  return shard !== undefined && Object.hasOwn(shard, id) ? shard[id] : undefined;
}

export function setSharded<T>(map: Sharded<T>, id: string, value: T): Sharded<T> {
  const i = shardOf(id);
  // A computed key in a literal defines an own property for any id ("__proto__" too); a shard is small.
  const next = map.slice();
  next[i] = { ...map[i], [id]: value };
  return next;
}

export function* shardedValues<T>(map: Sharded<T>): Generator<T> {
  for (const shard of map) yield* Object.values(shard);
}
