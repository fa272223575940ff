/**
 * A conversation with one agent of an interactive run (seeds/001): `respond(text)` sends one user
 * message and resolves when the agent has answered and parked again (or ended), with a per-turn
 * step budget — an agent that takes more than `maxSteps` turns for one user message is stopped.
 * Tool-failure streaks are reset first: a new user turn is a new attempt.
 * @module
 */
import type { AgentStatus } from '../../machines/types.js';
import type { Coordinator } from '../host/createCoordinator.js';
import { ConfigError } from '../errors.js';

export interface Reply {
  /** What the agent said to the user this turn (respond_to_user), or null. */
  text: string | null;
  status: AgentStatus;
  /** Turns the agent took for this message. */
  steps: number;
  stepLimitReached: boolean;
}

const SETTLED: readonly AgentStatus[] = ['waiting', 'stalled', 'budgetPaused', 'completed', 'stopped', 'failed', 'crashed'];

export class Conversation {
  readonly #coordinator: Coordinator;
  readonly #agentId: string;

  constructor(coordinator: Coordinator, agentId: string) {
    this.#coordinator = coordinator;
    this.#agentId = coordinator.get(agentId).id;
  }

  async respond(text: string, options: { maxSteps?: number } = {}): Promise<Reply> {
    const maxSteps = options.maxSteps ?? 25;
    if (!Number.isInteger(maxSteps) || maxSteps < 1) throw new ConfigError(`Expected maxSteps to be an integer >= 1, got ${String(maxSteps)}`);
    const c = this.#coordinator;
    const id = this.#agentId;
    c.resetToolFailures(id);
    const before = c.get(id).turns;
    let said: string | null = null;
    let limited = false;
    const unsubscribe = c.subscribe((event) => {
      if (event.type === 'agent.said' && event.agentId === id) said = event.text;
    });
    const budget = c.registry.subscribe(({ context }) => {
      const view = context.agents.get(id);
      if (!limited && view && view.turns - before >= maxSteps && view.status === 'running') {
        limited = true;
        c.stop(id, { cascade: false }).catch(() => undefined);
      }
    });
    try {
      let woke = false;
      const wake = c.subscribe((event) => {
        if (event.type === 'agent.status' && event.agentId === id && event.to === 'running') woke = true;
      });
      try {
        await c.send(id, { content: text });
        // The wake is delivered right after the commit: let it land, then wait for the agent to settle.
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (woke) await c.waitFor(id, SETTLED);
      } finally {
        wake();
      }
      const info = c.get(id);
      return { text: said, status: info.status, steps: info.turns - before, stepLimitReached: limited };
    } finally {
      unsubscribe();
      budget.unsubscribe();
    }
  }
}

/** A conversation with `agentId` (by id or name). */
export const conversation = (coordinator: Coordinator, agentId: string): Conversation => new Conversation(coordinator, agentId);
