/**
 * The harnesses' seeded generator (test/helpers/random.ts): the failover and kill -9 trials draw
 * their faults and timings from it, so a generator stuck in a short cycle leaves kinds of trials
 * undrawn while the counts still look random.
 */
import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../helpers/random.js';

const draws = (seed: number, n: number) => {
  const random = seededRandom(seed);
  return Array.from({ length: n }, () => random());
};

describe('seededRandom', () => {
  it('draws the same sequence for a seed, another for another seed', () => {
    expect(draws(7, 50)).toEqual(draws(7, 50));
    expect(draws(7, 50)).not.toEqual(draws(8, 50));
  });

  it('does not fall into a short cycle: 200,000 draws in [0, 1), all different', () => {
    const values = draws(1, 200_000);
    expect(values.every((v) => v >= 0 && v < 1)).toBe(true);
    expect(new Set(values).size).toBe(values.length);
  });

  it('picks each of five kinds about as often as the others', () => {
    const counts = [0, 0, 0, 0, 0];
    for (const v of draws(1, 100_000)) counts[Math.floor(v * 5)]! += 1;
    for (const c of counts) expect(Math.abs(c - 20_000)).toBeLessThan(600);
  });
});
