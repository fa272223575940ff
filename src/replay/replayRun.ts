/**
 * `replayRun` (issue 37): re-run a recorded run offline, in memory, through the code as it is now —
 * the recorded answers in place of the model, the recorded results in place of the user tools, the
 * recorded inputs applied where the owner applied them, ids handed out as the recording did, and a
 * simulated clock that follows the recording — and report the first place where the code asks what
 * the recording did not (`Divergence`), or that it is identical. Which step the code gets when is
 * the driver's (driver.ts).
 * @module
 */
import type { AgentStatus } from '../../machines/types.js';
import { createCoordinator, type Coordinator } from '../host/createCoordinator.js';
import { resumeCoordinator } from '../host/resumeCoordinator.js';
import type { CoordinatorOptions } from '../host/options.js';
import { isMcpServer, type McpServer } from '../mcp/config.js';
import type { ReplayedMcpServer } from '../mcp/replayed.js';
import type { Tool } from '../tools/defineTool.js';
import { memoryStore } from '../store/memoryStore.js';
import { portOf, type StorePort } from '../store/port.js';
import type { Store } from '../store/types.js';
import { ReplayClock } from './clock.js';
import { sessionDiff, type Divergence } from './compare.js';
import { Replay, type DriveOptions } from './driver.js';
import { readRecording, readsOf, type Recording, type ReplayReads } from './recording.js';

export type { Divergence, DivergenceKind } from './compare.js';

export interface ReplayOptions extends DriveOptions {
  /**
   * The code under test, as you would pass it to createCoordinator (tools, system prompt, limits,
   * budget, profiles, …). The replay sets model, store, clock, ids and runId, and keeps no live stream; the tools' `execute`
   * is not called (their recorded results are given instead) until `liveFrom`. An MCP server
   * (`mcpServer(...)`) is not started: its tools are the ones the recording offered from a server
   * of that name, answered from the recording. An `auxiliaryModel` or a profile's `model` is not
   * called: it declares the name, price and limits its recorded calls are priced and bounded with.
   */
  coordinator?: Omit<CoordinatorOptions<Store>, 'model' | 'store' | 'clock' | 'ids' | 'runId' | 'stream'>;
}

export interface ReplayResult {
  runId: string;
  /** `identical`: step for step what the recording holds; `diverged`: see `divergence`; `live`: identical up to `liveFrom`, then run live. */
  outcome: 'identical' | 'diverged' | 'live';
  divergence: Divergence | null;
  /** Recorded model calls the code asked for, and inputs applied. */
  calls: number;
  inputs: number;
  /** Each agent's status when the replay ended, by id. */
  statuses: Record<string, AgentStatus>;
  /** The replay's own rows (in memory). */
  store: Store;
}

/**
 * Replay run `runId` of `source`: an embedded Store, or a store port's reads (SQLite, PostgreSQL, memory).
 * @example
 * const result = await replayRun(store, runId, { coordinator: { tools } });
 * expect(result.outcome).toBe('identical');
 */
export async function replayRun(source: Store | ReplayReads, runId: string, options: ReplayOptions = {}): Promise<ReplayResult> {
  const recording = await readRecording(readsOf(source), runId);
  const clock = new ReplayClock();
  clock.set(recording.run.createdAt);
  const replay = new Replay(recording, clock, options);
  // Commits grouped as the recording's were: a durable store's once per event-loop turn.
  const store = memoryStore({ groupAsOnDisk: recording.durable });
  const given = options.coordinator ?? {};
  const auxiliary = options.auxiliaryModel ?? given.auxiliaryModel;
  // Each process of the recording writes through a port of its own, closed when it dies.
  let dies = () => {};
  const portOfProcess = (): StorePort => {
    const inner = portOf(store);
    const port = Object.create(inner) as StorePort;
    let dead = false;
    port.commit = (ops) => (dead ? new Promise<void>(() => {}) : inner.commit(ops));
    dies = () => (dead = true);
    return port;
  };
  // Built again for each process: the dead one's models and tools never answer.
  const settings = () => ({
    ...given,
    tools: (given.tools ?? []).map((t) => (isMcpServer(t) ? replayedServer(t, recording, replay, options.liveFrom !== undefined) : replay.tool(t))),
    ...(auxiliary ? { auxiliaryModel: replay.modelAs(auxiliary, given.auxiliaryModel ?? null) } : {}),
    // A profile's model likewise: its agents' recorded calls answered, priced as that model.
    ...(given.profiles === undefined
      ? {}
      : {
          profiles: Object.fromEntries(
            Object.entries(given.profiles).map(([name, p]) => [name, p.model ? { ...p, model: replay.modelAs(p.model, p.model) } : p]),
          ),
        }),
    // Calls wait in the model until their turn comes: a queue bound could hold back the one due.
    // Never adaptive: the replay's admission must not follow this process's event-loop delay.
    concurrency: { ...given.concurrency, model: 1_000_000, adaptive: false },
    // No live stream: nothing reads the replay's, and its flush runs on a wall-clock timer (a
    // durable recording's replay groups commits as on disk, which would turn it on).
    stream: false as const,
    interactive: recording.run.interactive,
    model: replay.mainModel(),
    store: portOfProcess(),
    clock,
    ids: replay.ids,
    mailReads: replay.mailReads(),
  });
  let coordinator: Coordinator<StorePort> = createCoordinator({ ...settings(), runId: recording.run.id });
  replay.attach(coordinator);
  replay.restartWith(async () => {
    dies();
    const [agents, messages] = await Promise.all([store.listAgents(recording.run.id), store.listMessages(recording.run.id)]);
    replay.resyncIds({ agents: new Set(agents.map((a) => a.id)), messages: new Set(messages.map((m) => m.id)) });
    coordinator = await resumeCoordinator({ ...settings(), runId: recording.run.id });
    return coordinator;
  });
  try {
    const { root } = recording;
    await coordinator.start({
      name: root.name,
      task: root.task,
      skills: root.skills,
      ...(root.terms?.output ? { output: root.terms.output } : {}),
      ...(root.terms?.profile === undefined ? {} : { profile: root.terms.profile }),
      // The promoted notes the recorded root read (the replay's store has none).
      ...(root.terms?.notes === undefined ? {} : { notes: root.terms.notes }),
    });
    await replay.drive();
    // Identical so far: each agent's session must also end as it did (what followed its last call).
    if (!replay.divergence && !replay.live) {
      for (const agent of recording.agents) {
        const diverged = sessionDiff(agent, recording.sessions.get(agent.id) ?? [], await store.loadSession(agent.id));
        if (diverged) {
          replay.divergence = diverged;
          break;
        }
      }
    }
    const statuses: Record<string, AgentStatus> = {};
    for (const agent of coordinator.list()) statuses[agent.id] = agent.status;
    return {
      runId: recording.run.id,
      outcome: replay.divergence ? 'diverged' : replay.live ? 'live' : 'identical',
      divergence: replay.divergence,
      calls: replay.calls,
      inputs: replay.inputs,
      statuses,
      store,
    };
  } finally {
    await coordinator.shutdown();
  }
}

/**
 * `server` as the recording had it: connecting to nothing, listing the tools the recording offered
 * from a server of its name, each answered from the recording.
 */
function replayedServer(server: McpServer, recording: Recording, replay: Replay, live: boolean): ReplayedMcpServer {
  return {
    kind: 'mcp',
    options: server.options,
    // Going live, the server is started: from `liveFrom` on its tools are called for real.
    replayed: { tools: live ? null : (recording.mcpTools.get(server.options.name) ?? []), answer: (tool) => ({ ...tool, ...replay.tool(tool as Tool) }) },
  };
}
