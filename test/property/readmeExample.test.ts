/**
 * The README's property-test example, run as a user runs it, stays quiet: with seed 810028899 it
 * passed but XState warned on stderr that "agent.stop" was sent to a stopped actor (a budget stop
 * reached an agent that had ended between the decision and its effect, control.ts).
 */
import { fc, test } from '@fast-check/vitest';
import { afterEach, beforeEach, expect, vi } from 'vitest';
import { assertInvariants, simulateTeam } from '../../src/testing/index.js';
import { behaviours } from '../../src/testing/property.js';

const warnings: string[] = [];
beforeEach(() => {
  vi.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => void warnings.push(args.map(String).join(' ')));
});
afterEach(() => {
  vi.restoreAllMocks();
});

test.prop([behaviours({ names: ['lead', 'writer'], maxCostUsd: 0.5 }), fc.nat(600_000)], { seed: 810028899, numRuns: 100 })(
  'my team keeps its promises, and XState has nothing to warn about',
  async (plan, later) => {
    await using sim = await simulateTeam({ behaviours: plan, budget: { limitUsd: 2 } });
    await sim.start('Write a report on X');
    await sim.advance(later, 60_000); // simulated time
    await sim.restart(); // a crash, then resume
    assertInvariants(sim);
    expect(warnings).toEqual([]);
  },
);
