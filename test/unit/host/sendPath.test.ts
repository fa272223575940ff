/**
 * How far a message travels from `send()` to the model request (issue 32 item 4), measured from
 * stack traces at three points, in the project's own frames (src/, machines/; XState, p-queue and
 * Node's frames are not counted):
 *
 * 1. `send()` up to the commit that holds its message (GroupCommitter.after: the wake waits for it);
 * 2. the committed effect up to the wake reaching the agent's actor (XState's `Actor.send`);
 * 3. the agent's turn cycle down to the model's `complete` (V8's async stack: every awaiting frame).
 *
 * Between 2 and 3 XState runs the agent machine, which starts the cycle actor: those frames are not
 * on either stack and are counted as the fixed hops `GAP` lists (with the spied commit, whose frame
 * is the spy's). A stack taken at the cycle's start shows only XState frames between the wake and
 * the callback (checked 2026-12-07); the machine counts as one hop though none of its frames is
 * there. A hop is one frame (a function the message passes through); files are the distinct files
 * of those frames. Breadth is not counted: a part the turn asks and that
 * returned before the model call (the session, the budget's admission) is on no stack.
 *
 * Measured at aca57f9, the commit before issue 32's work (this method ported to its files; the same
 * GAP, checked there by a stack at the cycle actor's start: only XState frames between Agents.send and
 * the callback): 22 hops, 10 files — createCoordinator.ts send → settle → closure,
 * Messaging.sendExternal → #enqueue → Runtime.after → GroupCommitter.after; the commit's then →
 * #committed → closure → Messaging.wake; GAP; cycle loop → runTurn → callModel → Gateway.call →
 * Limiter.add → Limiter.#start → closure → Gateway.#start (files: createCoordinator, messaging,
 * runtime, commit, agents, agentMachine, cycle, turn, gateway, limiter).
 *
 * Measured before issue 32 item 4: 23 hops, 9 files; after its narrow ports: 22 hops, 8 files (the
 * message's wake no longer passes through the runtime); after its short path: 13 hops, 8 files —
 * `send()` is an async function (no settle wrapper), the send queues its mail and asks the commit
 * for the wake itself (no #enqueue → closure → wake), the commit's reaction is `#committed` itself,
 * and a model call's way from the queue to the model is one task (`Passage.run`, its gates in order)
 * instead of five private steps; now: 11 hops, 5 files — the API's `send` is Messaging's own (no
 * forwarder in createCoordinator.ts), the wake sends to the actor `Agents.awake` hands it (asked and
 * returned before the send: breadth), and the cycle lives with the turn it runs (turn.ts). Half of
 * aca57f9's 22 hops and 10 files.
 *
 * Each figure above was first written one hop higher: `GAP` held `Agents.materialize`, which
 * `Agents.send` asks for the live actor and which returns before the send, so by the rule above it
 * is breadth (the same at aca57f9; corrected 2026-12-07).
 *
 * Breadth, measured once outside this test (V8 precise coverage with call counts on the compiled
 * dist/, from send() to the model's `complete`, the same script on both trees): every project
 * function called, 142 in 32 files at aca57f9; 181 in 47 files at 90016fa. The path got shorter,
 * what a send touches did not: of the 16 files new to it, six are issue 32's ports (four `wire.ts`,
 * turnHost.ts, calls/provider.ts), the rest parts added or newly asked since (breakers, profiles,
 * self-wakes, the call log, allowances, redaction, compaction's check, delegations); limiter.ts left.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { GroupCommitter } from '../../../src/host/commit.js';
import { Actor } from 'xstate';
import { parks } from '../../helpers/models.js';
import type { Model } from '../../../src/model/types.js';

/** The two spied functions (their own frames are the spies'), and the hops XState runs between 2 and 3. */
const COMMIT = { file: 'src/host/commit.ts', fn: 'GroupCommitter.after' };
/** actor.send (XState, spied) → agentMachine: invoke runCycle → the cycle's callback (turn.ts) → loop. */
const GAP = [
  ['machines/agentMachine.ts', 'runCycle invoke'],
  ['src/turn/turn.ts', 'fromCallback'],
] as const;

interface Frame {
  fn: string;
  file: string;
}

function ours(stack: string): Frame[] {
  const out: Frame[] = [];
  for (const line of stack.split('\n').slice(1)) {
    const m = /at (?:async )?(?:(.*?) \()?(?:file:\/\/)?([^()]*?):\d+:\d+\)?$/.exec(line.trim());
    if (!m) continue;
    const file = m[2]!.replace(/^.*?\/(src|machines|test)\//, '$1/');
    if (!/^(src|machines)\//.test(file)) continue;
    out.push({ fn: m[1] ?? '<anonymous>', file });
  }
  return out.reverse();
}

afterEach(() => vi.restoreAllMocks());

describe('the path from send() to the model request', () => {
  it('is counted in files and hops', async () => {
    Error.stackTraceLimit = 200;
    const stacks: { toCommit?: string; toAgent?: string; toModel?: string } = {};
    let armed = false;
    const model: Model = {
      name: 'm',
      estimateCostUsd: () => 0,
      complete: async (...args) => {
        if (armed && !stacks.toModel) stacks.toModel = new Error().stack!;
        return parks.complete(...args);
      },
    };
    const after = GroupCommitter.prototype.after;
    vi.spyOn(GroupCommitter.prototype, 'after').mockImplementation(function (this: GroupCommitter, effect) {
      if (armed && !stacks.toCommit) stacks.toCommit = new Error().stack!;
      return after.call(this, effect);
    });
    const send = Actor.prototype.send;
    vi.spyOn(Actor.prototype, 'send').mockImplementation(function (this: Actor<never>, event) {
      if (armed && (event as { type: string }).type === 'agent.message' && !stacks.toAgent) stacks.toAgent = new Error().stack!;
      return send.call(this, event);
    });
    const c = createCoordinator({ model, interactive: true });
    const root = await c.start({ name: 'lead', task: 'talk' });
    await c.waitFor(root, ['waiting']);
    armed = true;
    await c.send(root, { content: 'hello' });
    await c.whenIdle();
    await c.shutdown();
    const segments = [ours(stacks.toCommit!), [COMMIT], ours(stacks.toAgent!), GAP.map(([file, fn]) => ({ file, fn })), ours(stacks.toModel!)];
    const hops = segments.flat();
    const files = new Set(hops.map((f) => f.file));
    const report = hops.map((f) => `${f.file} ${f.fn}`).join('\n');
    console.log(`send() → model: ${hops.length} hops, ${files.size} files\n${report}`);
    // A regression guard: the path may shorten, never lengthen.
    expect(hops.length).toBeLessThanOrEqual(11);
    expect(files.size).toBeLessThanOrEqual(5);
  });
});
