/** A scripted team on a simulated clock, with queries over what the store recorded. */
import { readFileSync } from 'node:fs';
import { SimulatedClock } from 'xstate';
import { createCoordinator, type Coordinator } from '../../src/host/createCoordinator.js';
import type { CoordinatorOptions } from '../../src/host/options.js';
import { scriptedModel, type Script, type ScriptStep } from '../../src/model/scriptedModel.js';
import type { SessionItem } from '../../src/model/types.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import type { MessageRow } from '../../src/store/types.js';

export const TERMINAL = ['completed', 'stopped', 'failed', 'crashed'] as const;
/** Message types that close a child's stint: its report or a terminal notice. */
export const STINT_ITEMS = new Set(['completion', 'completed', 'stopped', 'failed', 'crashed']);

/** A scripted step spawning `agents` (name, task) in one spawn_agents call. */
export const spawnStep = (...agents: [name: string, task: string][]): ScriptStep => ({
  tool: 'spawn_agents',
  args: { agents: agents.map(([name, task]) => ({ name, task })) },
});

/** The wait for reports that follows a spawn in the replay tests' scripts. */
export const waitStep: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'reports' } };

/** Start `lead` on `c`, move `clock` 5 ms every loop turn until it ends, and shut `c` down. */
export async function runOnClock(c: Coordinator, clock: SimulatedClock, lead: { name: string; task: string }): Promise<void> {
  const root = await c.start(lead);
  const done = c.waitFor(root, [...TERMINAL]);
  for (let i = 0; i < 200 && !(TERMINAL as readonly string[]).includes(c.get(root).status); i++) {
    await tick();
    clock.increment(5);
  }
  await done;
  await c.shutdown();
}

function loadScript(name: string): Script {
  return JSON.parse(readFileSync(new URL(`../../fixtures/scenarios/${name}.json`, import.meta.url), 'utf8')) as Script;
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Let every piece of work that is already due run: each event-loop turn lets the group committer
 * commit once (a turn waits for one commit before its model call), so a few dozen turns settle in
 * as many turns of the loop. No timer moves; only the simulated clock does that.
 */
export const flush = async (rounds = 25) => {
  for (let i = 0; i < rounds; i++) await tick();
};

export function team(script: Script | string, options: Partial<Omit<CoordinatorOptions, 'clock'>> & { clock?: SimulatedClock } = {}) {
  const clock = options.clock ?? new SimulatedClock();
  const model = scriptedModel(typeof script === 'string' ? loadScript(script) : script, { clock });
  const store = options.store ?? memoryStore();
  const c: Coordinator = createCoordinator({ model, store, clock, ...options });
  const byName = (name: string) => {
    const found = c.list().filter((a) => a.name === name);
    if (found.length !== 1) throw new Error(`expected one agent named ${name}, found ${found.length}`);
    return found[0]!;
  };
  const messagesTo = (id: string): MessageRow[] => store.listMessages(c.runId).filter((m) => m.to === id);
  const session = (id: string): readonly SessionItem[] => store.loadSession(id);
  /** Tool results of an agent, parsed, in order. */
  const toolResults = (id: string) =>
    session(id)
      .filter((i): i is Extract<SessionItem, { role: 'tool' }> => i.role === 'tool')
      .map((i) => ({ name: i.name, result: JSON.parse(i.content) as Record<string, unknown> & { error?: { code: string; message: string } } }));
  /** Advance the simulated clock in steps, letting turns run between steps. */
  const advance = async (ms: number, step = 1_000) => {
    for (let t = 0; t < ms; t += step) {
      await flush(); // let work already due settle (and arm its timers) before time moves
      clock.increment(Math.min(step, ms - t));
      await flush();
    }
  };
  return { c, model, clock, store, byName, messagesTo, session, toolResults, advance };
}
