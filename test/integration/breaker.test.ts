/**
 * The endpoint's circuit breaker with a team (issue 34 item 1): 20 agents on an endpoint that
 * refuses connections make no call while it is open but one probe per cooldown, and all continue
 * once it answers; a permanent outage ends each agent once with PROVIDER_CIRCUIT_OPEN.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { ProviderError } from '../../src/errors.js';
import { scriptedModel, type ScriptStep } from '../../src/model/scriptedModel.js';
import type { Model } from '../../src/model/types.js';
import type { TroupeEvent } from '../../src/host/views/views.js';
import { flush, team, TERMINAL } from '../helpers/team.js';

const WORKERS = 19;
const names = Array.from({ length: WORKERS }, (_, i) => `w${i}`);
const breaker = { failureThreshold: 5, cooldownMs: 30_000, openTimeoutMs: 180_000 };

/** A lead that spawns 19 workers in one turn, waits, finishes; each worker reports in one turn. */
function script(): Record<string, ScriptStep[]> {
  const wait: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'the workers' } };
  return {
    lead: [
      { tools: names.map((name) => ({ name: 'spawn_agent', args: { name, task: `Part ${name}.` } })) },
      ...Array.from({ length: WORKERS + 2 }, () => wait),
      { tool: 'finish', args: { summary: 'all parts done' } },
    ],
    ...Object.fromEntries(names.map((name) => [name, [{ tool: 'agent_finish', args: { summary: `${name} done` } }]])),
  };
}

/**
 * The scripted team behind an endpoint that refuses connections from its second call on, until
 * `upAt` (never, if null). Every attempt's time is kept.
 */
function flakyEndpoint(clock: SimulatedClock, upAt: number | null) {
  const inner = scriptedModel({ agents: script() }, { clock });
  const attempts: { at: number; refused: boolean }[] = [];
  const model: Model = {
    name: 'flaky',
    endpoint: 'http://127.0.0.1:9/v1#test',
    complete(request, options) {
      const at = clock.now();
      const refused = attempts.length > 0 && (upAt === null || at < upAt);
      attempts.push({ at, refused });
      if (refused) return Promise.reject(new ProviderError('PROVIDER_CONNECTION', 'connect ECONNREFUSED 127.0.0.1:9'));
      return inner.complete(request, options);
    },
  };
  return { model, attempts };
}

function breakerEvents(events: TroupeEvent[]) {
  return events.flatMap((e) => (e.type === 'provider.breaker' ? [{ state: e.state, at: e.at }] : []));
}

/** The model queue, smaller than the team: calls queued behind it when the breaker opens never reach the endpoint. */
const QUEUE = 8;

describe('the circuit breaker with a team of 20', () => {
  it('refused for 60 s: no call while open but one probe per cooldown, and every agent continues after it closes', async () => {
    const clock = new SimulatedClock();
    const { model, attempts } = flakyEndpoint(clock, 60_000);
    const t = team({ agents: {} }, { clock, model, breaker, interactive: false, limits: { maxChildren: WORKERS }, concurrency: { model: QUEUE } });
    const events: TroupeEvent[] = [];
    t.c.subscribe((e) => events.push(e));
    const rootId = await t.c.start({ name: 'lead', task: 'Split the work.' });
    await t.advance(120_000, 1_000);
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    expect(t.c.list().filter((a) => a.status === 'completed')).toHaveLength(WORKERS + 1);

    const states = breakerEvents(events);
    expect(states.map((s) => s.state)).toEqual(['open', 'halfOpen', 'open', 'halfOpen', 'closed']);
    const openedAt = states[0]!.at;
    const closedAt = states.at(-1)!.at;
    // While it was open, the only calls were the probes, a cooldown apart.
    const during = attempts.filter((a) => a.at > openedAt && a.at < closedAt);
    expect(during).toEqual([{ at: openedAt + 30_000, refused: true }]);
    expect(attempts.filter((a) => a.at === closedAt && !a.refused).length).toBeGreaterThanOrEqual(1);
    expect(closedAt).toBe(openedAt + 60_000);
    // Refused calls before it opened: the 5 that opened it and at most the QUEUE the model queue had
    // in flight then; the queued ones went back to the gate without a call.
    const before = attempts.filter((a) => a.refused && a.at <= openedAt).length;
    expect(before).toBeGreaterThanOrEqual(breaker.failureThreshold);
    expect(before).toBeLessThanOrEqual(breaker.failureThreshold + QUEUE);
    expect(
      t.store
        .listEvents(t.c.runId)
        .filter((e) => e.type === 'provider.breaker')
        .map((e) => e.data.state),
    ).toEqual(states.map((s) => s.state));
    await t.c.shutdown();
  });

  it('a permanent outage: after openTimeoutMs every agent ends failed once, with PROVIDER_CIRCUIT_OPEN', async () => {
    const clock = new SimulatedClock();
    const { model, attempts } = flakyEndpoint(clock, null);
    const t = team({ agents: {} }, { clock, model, breaker, interactive: false, limits: { maxChildren: WORKERS }, concurrency: { model: QUEUE } });
    const events: TroupeEvent[] = [];
    t.c.subscribe((e) => events.push(e));
    const rootId = await t.c.start({ name: 'lead', task: 'Split the work.' });
    await t.advance(breaker.openTimeoutMs + 60_000, 5_000);
    await flush();
    const agents = t.c.list();
    expect(agents).toHaveLength(WORKERS + 1);
    expect(agents.map((a) => [a.status, a.error?.code])).toEqual(agents.map(() => ['failed', 'PROVIDER_CIRCUIT_OPEN']));
    expect(agents.find((a) => a.id === rootId)?.error?.message).toContain('unreachable');
    // One probe per cooldown while open: no agent burned its retries against a dead endpoint.
    const openedAt = breakerEvents(events)[0]!.at;
    const probes = attempts.filter((a) => a.at > openedAt).map((a) => a.at - openedAt);
    expect(probes).toEqual([30_000, 60_000, 90_000, 120_000, 150_000]);
    await t.c.shutdown();
  });
});
