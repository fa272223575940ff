import { describe, expect, it } from 'vitest';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import type { Model } from '../../src/model/types.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { portOf, type StorePort, type WriteOp } from '../../src/store/port.js';
import { defineTool } from '../../src/tools/defineTool.js';

/**
 * Nothing is acknowledged before it is durable. A store whose commits are held open until the
 * test lets them through: while a commit is held, no promise that acknowledges its writes may
 * resolve and nothing that depends on them may start.
 */
function heldPort() {
  const store = memoryStore();
  const inner = portOf(store);
  const held: { ops: readonly WriteOp[]; release: () => void }[] = [];
  let holding = false;
  const port: StorePort = Object.create(inner) as StorePort;
  Object.defineProperty(port, 'boot', { get: () => inner.boot });
  port.commit = (ops) => {
    if (!holding) return inner.commit(ops);
    return new Promise<void>((resolve, reject) => {
      held.push({ ops, release: () => void inner.commit(ops).then(resolve, reject) });
    });
  };
  return {
    store,
    port,
    hold: () => void (holding = true),
    /** Let every held commit through, in order, and stop holding. */
    release: () => {
      holding = false;
      for (const h of held.splice(0)) h.release();
    },
    held: () => held.flatMap((h) => h.ops),
  };
}

/** Let the event loop run: timers, the committer's ticks, everything not waiting on a commit. */
const settle = async () => {
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
};

const pending = <T>(p: Promise<T>) => {
  const state = { done: false };
  p.then(
    () => (state.done = true),
    () => (state.done = true),
  );
  return state;
};

describe('acknowledged only once committed', () => {
  it('send() does not resolve while the commit holding its message is open; the row is there when it does', async () => {
    // Interactive: respond_to_user parks the root on the user.
    let n = 0;
    const model: Model = {
      complete: () => Promise.resolve({ text: null, toolCalls: [{ id: `r${++n}`, name: 'respond_to_user', arguments: '{"message":"what next?"}' }] }),
    };
    const h = heldPort();
    const c = createCoordinator({ model, store: h.port, interactive: true });
    const root = await c.start({ name: 'lead', task: 'work' });
    await c.waitFor(root, ['waiting']);

    h.hold();
    const sent = c.send(root, { content: 'hello' });
    const state = pending(sent);
    await settle();
    expect(h.held().some((op) => op.op === 'enqueueMessage' && JSON.stringify(op).includes('hello'))).toBe(true);
    expect(state.done).toBe(false);
    expect(JSON.stringify(h.store.listMessages(c.runId))).not.toContain('hello');

    h.release();
    const ack = await sent;
    const row = h.store.listMessages(c.runId).find((m) => m.id === ack.id);
    expect(row?.content).toBe('hello');
    await c.shutdown();
  });

  it('start() resolves only after the run and its root are committed', async () => {
    const model: Model = { complete: () => Promise.resolve({ text: null, toolCalls: [{ id: 'f', name: 'finish', arguments: '{"summary":"ok"}' }] }) };
    const h = heldPort();
    h.hold();
    const c = createCoordinator({ model, store: h.port });
    const started = c.start({ name: 'lead', task: 'work' });
    const state = pending(started);
    await settle();
    expect(state.done).toBe(false);
    expect(h.store.listRuns()).toEqual([]);
    h.release();
    const id = await started;
    expect(h.store.listAgents(c.runId).map((a) => a.id)).toContain(id);
    await c.shutdown();
  });

  it('the next model call and a tool with effects start only after the commit of what came before', async () => {
    const h = heldPort();
    const seen: string[] = [];
    let agentId = '';
    const act = defineTool({
      name: 'act',
      description: 'has an effect',
      parameters: { type: 'object' },
      execute: (_args, ctx) => {
        // Its `started` row is durable before it acts.
        const started = h.store.startedToolCalls(agentId).map((r) => r.callId);
        seen.push(
          `tool ${ctx.idempotencyKey.split(':').at(-1)} started-committed=${started.length > 0 && started.includes(ctx.idempotencyKey.split(':').at(-1)!)}`,
        );
        return 'done';
      },
    });
    let calls = 0;
    const model: Model = {
      complete: (request) => {
        calls++;
        agentId = request.agent.id;
        // The previous turn (answer and tool result) is committed before the next call starts.
        const committed = h.store.loadSession(request.agent.id).filter((i) => i.role === 'tool').length;
        seen.push(`call ${calls} committed-results=${committed}`);
        return Promise.resolve(
          calls < 3
            ? { text: null, toolCalls: [{ id: `a${calls}`, name: 'act', arguments: '{}' }] }
            : { text: null, toolCalls: [{ id: 'f', name: 'finish', arguments: '{"summary":"ok"}' }] },
        );
      },
    };
    const c = createCoordinator({ model, store: h.port, tools: [act] });
    h.hold();
    const started = c.start({ name: 'lead', task: 'work' });
    await settle();
    expect(calls).toBe(0); // no model call before the root is committed
    h.release();
    const id = await started;
    expect((await c.waitFor(id, ['completed'])).status).toBe('completed');
    expect(seen).toEqual([
      'call 1 committed-results=0',
      'tool a1 started-committed=true',
      'call 2 committed-results=1',
      'tool a2 started-committed=true',
      'call 3 committed-results=2',
    ]);
    await c.shutdown();
  });

  it('every status event a subscriber hears is already committed (a team: spawn, notice, wake, finish)', async () => {
    const h = heldPort();
    const model: Model = {
      complete: (request) => {
        const calls =
          request.agent.parentId !== null
            ? [{ id: `f-${request.agent.id}`, name: 'agent_finish', arguments: '{"summary":"done"}' }]
            : request.turn === 1
              ? [0, 1, 2].map((i) => ({ id: `s${i}`, name: 'spawn_agent', arguments: JSON.stringify({ name: `w${i}`, task: 'work' }) }))
              : request.messages.some((m) => m.role === 'tool' && m.content.includes('no_active_agents'))
                ? [{ id: `fin${request.turn}`, name: 'finish', arguments: '{"summary":"all done"}' }]
                : [{ id: `w${request.turn}`, name: 'wait_for_agents', arguments: '{"reason":"reports"}' }];
        return Promise.resolve({ text: null, toolCalls: calls });
      },
    };
    const c = createCoordinator({ model, store: h.port });
    const heard: string[] = [];
    const uncommitted: string[] = [];
    c.subscribe((event) => {
      if (event.type !== 'agent.status') return;
      heard.push(`${event.name}:${event.to}`);
      const row = h.store.listAgents(c.runId).find((a) => a.id === event.agentId);
      if (row?.status !== event.to) uncommitted.push(`${event.name}:${event.to} (store: ${row?.status ?? 'no row'})`);
    });
    const id = await c.start({ name: 'lead', task: 'work' });
    expect((await c.waitFor(id, ['completed'])).status).toBe('completed');
    expect(heard.filter((e) => e.endsWith(':completed'))).toHaveLength(4);
    expect(uncommitted).toEqual([]);
    await c.shutdown();
  });

  it('a turn that spawns 40 children commits them in one batch with its tool results; no child runs before that commit', async () => {
    const CHILDREN = 40;
    const store = memoryStore();
    const inner = portOf(store);
    const batches: (readonly WriteOp[])[] = [];
    const port: StorePort = Object.create(inner) as StorePort;
    Object.defineProperty(port, 'boot', { get: () => inner.boot });
    port.commit = (ops) => {
      // Counted once the batch is in the store: a call that saw it counted saw it committed.
      return inner.commit(ops).then(() => void batches.push(ops));
    };
    // Commits each child's first model call had seen.
    const firstCallAfter = new Map<string, number>();
    const model: Model = {
      complete: (request) => {
        if (request.agent.parentId !== null) {
          if (!firstCallAfter.has(request.agent.id)) firstCallAfter.set(request.agent.id, batches.length);
          return Promise.resolve({ text: null, toolCalls: [{ id: `f-${request.agent.id}`, name: 'agent_finish', arguments: '{"summary":"done"}' }] });
        }
        const calls =
          request.turn === 1
            ? Array.from({ length: CHILDREN }, (_, i) => ({ id: `s${i}`, name: 'spawn_agent', arguments: JSON.stringify({ name: `w${i}`, task: 'work' }) }))
            : request.messages.some((m) => m.role === 'tool' && m.content.includes('no_active_agents'))
              ? [{ id: `fin${request.turn}`, name: 'finish', arguments: '{"summary":"all done"}' }]
              : [{ id: `w${request.turn}`, name: 'wait_for_agents', arguments: '{"reason":"reports"}' }];
        return Promise.resolve({ text: null, toolCalls: calls });
      },
    };
    const c = createCoordinator({ model, store: port, limits: { maxChildren: CHILDREN, maxAgents: CHILDREN + 1 } });
    const id = await c.start({ name: 'lead', task: 'work' });
    expect((await c.waitFor(id, ['completed'])).status).toBe('completed');
    await c.shutdown();

    const registering = batches.map((ops, i) => ({ i, ops })).filter((b) => b.ops.some((op) => op.op === 'registerAgent' && op.agent.parentId !== null));
    expect(registering).toHaveLength(1);
    const [spawn] = registering;
    expect(spawn!.ops.filter((op) => op.op === 'registerAgent')).toHaveLength(CHILDREN);
    // The spawning turn's 40 tool results are in the same batch.
    const results = spawn!.ops.filter((op) => op.op === 'appendSession' && op.agentId === id).flatMap((op) => (op.op === 'appendSession' ? op.items : []));
    expect(results.filter((item) => item.role === 'tool' && item.name === 'spawn_agent')).toHaveLength(CHILDREN);
    expect(firstCallAfter.size).toBe(CHILDREN);
    for (const seen of firstCallAfter.values()) expect(seen).toBeGreaterThan(spawn!.i);
  });
});
