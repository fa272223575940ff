/**
 * A record of many entries split into fixed shards, so that an immutable update copies the shard
 * index and one small shard instead of the whole record. JSON-safe (XState contexts are
 * serialised by the inspector): an array of plain objects.
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

/** Build from many entries at once in O(n) (restoring 10,000 agents one set at a time copies ~2M properties). */
export function shardedFrom<T>(entries: Iterable<[string, T]>): Sharded<T> {
  const shards = emptySharded<T>() as Record<string, T>[];
  for (const [id, value] of entries) shards[shardOf(id)]![id] = value;
  return shards;
}

export function getSharded<T>(map: Sharded<T>, id: string): T | undefined {
  return map[shardOf(id)]?.[id];
}

export function setSharded<T>(map: Sharded<T>, id: string, value: T): Sharded<T> {
  const i = shardOf(id);
  // Clone, then store: `{ ...shard, [id]: value }` (a spread followed by a property) is V8's slow path.
  const shard: Record<string, T> = { ...map[i] };
  shard[id] = value;
  const next = map.slice();
  next[i] = shard;
  return next;
}

export function* shardedValues<T>(map: Sharded<T>): Generator<T> {
  for (const shard of map) yield* Object.values(shard);
}
