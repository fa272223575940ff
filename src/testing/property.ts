/**
 * `troupe/testing/property`: fast-check arbitraries of what a model may do on a turn, for
 * property tests of your own team with `simulateTeam` and the invariants of `troupe/testing`.
 * Needs `fast-check` (an optional peer dependency), which is why it is an entry of its own.
 * @module
 */
export { behaviour, behaviours, mishap } from './arbitraries.js';
export type { BehaviourSpace } from './arbitraries.js';
