/**
 * The demo's model: the real openai client against the bundled fake server, replaying
 * fixtures/scenarios/demo.json. Its story holds however the run is cut and resumed: the lead step
 * marked `awaits` (children's names) — reading every report in full, which trips the reserve — is
 * served only once those children's reports are in the lead's request; until then the lead is
 * answered with a cheap wait. Without it, a resumed demo could trip the reserve before scout
 * reports, stop scout, and still finish with "scout mapped …".
 * @module
 */
import { readFileSync } from 'node:fs';
import { TroupeError } from '../errors.js';
import { openaiModel } from '../model/openaiModel.js';
import type { Script, ScriptStep } from '../model/scriptedModel.js';
import type { Model, ModelPrice } from '../model/types.js';
import { createFakeOpenAIServer, type FakeOpenAIServer, type FakeReply, type FakeRequest } from '../testing/fakeOpenAIServer.js';
import { agentNameOf, repliesFromScript, routeByAgent } from '../testing/wireScript.js';
import { packageFile } from './paths.js';

export const DEMO_MODEL = 'troupe-demo';
export const DEMO_PRICE: ModelPrice = { inputPer1M: 2, cachedInputPer1M: 0.5, outputPer1M: 8 };

/** The bundled demo scenario (works from src/cli and dist/src/cli). */
export function demoScript(): Script {
  const path = packageFile('fixtures/scenarios/demo.json');
  if (!path) throw new TroupeError('INTERNAL', 'The demo scenario fixtures/scenarios/demo.json is missing from this install');
  return JSON.parse(readFileSync(path, 'utf8')) as Script;
}

type DemoStep = ScriptStep & { awaits?: string[] };

/** A wait that costs next to nothing: the lead waits again for the reports its next step reads. */
const WAIT: FakeReply = {
  message: { toolCalls: [{ name: 'wait_for_agents', arguments: { reason: 'the reports I still need' } }] },
  usage: { promptTokens: 100, completionTokens: 10 },
};

/** The summary each child's scripted `agent_finish` reports (what shows in its parent's request). */
function reportTexts(script: Script): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, steps] of Object.entries(script.agents)) {
    const summary = steps.flatMap((s) => (s.tool === 'agent_finish' ? [(s.args as { summary?: unknown } | undefined)?.summary] : []))[0];
    if (typeof summary === 'string') out.set(name, summary);
  }
  return out;
}

/**
 * The routed wire script with `awaits` honoured: per agent, the next step is
 * `steps.length - remaining` (the demo's agents whose steps may await have no error steps).
 */
export function holdForReports(script: Script, answered: Record<string, number> = {}): (request: FakeRequest) => FakeReply {
  const routed = routeByAgent(repliesFromScript(script, answered));
  const reports = reportTexts(script);
  return (request) => {
    const name = agentNameOf(request);
    const steps = (script.agents[name] ?? []) as DemoStep[];
    const next = steps[steps.length - (routed.remaining()[name] ?? 0)];
    if (next?.awaits) {
      // JSON-escaped as the request body carries it.
      const body = JSON.stringify(request.body);
      const missing = next.awaits.filter((child) => !body.includes(JSON.stringify(reports.get(child) ?? `\u0000${child}`).slice(1, -1)));
      if (missing.length > 0) return WAIT;
    }
    return routed.script(request);
  };
}

export async function demoModel(script: Script, answered: Record<string, number> = {}): Promise<{ model: Model; server: FakeOpenAIServer }> {
  const server = await createFakeOpenAIServer(holdForReports(script, answered), { model: DEMO_MODEL });
  const model = openaiModel({ model: DEMO_MODEL, baseURL: server.url, apiKey: 'demo-key', stream: true, maxOutputTokens: 1024 });
  return { model, server };
}
