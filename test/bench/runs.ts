/**
 * Bench options that run a bench's function exactly `warmups + iterations` times.
 *
 * tinybench's warm-up (which vitest runs before every bench) loops until `warmupTime` (100 ms by
 * default) has passed as well as `warmupIterations`, so `warmupIterations: 0` alone still ran the
 * function once more: a 130 s K = 10,000 team was run twice and the second run measured, and a
 * resume bench pushed one figure more than it declared.
 * @module
 */
export const runs = (iterations: number, warmups = 0) => ({ iterations, warmupIterations: warmups, warmupTime: 0, time: 0 });
