/**
 * Failover-harness worker (not a test; run compiled from dist/ by failover.ts).
 *
 *   node dist/test/integration/pg/workerChild.js <url> <schema> <ttlMs> <seed>
 *
 * A `troupe worker` with the harness's team: each root spawns WORKERS sub-agents that take
 * WORK_TURNS turns (messaging their parent on some) and finish. While it hosts a run it sends user
 * messages to the run's live agents and prints `ACK <runId> <content>` once `send()` resolved (the
 * message is committed). Progress: `READY` once claiming, `TICK <runId>` at every sub-agent model
 * call (the parent times its faults by them).
 *
 * What leaves the process is printed with the epoch of the lease it was made under and the time:
 * `HOST <runId> <epoch> <ms>` when a run is claimed, `CALL <runId> <epoch> <ms> <checked ms>` at
 * every model call and `TOOL …` at every tool call, with when the lease check that allowed it
 * passed (the run's last passing check: the gateway and the tool queue check synchronously
 * before the call). A call allowed after another process started hosting the run at a later epoch
 * was allowed without a lease: the parent counts those.
 *
 * SIGUSR2 steps the wall clock its leases read forward by the TTL (the harness's `clockstep` fault;
 * it then steps the database's clock for this host's leases): `STEPPED` once done.
 *
 * Negative controls: BUGGY=ack-early prints the ACK before the send; BUGGY=unguarded hosts with
 * leases whose local expiry never comes (both their clocks are frozen): only the database's epoch
 * fence stops a zombie, as before the guard; BUGGY=monotonic hosts with leases whose wall clock
 * misses the step (as a guard on the monotonic clock alone would).
 */
import type { Coordinator } from '../../../src/host/createCoordinator.js';
import type { Model, ModelRequest, ModelTurn } from '../../../src/model/types.js';
import type { StorePort } from '../../../src/store/port.js';
import type { LeaseOptions, RunLease } from '../../../src/store/postgres/lease.js';
import { openPostgresStore, type PostgresStore } from '../../../src/store/postgres/store.js';
import { defineTool } from '../../../src/tools/defineTool.js';
import { startWorker } from '../../../src/worker/worker.js';

const [url, schema, ttlText, seedText] = process.argv.slice(2) as [string, string, string, string];
const ttlMs = Number(ttlText);
let seed = Number(seedText) >>> 0 || 1;
const random = () => (seed = (seed * 1664525 + 1013904223) >>> 0) / 2 ** 32;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const WORKERS = 3;
/** Experiment only: busy-wait this long between the lease check and the printed call (widens the window a SIGSTOP can fall in). */
const SPIN_MS = Number(process.env.SPIN_MS ?? 0);
export const WORK_TURNS = 6;

/** The epoch of each run this process hosts now (what its calls are made under). */
const epochs = new Map<string, number>();
/** When each run's lease check last passed in this process (what allowed the call that follows it). */
const checkedAt = new Map<string, number>();
const left = (kind: 'CALL' | 'TOOL', runId: string) =>
  process.stdout.write(`${kind} ${runId} ${epochs.get(runId) ?? 0} ${Date.now()} ${checkedAt.get(runId) ?? 0}\n`);

const work = defineTool({
  name: 'work',
  description: 'do a unit of work',
  risk: 'read_only',
  parameters: { type: 'object', properties: { step: { type: 'number' } } },
  execute: async (_args, context) => {
    left('TOOL', context.runId);
    await pause(random() * 3);
    return { ok: true };
  },
});

/** A pure function of the conversation, so a run resumed on another worker continues correctly. */
const modelFor = (runId: string): Model => ({
  name: 'failover-harness',
  async complete(request: ModelRequest): Promise<ModelTurn> {
    if (SPIN_MS > 0) for (const until = performance.now() + SPIN_MS; performance.now() < until;);
    left('CALL', runId);
    if (request.agent.parentId !== null) process.stdout.write(`TICK ${runId}\n`);
    await pause(random() * 6);
    let n = 0;
    const call = (name: string, args: object) => ({ id: `c-${request.agent.id}-${request.messages.length}-${n++}`, name, arguments: JSON.stringify(args) });
    const done = request.messages.filter((m) => m.role === 'assistant').length;
    if (request.agent.parentId === null) {
      if (done === 0) return { text: null, toolCalls: Array.from({ length: WORKERS }, (_, i) => call('spawn_agent', { name: `w${i}`, task: `part ${i}` })) };
      const last = request.messages.findLast((m) => m.role === 'tool');
      const idle = last?.role === 'tool' && last.content.includes('no_active_agents');
      return { text: null, toolCalls: [idle ? call('finish', { summary: 'all parts done' }) : call('wait_for_agents', { reason: 'reports' })] };
    }
    if (done < WORK_TURNS) {
      const calls = [call('work', { step: done })];
      if (done % 3 === 1) calls.push(call('send_message', { to: request.agent.parentId, content: `progress from ${request.agent.name}` }));
      return { text: null, toolCalls: calls };
    }
    return { text: null, toolCalls: [call('agent_finish', { summary: `${request.agent.name} finished` })] };
  },
});

/** Unique across every run this process hosts (a run hosted twice by one process must not repeat a text). */
let sent = 0;

/** At most this many user messages per hosting (each wakes an agent for a turn: the root's turns stay under maxTurns). */
const PER_HOSTING = 10;

async function sendUserMessages(c: Coordinator<StorePort>): Promise<void> {
  for (let k = 0; k < PER_HOSTING; k++) {
    const i = sent++;
    await pause(2 + random() * 8);
    if (!c.health().ok) return;
    const targets = c.list().filter((a) => a.status === 'running' || a.status === 'waiting');
    if (targets.length === 0) return;
    const target = targets[Math.floor(random() * targets.length)]!;
    const content = `user note ${process.pid}-${c.runId}-${i}`;
    if (process.env.BUGGY === 'ack-early') {
      process.stdout.write(`ACK ${c.runId} ${content}\n`);
      await pause(20);
    }
    try {
      await c.send(target.id, { content });
    } catch {
      if (process.env.BUGGY === 'ack-early') process.stdout.write(`NACK ${c.runId} ${content}\n`);
      continue;
    }
    if (process.env.BUGGY !== 'ack-early') process.stdout.write(`ACK ${c.runId} ${content}\n`);
  }
}

/** Every claim is printed (`HOST`) and its epoch noted at once: a resumed run's agents call the model before the worker's onHost. */
const claimed = (lease: RunLease): RunLease => {
  epochs.set(lease.runId, lease.epoch);
  const guard = lease.port.guard!;
  Object.assign(lease.port, {
    guard: {
      ...guard,
      check: () => {
        const lost = guard.check();
        if (lost === null) checkedAt.set(lease.runId, Date.now());
        return lost;
      },
    },
  });
  process.stdout.write(`HOST ${lease.runId} ${lease.epoch} ${Date.now()}\n`);
  return lease;
};

/** How far this machine's wall clock has stepped forward (SIGUSR2, the harness's `clockstep`). */
let stepped = 0;
process.on('SIGUSR2', () => {
  stepped += ttlMs;
  process.stdout.write('STEPPED\n');
});

/** The leases' clocks: the wall clock with its steps; the negative controls' as they say. */
const leaseOptions = (options: LeaseOptions): LeaseOptions => {
  if (process.env.BUGGY === 'unguarded') return { ...options, now: () => 0, wallClock: () => 0 };
  if (process.env.BUGGY === 'monotonic') return options;
  return { ...options, wallClock: () => Date.now() + stepped };
};

async function main(): Promise<void> {
  const opened = await openPostgresStore({ url, schema });
  const store: PostgresStore = {
    ...opened,
    claim: async (runId, options) => claimed(await opened.claim(runId, leaseOptions(options))),
    claimNext: async (options) => {
      const lease = await opened.claimNext(leaseOptions(options));
      return lease && claimed(lease);
    },
  };
  await startWorker({
    store,
    concurrency: 10,
    ttlMs,
    pollMs: Math.max(50, Math.floor(ttlMs / 3)),
    hostOptions: (runId) => ({ model: modelFor(runId), tools: [work], limits: { maxTurns: 500 }, idleResumeMs: 60_000 }),
    onHost: (c) => void sendUserMessages(c),
  });
  process.stdout.write('READY\n');
  await new Promise(() => {}); // host until killed
}

main().catch((err: unknown) => {
  process.stderr.write(`worker child failed: ${String((err as Error)?.stack ?? err)}\n`);
  process.exit(3);
});
