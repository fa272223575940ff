/**
 * Agent profiles (issue 34 item 4): a child spawned with a profile is answered by the profile's
 * model, offered only its tools, told its prompt, priced as its model, and keeps it across a restart.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type Script, type ScriptedModel } from '../../src/model/scriptedModel.js';
import type { Model } from '../../src/model/types.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { troupe, workdir } from '../helpers/cli.js';
import { flush, TERMINAL } from '../helpers/team.js';

const tool = (name: string) =>
  defineTool({
    name,
    description: `The ${name} tool.`,
    parameters: { type: 'object', properties: {}, additionalProperties: false },
    execute: () => ({ ok: true }),
  });
const tools = [tool('lookup'), tool('write_file')];

/** A scripted model with a name and a price of its own: the ledger prices its calls' tokens. */
const priced = (name: string, inputPer1M: number, script: ScriptedModel): Model => ({
  name,
  price: { inputPer1M, outputPer1M: 0 },
  complete: (request, options) => script.complete(request, options),
});
const MTOK = { inputTokens: 1_000_000, outputTokens: 0 };

const PROFILES = {
  cheap: { description: 'Quick lookups on the small model.', systemPrompt: 'You only look things up.', tools: ['lookup'], limits: { maxTurns: 5 } },
};

describe('profiles', () => {
  it('a child spawned with profile cheap: the cheap model answers it, with its tools and prompt, priced as cheap and metered as main', async () => {
    const main = scriptedModel({
      agents: {
        lead: [
          { tool: 'spawn_agent', args: { name: 'scout', task: 'look k up', profile: 'cheap' }, usage: MTOK },
          { tool: 'wait_for_agents', args: { reason: 'scout' }, usage: MTOK },
          { tool: 'finish', args: { summary: 'done' }, usage: MTOK },
        ],
      },
    });
    const cheap = scriptedModel({
      agents: {
        scout: [
          { tool: 'lookup', args: {}, usage: MTOK },
          { tool: 'agent_finish', args: { summary: 'found' }, usage: MTOK },
        ],
      },
    });
    const store = memoryStore();
    const c = createCoordinator({
      model: priced('big', 10, main),
      store,
      tools,
      systemPrompt: 'Run prompt.',
      profiles: { ...PROFILES, cheap: { ...PROFILES.cheap, model: priced('small', 1, cheap) } },
    });
    const rootId = await c.start({ name: 'lead', task: 'the task' });
    expect(await c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });

    // The root's spawn_agent lists the profile, and the root has every tool.
    const leadRequest = main.calls[0]!.request;
    const spawn = leadRequest.tools.find((t) => t.name === 'spawn_agent')!;
    expect(spawn.description).toContain('cheap: Quick lookups on the small model.');
    expect(leadRequest.tools.map((t) => t.name)).toEqual(expect.arrayContaining(['lookup', 'write_file']));
    expect(leadRequest.system).not.toContain('You only look things up.');

    // The scout's calls all went to the cheap model (none to the main one), with only the profile's user tool.
    expect(main.calls.map((call) => call.agentName)).toEqual(['lead', 'lead', 'lead']);
    expect(cheap.calls.map((call) => call.agentName)).toEqual(['scout', 'scout']);
    const scoutRequest = cheap.calls[0]!.request;
    expect(scoutRequest.tools.map((t) => t.name)).toContain('lookup');
    expect(scoutRequest.tools.map((t) => t.name)).not.toContain('write_file');
    expect(scoutRequest.tools.map((t) => t.name)).toContain('spawn_agent');
    expect(scoutRequest.system).toContain('Run prompt.\n\nYou only look things up.');

    // Each row priced with the model that made the call, its purpose kept.
    const rows = store.listUsage(c.runId).map((u) => `${store.getAgent(u.agentId)?.name} ${u.purpose} ${u.model} ${u.costUsd}`);
    expect(rows.sort()).toEqual(['lead main big 10', 'lead main big 10', 'lead main big 10', 'scout main small 1', 'scout main small 1']);
    expect(store.getAgent(c.list().find((a) => a.name === 'scout')!.id)?.terms).toEqual({ profile: 'cheap' });
    main.assertComplete();
    cheap.assertComplete();
    await c.shutdown();
  });

  it("each chat span names the model the call went to: the profile's for its agent (OpenTelemetry gen_ai.request.model)", async () => {
    const main = scriptedModel({
      agents: {
        lead: [
          { tool: 'spawn_agent', args: { name: 'scout', task: 'look k up', profile: 'cheap' } },
          { tool: 'wait_for_agents', args: { reason: 'scout' } },
          { tool: 'finish', args: { summary: 'done' } },
        ],
      },
    });
    const cheap = scriptedModel({ agents: { scout: [{ tool: 'agent_finish', args: { summary: 'found' } }] } });
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const c = createCoordinator({
      model: priced('big', 10, main),
      tools,
      profiles: { ...PROFILES, cheap: { ...PROFILES.cheap, model: priced('small', 1, cheap) } },
      telemetry: { tracerProvider },
    });
    const rootId = await c.start({ name: 'lead', task: 'the task' });
    expect(await c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    await c.shutdown();
    const chats = exporter.getFinishedSpans().filter((s) => s.name.startsWith('chat '));
    const byAgent = (name: string) =>
      chats.filter((s) => s.attributes['gen_ai.agent.name'] === name).map((s) => [s.name, s.attributes['gen_ai.request.model']]);
    expect(byAgent('lead')).toEqual(Array.from({ length: 3 }, () => ['chat big', 'big']));
    expect(byAgent('scout')).toEqual([['chat small', 'small']]);
  });

  it('an unknown profile is a tool error the model reads, and nothing is spawned', async () => {
    const model = scriptedModel({
      agents: {
        lead: [
          { tool: 'spawn_agent', args: { name: 'scout', task: 't', profile: 'nope' } },
          { tool: 'finish', args: { summary: 'done' } },
        ],
      },
    });
    const c = createCoordinator({ model, tools, profiles: PROFILES });
    const rootId = await c.start({ name: 'lead', task: 'the task' });
    expect(await c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    const result = JSON.stringify(model.calls[1]!.request.messages.at(-1));
    expect(result).toContain('PROFILE_UNKNOWN');
    expect(c.list().map((a) => a.name)).toEqual(['lead']);
    await expect(c.start({ name: 'again', task: 't', profile: 'nope' })).rejects.toMatchObject({ code: 'PROFILE_UNKNOWN' });
    await c.shutdown();
  });

  it("a profile's maxTurns is the agent's own", async () => {
    const model = scriptedModel({
      agents: {
        lead: [
          { tool: 'spawn_agent', args: { name: 'scout', task: 't', profile: 'cheap' } },
          { tool: 'wait_for_agents', args: { reason: 'scout' } },
          { tool: 'finish', args: { summary: 'done' } },
        ],
        scout: [{ tool: 'lookup' }, { tool: 'lookup' }, { tool: 'lookup' }],
      },
    });
    const c = createCoordinator({ model, tools, profiles: { cheap: { ...PROFILES.cheap, limits: { maxTurns: 2 } } } });
    const rootId = await c.start({ name: 'lead', task: 'the task' });
    await c.waitFor(rootId, TERMINAL);
    expect(c.list().find((a) => a.name === 'scout')).toMatchObject({ status: 'stopped', stopReason: 'maxTurns' });
    await c.shutdown();
  });
});

describe('profiles across a restart', () => {
  const dbPath = () => join(mkdtempSync(join(tmpdir(), 'troupe-')), 'run.db');
  const script: Script = {
    agents: {
      lead: [
        { tool: 'spawn_agent', args: { name: 'scout', task: 'look k up', profile: 'cheap' } },
        { tool: 'wait_for_agents', args: { reason: 'scout' } },
      ],
    },
  };

  async function crashWithScoutRunning(path: string, clock: SimulatedClock) {
    const store = openStore({ path });
    // The scout is mid-call (a long delay) when the process dies.
    const cheap = scriptedModel({ agents: { scout: [{ delayMs: 60_000, tool: 'agent_finish', args: { summary: 'never' } }] } }, { clock });
    const c = createCoordinator({ model: scriptedModel(script, { clock }), store, clock, tools, profiles: { cheap: { ...PROFILES.cheap, model: cheap } } });
    const rootId = await c.start({ name: 'lead', task: 'the task' });
    while (cheap.calls.length === 0) await flush();
    await c.shutdown();
    store.close();
    return rootId;
  }

  it("the respawned agent keeps its profile's model, tools and prompt", async () => {
    const path = dbPath();
    const clock = new SimulatedClock();
    const rootId = await crashWithScoutRunning(path, clock);
    const store = openStore({ path });
    const main = scriptedModel({ agents: { lead: [{ tool: 'finish', args: { summary: 'done' } }] } }, { clock });
    const cheap = scriptedModel({ agents: { scout: [{ tool: 'agent_finish', args: { summary: 'found after the restart' } }] } }, { clock });
    const c = await resumeCoordinator({ store, model: main, clock, tools, profiles: { cheap: { ...PROFILES.cheap, model: cheap } } });
    expect(await c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    expect(cheap.calls.map((call) => call.agentName)).toEqual(['scout']);
    expect(cheap.calls[0]!.request.tools.map((t) => t.name)).not.toContain('write_file');
    expect(cheap.calls[0]!.request.system).toContain('You only look things up.');
    expect(main.calls.map((call) => call.agentName)).toEqual(['lead']);
    await c.shutdown();
    store.close();
  });

  it('a profile no longer configured at resume ends the agent with PROFILE_UNKNOWN (crashed), not a default', async () => {
    const path = dbPath();
    const clock = new SimulatedClock();
    const rootId = await crashWithScoutRunning(path, clock);
    const store = openStore({ path });
    const main = scriptedModel(
      { agents: { lead: [{ tool: 'finish', args: { summary: 'done' } }], scout: [{ tool: 'agent_finish', args: { summary: 'wrongly on the default' } }] } },
      { clock },
    );
    const c = await resumeCoordinator({ store, model: main, clock, tools });
    expect(await c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    expect(c.list().find((a) => a.name === 'scout')).toMatchObject({ status: 'crashed', error: { code: 'PROFILE_UNKNOWN' } });
    expect(main.calls.map((call) => call.agentName)).toEqual(['lead']);
    await c.shutdown();
    store.close();
  });

  it("troupe.config.json's profiles: spawn_agent names one, the child's calls go to its model with its prompt", async () => {
    const toolCall = (name: string, args: Record<string, unknown>) => ({ message: { toolCalls: [{ name, arguments: args }] } });
    let leadCalls = 0;
    await using server = await createFakeOpenAIServer((request) => {
      const body = request.body as { model: string };
      if (body.model === 'small') return toolCall('agent_finish', { summary: 'found k' });
      leadCalls++;
      if (leadCalls === 1) return toolCall('spawn_agent', { name: 'scout', task: 'look k up', profile: 'cheap' });
      if (leadCalls === 2) return toolCall('wait_for_agents', { reason: 'scout' });
      return toolCall('finish', { summary: 'k found' });
    });
    const cwd = workdir();
    writeFileSync(
      join(cwd, 'troupe.config.json'),
      JSON.stringify({
        model: 'big',
        baseURL: server.url,
        profiles: { cheap: { description: 'Quick lookups on the small model.', systemPrompt: 'You only look things up.', model: 'small' } },
      }),
    );
    const r = await troupe(['run', 'Find k', '--json'], cwd, { OPENAI_API_KEY: 'sk-x' });
    expect(r.code, r.stderr).toBe(0);
    const bodies = server.requests.map(
      (q) => q.body as { model: string; messages: { role: string; content: string }[]; tools: { function: { name: string; description: string } }[] },
    );
    expect(bodies.map((b) => b.model).sort()).toEqual(['big', 'big', 'big', 'small']);
    expect(bodies[0]!.tools.find((t) => t.function.name === 'spawn_agent')!.function.description).toContain('cheap: Quick lookups on the small model.');
    expect(bodies.find((b) => b.model === 'small')!.messages[0]!.content).toContain('You only look things up.');
    expect(bodies[0]!.messages[0]!.content).not.toContain('You only look things up.');
  });
});
