/**
 * A seeded generator for the harnesses: each trial's draws differ, and a rerun of its seed draws
 * the same. C's `rand()` constants, a linear congruential generator modulo 2^32, multiplied with
 * `Math.imul`: in plain doubles `s * 1103515245` passes 2^53 once the state does ~8e6 and loses its
 * low bits, and the generator fell into a cycle of ~15,600 values (the failover trials' fault,
 * drawn from it, then missed one kind in every run of 8).
 */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32;
}
