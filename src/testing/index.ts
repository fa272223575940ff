/**
 * `troupe/testing`: fakes and helpers for testing agent teams.
 * @module
 */
export { scriptedModel } from '../model/scriptedModel.js';
export type { Script, ScriptStep, ScriptedModel, ScriptedCall, ScriptToolCall } from '../model/scriptedModel.js';
export { memoryStore } from '../store/memoryStore.js';
export * from './fakeOpenAIServer.js';
export { agentNameOf, repliesFromScript, routeByAgent, stepToReply, TROUPE_CALLS } from './wireScript.js';
export type { RoutedScript } from './wireScript.js';
