/**
 * The cycle actor: while its agent is `running`, run one turn after another and report each as
 * `turn.done`. The agent machine handles the event synchronously; if it decided to leave
 * `running`, XState has already stopped this actor (aborting its signal) by the time `sendBack`
 * returns, and the loop ends. Nothing escapes: a throw becomes a `crashed` outcome.
 * @module
 */
import { fromCallback } from 'xstate';
import { turnInputOf, type AgentEvent, type CycleInput } from '../../machines/agentMachine.js';
import type { Runtime } from '../host/runtime.js';
import { serializeError } from '../errors.js';
import { runTurn, type TurnResult } from './turn.js';

/** The abort reason of a stopped cycle: one instance (an Error per stop captured a stack each time). */
const CYCLE_STOPPED = new Error('the cycle was stopped');

export function createCycleLogic(rt: Runtime) {
  return fromCallback<AgentEvent, CycleInput>(({ input, sendBack }) => {
    const controller = new AbortController();
    const { signal } = controller;
    const loop = async () => {
      // Never run inside the transition that started the cycle.
      await Promise.resolve();
      const agent = rt.handle(input.agentId);
      for (let first = true; !signal.aborted; first = false) {
        let result: TurnResult;
        const input = turnInputOf(agent.actor.getSnapshot().context);
        try {
          result = await runTurn(rt, input, signal, first);
        } catch (err) {
          if (signal.aborted) return;
          agent.logger.error({ err }, 'turn crashed');
          result = { outcome: { kind: 'crashed', error: serializeError(err) }, items: [] };
        }
        if (signal.aborted || rt.failure) return;
        // The tool results, the machine's decision and the rows it causes (status, counters,
        // notices) commit together: the transition runs synchronously inside this transaction.
        rt.commit(() => {
          if (result.items.length > 0) rt.store.appendSession(agent.id, result.items);
          // The in-doubt ledger: these calls' results are in this very transaction.
          if (result.started && result.started.length > 0) rt.store.finishToolCalls(agent.id, input.turn, result.started, rt.clock.now());
          sendBack({ type: 'turn.done', outcome: result.outcome });
        });
        rt.reviews?.afterTurn(agent, result.outcome);
      }
    };
    // A failed commit has already stopped the coordinator (rt.failure); nothing else escapes.
    loop().catch((err: unknown) => {
      if (!rt.failure) rt.logger.error({ err }, 'a cycle ended unexpectedly');
    });
    return () => controller.abort(CYCLE_STOPPED);
  });
}
