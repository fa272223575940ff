/**
 * The cycle actor: while its agent is `running`, run one turn after another and report each as
 * `turn.done`. The agent machine handles the event synchronously; if it decided to leave
 * `running`, XState has already stopped this actor (aborting its scope) by the time `sendBack`
 * returns, and the loop ends. Nothing escapes: a throw becomes a `crashed` outcome.
 * @module
 */
import { fromCallback } from 'xstate';
import { turnInputOf, type AgentContext, type AgentEvent, type CycleInput } from '../../machines/agentMachine.js';
import type { RecoveryAttempts } from '../../machines/types.js';
import { CycleScope } from '../cancel.js';
import { serializeError } from '../errors.js';
import type { TurnHost } from './ports.js';
import { heldTurn, runTurn, type TurnResult } from './turn.js';

/** The abort reason of a stopped cycle: one instance (an Error per stop captured a stack each time). */
const CYCLE_STOPPED = new Error('the cycle was stopped');

/**
 * @param hostOf the turns' host, read when a cycle starts (the host is built of parts that are built after the agents).
 * @param contextOf the agent machine's context now (the cycle reads it before every turn).
 */
export function createCycleLogic(hostOf: () => TurnHost, contextOf: (agentId: string) => AgentContext) {
  return fromCallback<AgentEvent, CycleInput>(({ input, sendBack }) => {
    const host = hostOf();
    // The cycle's scope: its turns' operations get their AbortSignals from it (cancel.ts).
    const cycle = new CycleScope();
    const reports = { recovering: (attempts: RecoveryAttempts) => sendBack({ type: 'turn.recovering', attempts }) };
    const loop = async () => {
      // Never run inside the transition that started the cycle.
      await Promise.resolve();
      const agent = host.agent(input.agentId);
      for (let first = true; !cycle.aborted; first = false) {
        let result: TurnResult;
        const turn = turnInputOf(contextOf(input.agentId));
        try {
          result = host.options.holdTurns ? await heldTurn(host, agent, cycle) : await runTurn(host, turn, cycle, first, reports);
        } catch (err) {
          if (cycle.aborted) return;
          agent.logger.error({ err }, 'turn crashed');
          result = { outcome: { kind: 'crashed', error: serializeError(err) }, items: [] };
        }
        if (cycle.aborted || host.failure) return;
        // The tool results, the machine's decision and the writes it causes (status, counters,
        // notices) are staged together, so they commit in one group.
        if (result.items.length > 0) host.sessions.append(agent, result.items);
        // The in-doubt ledger: these calls' results are in this very group.
        if (result.started && result.started.length > 0) host.ledger.finish(agent, turn.turn, result.started);
        sendBack({ type: 'turn.done', outcome: result.outcome });
        host.afterTurn(agent, result.outcome);
      }
    };
    // A failed commit has already stopped the host (host.failure); nothing else escapes.
    loop().catch((err: unknown) => {
      if (!host.failure) host.logger.error({ err }, 'a cycle ended unexpectedly');
    });
    return () => cycle.abort(CYCLE_STOPPED);
  });
}
