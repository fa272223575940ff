/**
 * A host asks its lease before anything leaves the process (store/port.ts LeaseGuard, DESIGN §13):
 * once the lease may have expired by the host's own clock — noticed by nothing yet, as after a
 * SIGSTOP or a partition, before any timer ran — the next model call and the next tool call are
 * not made, and the coordinator stops with LEASE_LOST. The guard here is a stand-in on the memory
 * store, so the check at each call is what is tested, not the PostgreSQL lease's timers.
 */
import { describe, expect, it } from 'vitest';
import { TroupeError } from '../../../src/errors.js';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import type { Model, ModelTurn } from '../../../src/model/types.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { portOf, type LeaseGuard, type StorePort } from '../../../src/store/port.js';
import { defineTool } from '../../../src/tools/defineTool.js';

/** A guard whose lease expires when `expire()` is called; only a `check()` notices (and tells its listeners once). */
function standInGuard() {
  let expired = false;
  let lost: TroupeError | null = null;
  const listeners: ((err: TroupeError) => void)[] = [];
  const guard: LeaseGuard = {
    check() {
      if (lost) return lost;
      if (!expired) return null;
      lost = new TroupeError('LEASE_LOST', 'the lease may have expired');
      for (const l of listeners.splice(0)) l(lost);
      return lost;
    },
    onLost(listener) {
      if (lost) listener(lost);
      else listeners.push(listener);
    },
  };
  return { guard, expire: () => void (expired = true) };
}

const call = (name: string, args: object = {}) => ({ id: `c-${name}`, name, arguments: JSON.stringify(args) });

async function host(answers: (n: number, expire: () => void) => ModelTurn, tools: ReturnType<typeof defineTool>[]) {
  const { guard, expire } = standInGuard();
  const port: StorePort = { ...portOf(memoryStore()), guard };
  let calls = 0;
  const model: Model = { name: 'm', complete: async () => answers(++calls, expire) };
  const c = createCoordinator<StorePort>({ store: port, model, tools, retry: { maxRetries: 0 } });
  const root = await c.start({ name: 'lead', task: 'work' });
  await expect.poll(() => c.health().ok, { timeout: 5_000 }).toBe(false);
  return { c, root, calls: () => calls };
}

describe('a host whose lease may have expired', () => {
  it('makes no tool call: the lease expired during the model call that asked for it', async () => {
    let ran = 0;
    const step = defineTool({ name: 'step', description: 'a step', parameters: { type: 'object', properties: {} }, execute: () => void (ran += 1) });
    const { c, calls } = await host(
      (n, expire) => {
        expire();
        return { text: null, toolCalls: [call('step')] };
      },
      [step],
    );
    expect(ran).toBe(0);
    expect(calls()).toBe(1);
    expect(c.health().error?.code).toBe('LEASE_LOST');
    await c.shutdown();
  });

  it('makes no model call: the lease expired during a tool call, after which the turn would ask the model again', async () => {
    let expireNow: () => void = () => undefined;
    const step = defineTool({ name: 'step', description: 'a step', parameters: { type: 'object', properties: {} }, execute: () => expireNow() });
    const { c, calls } = await host(
      (n, expire) => {
        expireNow = expire;
        return n === 1 ? { text: null, toolCalls: [call('step')] } : { text: null, toolCalls: [call('finish', { summary: 'done' })] };
      },
      [step],
    );
    expect(calls()).toBe(1);
    expect(c.health().error?.code).toBe('LEASE_LOST');
    await c.shutdown();
  });
});
