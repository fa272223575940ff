/** The pure lifecycle machines and their types. */
export { agentMachine } from './agentMachine.js';
export type { AgentContext, AgentEvent, AgentInput, AgentLifecycleState, TurnInput } from './agentMachine.js';
export { activeAgentsExcept, coordinatorMachine, getAgentRecord, spawnRejection } from './coordinatorMachine.js';
export type {
  AgentChange,
  AgentRecord,
  BudgetFlags,
  CoordinatorContext,
  CoordinatorEmitted,
  CoordinatorEvent,
  CoordinatorInput,
  SpawnLimits,
  SpawnRejection,
} from './coordinatorMachine.js';
export * from './notices.js';
export * from './types.js';
