/**
 * `troupe/testing`: fakes and helpers for testing agent teams. It needs nothing beyond troupe's
 * own dependencies; the fast-check arbitraries are in `troupe/testing/property`.
 * @module
 */
export { scriptedModel } from '../model/scriptedModel.js';
export type { Script, ScriptStep, ScriptedModel, ScriptedCall, ScriptToolCall } from '../model/scriptedModel.js';
export { memoryStore } from '../store/memoryStore.js';
export * from './fakeOpenAIServer.js';
export { agentNameOf, repliesFromScript, routeByAgent, stepToReply, TROUPE_CALLS } from './wireScript.js';
export type { RoutedScript } from './wireScript.js';
export { simulateTeam } from './simulate.js';
export { replayRun } from '../replay/replayRun.js';
export type { Divergence, DivergenceKind, ReplayOptions, ReplayResult } from '../replay/replayRun.js';
export type { AckRecord, Behaviour, CallRecord, RestartRecord, SimulateOptions, Simulation, SimulationTrace, TransitionRecord } from './simulate.js';
export {
  acknowledgedDeliveredOnce,
  assertInvariants,
  checkInvariants,
  countersWithinCaps,
  INVARIANTS,
  InvariantViolation,
  limitsRespected,
  noCallAfterBudgetStop,
  noChildCallAfterReserve,
  oneReportPerStint,
  parkedStayParkedAfterRestart,
  spendWithinLimit,
  stallNoticesKeepTheClaim,
  userGatedRevival,
} from './invariants.js';
export type { Checker } from './invariants.js';
