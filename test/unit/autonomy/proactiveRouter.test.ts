/**
 * The proactive router: a root fire starts (or reaches, or resumes) run `proactive-<name>`, a
 * named-agent fire reaches that agent of the main run, and fires for one run are serialised.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import type { ProactiveFire } from '../../../src/autonomy/proactivePipeline.js';
import { ProactiveManager } from '../../../src/autonomy/proactive.js';
import { isProactiveRunId } from '../../../src/autonomy/proactiveIds.js';
import { ProactiveRouter, type ProactiveRouterOptions } from '../../../src/autonomy/proactiveRouter.js';
import { createCoordinator, type Coordinator } from '../../../src/host/createCoordinator.js';
import type { TroupeEvent } from '../../../src/host/runtime.js';
import { TroupeError } from '../../../src/errors.js';
import { scriptedModel, type Script } from '../../../src/model/scriptedModel.js';
import type { SessionItem } from '../../../src/model/types.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import type { Store } from '../../../src/store/types.js';

const respond = (message: string) => ({ tool: 'respond_to_user', args: { message } });

function fire(trigger: string, prompt: string, target: ProactiveFire['target'] = { root: true }): ProactiveFire {
  return { trigger, sessionId: `proactive-${trigger}`, prompt, target, at: 0 };
}

/** Resolves with the first event that matches; rejects after `timeoutMs` of real time. */
function nextEvent(c: Coordinator, match: (e: TroupeEvent) => boolean, timeoutMs = 5_000): Promise<TroupeEvent> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      stop();
      reject(new Error(`no matching event within ${timeoutMs} ms`));
    }, timeoutMs);
    const stop = c.subscribe((e) => {
      if (!match(e)) return;
      clearTimeout(timer);
      stop();
      resolve(e);
    });
  });
}

const said = (c: Coordinator, text: string) => nextEvent(c, (e) => e.type === 'agent.said' && e.text === text);

const userTexts = (session: readonly SessionItem[]) =>
  session.filter((i) => i.role === 'user').map((i) => (typeof i.content === 'string' ? i.content : JSON.stringify(i.content)));

const open: { close(): Promise<void> | void }[] = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

function setup(script: Script, options: Partial<ProactiveRouterOptions> & { store?: Store } = {}) {
  const clock = new SimulatedClock();
  const model = scriptedModel(script, { clock });
  const store = options.store ?? memoryStore();
  const router = new ProactiveRouter({ store, model, coordinatorOptions: { clock }, ...options });
  open.push(router);
  return { clock, model, store, router };
}

describe('ProactiveRouter: root targets', () => {
  it('a first fire creates run proactive-<name>, its root named after the trigger with the prompt as task', async () => {
    const { router, store, model } = setup({ agents: { nightly: [respond('looked at it')] } });
    const result = await router.route(fire('nightly', 'Check the nightly build.'));
    expect(result).toMatchObject({ kind: 'started', runId: 'proactive-nightly' });
    const c = router.get('proactive-nightly')!;
    expect(c.runId).toBe('proactive-nightly');
    const root = await c.waitFor(result.agentId, ['waiting']);
    expect(root).toMatchObject({ name: 'nightly', parentId: null, task: 'Check the nightly build.' });
    expect(store.listRuns().map((r) => [r.id, r.rootId, r.interactive])).toEqual([['proactive-nightly', result.agentId, true]]);
    expect(model.calls).toHaveLength(1);
    expect(router.coordinators()).toEqual([c]);
  });

  it('a second fire reaches the same root as a user message of type proactive; it takes another turn, no second run', async () => {
    const { router, store, model } = setup({ agents: { nightly: [respond('first look'), respond('second look')] } });
    const first = await router.route(fire('nightly', 'Check the nightly build.'));
    const c = router.get('proactive-nightly')!;
    await c.waitFor(first.agentId, ['waiting']);

    const answered = said(c, 'second look');
    const second = await router.route(fire('nightly', 'The build changed again.'));
    expect(second).toMatchObject({ kind: 'sent', runId: 'proactive-nightly', agentId: first.agentId });
    await answered;

    expect(router.get('proactive-nightly')).toBe(c);
    expect(store.listRuns()).toHaveLength(1);
    expect(model.calls.map((call) => call.agentName)).toEqual(['nightly', 'nightly']);
    const message = store.listMessages('proactive-nightly').find((m) => m.content === 'The build changed again.');
    expect(message).toMatchObject({ from: 'user', type: 'proactive', to: first.agentId });
    expect(userTexts(store.loadSession(first.agentId)).at(-1)).toContain('The build changed again.');
  });

  it('a root that completed is revived by the next fire (the run is interactive)', async () => {
    const { router, store } = setup({ agents: { nightly: [{ tool: 'finish', args: { summary: 'done' } }, respond('back again')] } });
    const first = await router.route(fire('nightly', 'Once.'));
    const c = router.get('proactive-nightly')!;
    await c.waitFor(first.agentId, ['completed']);
    const answered = said(c, 'back again');
    await router.route(fire('nightly', 'Twice.'));
    await answered;
    expect(store.listRuns()).toHaveLength(1);
  });

  it('concurrent fires for one trigger create one run and one coordinator; both prompts reach the root', async () => {
    const { router, store } = setup({ agents: { nightly: [respond('one'), respond('two'), respond('three')] } });
    const results = await Promise.all([router.route(fire('nightly', 'Prompt A')), router.route(fire('nightly', 'Prompt B'))]);
    expect(results.map((r) => r.kind)).toEqual(['started', 'sent']);
    expect(new Set(results.map((r) => r.agentId)).size).toBe(1);
    expect(store.listRuns().map((r) => r.id)).toEqual(['proactive-nightly']);
    expect(router.coordinators()).toHaveLength(1);
    expect(store.listAgents('proactive-nightly')).toHaveLength(1);
    const rootId = results[0]!.agentId;
    expect(store.getAgent(rootId)!.task).toBe('Prompt A');
    expect(store.listMessages('proactive-nightly').some((m) => m.content === 'Prompt B' && m.type === 'proactive')).toBe(true);
  });

  it('different triggers get different runs', async () => {
    const { router, store } = setup({ agents: { a: [respond('a')], b: [respond('b')] } });
    await Promise.all([router.route(fire('a', 'for a')), router.route(fire('b', 'for b'))]);
    expect(
      store
        .listRuns()
        .map((r) => r.id)
        .sort(),
    ).toEqual(['proactive-a', 'proactive-b']);
    expect(router.coordinators()).toHaveLength(2);
  });

  it('as ProactiveManager.onFire: fireNow routes through the router', async () => {
    const { router, store } = setup({ agents: { nightly: [respond('seen')] } });
    const manager = new ProactiveManager({
      triggers: [{ name: 'nightly', type: 'schedule', intervalMs: 60_000, promptTemplate: 'Run ${trigger_name} now.' }],
      onFire: router.onFire,
    });
    expect(await manager.fireNow('nightly')).toBe(true);
    expect(manager.stats().nightly).toMatchObject({ fired: 1, failed: 0 });
    expect(store.getAgent(store.getRun('proactive-nightly')!.rootId!)!.task).toBe('Run nightly now.');
  });

  it('a trigger name that cannot name an agent is refused with CONFIG_INVALID, and nothing is created', async () => {
    const { router, store } = setup({ agents: {} });
    const long = 'x'.repeat(65);
    await expect(router.route(fire(long, 'p'))).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    expect(store.listRuns()).toEqual([]);
    expect(router.coordinators()).toEqual([]);
  });

  it('close() shuts down every hosted run, not main; later fires are refused', async () => {
    const clock = new SimulatedClock();
    const model = scriptedModel({ agents: { lead: [respond('main here')], nightly: [respond('hi')] } }, { clock });
    const store = memoryStore();
    const main = createCoordinator({ model, store, clock, interactive: true });
    open.push({ close: () => main.shutdown() });
    const mainRoot = await main.start({ name: 'lead', task: 'Be the main run.' });
    await main.waitFor(mainRoot, ['waiting']);
    const router = new ProactiveRouter({ store, model, main, coordinatorOptions: { clock } });
    await router.route(fire('nightly', 'p'));
    const hosted = router.get('proactive-nightly')!;
    await router.close();
    expect(hosted.health().ok).toBe(false);
    expect(main.health().ok).toBe(true);
    expect(router.coordinators()).toEqual([]);
    await expect(router.route(fire('nightly', 'again'))).rejects.toMatchObject({ code: 'COORDINATOR_SHUT_DOWN' });
  });
});

describe('ProactiveRouter: named-agent targets', () => {
  it('a fire for an agent reaches that agent of the main run as a user message', async () => {
    const clock = new SimulatedClock();
    const model = scriptedModel({ agents: { lead: [respond('ready'), respond('on it')] } }, { clock });
    const store = memoryStore();
    const main = createCoordinator({ model, store, clock, interactive: true });
    open.push({ close: () => main.shutdown() });
    const rootId = await main.start({ name: 'lead', task: 'Stand by.' });
    await main.waitFor(rootId, ['waiting']);
    const router = new ProactiveRouter({ store, model, main, coordinatorOptions: { clock } });
    open.push(router);

    const answered = said(main, 'on it');
    const result = await router.route(fire('disk', 'The disk is 95 % full.', { agent: 'lead' }));
    expect(result).toMatchObject({ kind: 'sent', runId: main.runId, agentId: rootId });
    await answered;
    expect(store.listMessages(main.runId).find((m) => m.content === 'The disk is 95 % full.')).toMatchObject({ from: 'user', type: 'proactive' });
    // No proactive run was created for it.
    expect(store.listRuns().filter((r) => isProactiveRunId(r.id))).toEqual([]);
    expect(router.coordinators()).toEqual([]);
  });

  it('an unknown agent rejects with AGENT_NOT_FOUND; the manager counts it as failed', async () => {
    const clock = new SimulatedClock();
    const model = scriptedModel({ agents: { lead: [respond('ready')] } }, { clock });
    const store = memoryStore();
    const main = createCoordinator({ model, store, clock, interactive: true });
    open.push({ close: () => main.shutdown() });
    await main.waitFor(await main.start({ name: 'lead', task: 'Stand by.' }), ['waiting']);
    const router = new ProactiveRouter({ store, model, main, coordinatorOptions: { clock } });
    open.push(router);

    const err: unknown = await router.route(fire('disk', 'p', { agent: 'nobody' })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TroupeError);
    expect(err).toMatchObject({ code: 'AGENT_NOT_FOUND' });
    expect((err as Error).message).toContain('nobody');

    const manager = new ProactiveManager({
      triggers: [{ name: 'disk', type: 'schedule', intervalMs: 60_000, promptTemplate: 'p', target: { agent: 'nobody' } }],
      onFire: router.onFire,
    });
    await manager.fireNow('disk');
    expect(manager.stats().disk).toMatchObject({ fired: 1, failed: 1 });
  });

  it('without a main run, an agent target rejects with AGENT_NOT_FOUND saying so', async () => {
    const { router, store } = setup({ agents: {} });
    await expect(router.route(fire('disk', 'p', { agent: 'lead' }))).rejects.toThrow(/no main run/);
    await expect(router.route(fire('disk', 'p', { agent: 'lead' }))).rejects.toMatchObject({ code: 'AGENT_NOT_FOUND' });
    expect(store.listRuns()).toEqual([]);
  });
});

describe('ProactiveRouter after a restart', () => {
  it('resumeUnfinished() resumes the runs that were mid-work at the restart, not those parked on a user', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-router-')), 'serve.db');
    const first = openStore({ path });
    const one = setup(
      {
        agents: {
          build: [
            { tool: 'spawn_agent', args: { name: 'worker', task: 'compile' } },
            { tool: 'wait_for_agents', args: { reason: 'worker' } },
          ],
          // The worker's call never returns before the restart (its delay is on a clock nobody moves).
          worker: [{ tool: 'agent_finish', args: { summary: 'never' }, delayMs: 3_600_000 }],
          idle: [respond('nothing to do')],
        },
      },
      { store: first },
    );
    const build = await one.router.route(fire('build', 'Build it.'));
    const idle = await one.router.route(fire('idle', 'Anything?'));
    const buildRun = one.router.get('proactive-build')!;
    await buildRun.waitFor(build.agentId, ['waiting']);
    await one.router.get('proactive-idle')!.waitFor(idle.agentId, ['waiting']);
    expect(buildRun.list().find((a) => a.name === 'worker')!.status).toBe('running');
    await one.router.close();
    first.close();

    const second = openStore({ path });
    open.push({ close: () => second.close() });
    let built: Promise<TroupeEvent> | undefined;
    const two = setup(
      { agents: { worker: [{ tool: 'agent_finish', args: { summary: 'compiled' } }], build: [{ tool: 'respond_to_user', args: { message: 'Built.' } }] } },
      { store: second, onHost: (c) => void (built = said(c, 'Built.')) },
    );
    expect(await two.router.resumeUnfinished()).toEqual(['proactive-build']);
    expect(two.router.get('proactive-idle')).toBeUndefined();
    const resumed = two.router.get('proactive-build')!;
    await built;
    await resumed.waitFor(build.agentId, ['waiting']);
    expect(resumed.get(build.agentId).waitKind).toBe('user');
    expect(resumed.list().find((a) => a.name === 'worker')!.status).toBe('completed');
    two.model.assertComplete();
    // Nothing left mid-work: a second call resumes nothing.
    expect(await two.router.resumeUnfinished()).toEqual([]);
  });

  it('a new router over the reopened SQLite store resumes proactive-<name> instead of creating a run', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-router-')), 'serve.db');
    const first = openStore({ path });
    const one = setup({ agents: { nightly: [respond('before the restart')] } }, { store: first });
    const started = await one.router.route(fire('nightly', 'Check the nightly build.'));
    await one.router.get('proactive-nightly')!.waitFor(started.agentId, ['waiting']);
    await one.router.close();
    first.close();

    const second = openStore({ path });
    open.push({ close: () => second.close() });
    const hosted: string[] = [];
    let answered: Promise<TroupeEvent> | undefined;
    const two = setup(
      { agents: { nightly: [respond('after the restart')] } },
      {
        store: second,
        // Called before the message is sent: subscribe there, so the answer cannot be missed.
        onHost: (c, how) => {
          hosted.push(`${c.runId} ${how}`);
          answered = said(c, 'after the restart');
        },
      },
    );
    const result = await two.router.route(fire('nightly', 'It failed again.'));
    expect(result).toMatchObject({ kind: 'resumed', runId: 'proactive-nightly', agentId: started.agentId });
    expect(hosted).toEqual(['proactive-nightly resumed']);
    await answered;
    expect(second.listRuns().map((r) => r.id)).toEqual(['proactive-nightly']);
    expect(second.listAgents('proactive-nightly')).toHaveLength(1);
    expect(userTexts(second.loadSession(started.agentId)).at(-1)).toContain('It failed again.');
    expect(two.model.calls).toHaveLength(1);
  });
});
