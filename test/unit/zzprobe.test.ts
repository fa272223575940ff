import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'vitest';
import { createCoordinator } from '/work/main/src/host/createCoordinator.js';
import type { Model, ModelRequest, ModelTurn } from '/work/main/src/model/types.js';
import { openStore } from '/work/main/src/store/sqliteStore.js';
import { portOf } from '/work/main/src/store/port.js';
import { defineTool } from '/work/main/src/tools/defineTool.js';

const CHILDREN = 1000, CHILD_TURNS = 5;
const noop = defineTool({ name: 'noop', description: 'd', parameters: { type: 'object' }, execute: () => 'x'.repeat(200) });
function model(): Model & { turns: number } {
  let seq = 0;
  const m = { turns: 0, complete(request: ModelRequest): Promise<ModelTurn> {
    m.turns++;
    let calls: { name: string; args: object }[];
    if (request.agent.parentId !== null) calls = [request.turn < CHILD_TURNS ? { name: 'noop', args: {} } : { name: 'agent_finish', args: { summary: 'ok' } }];
    else if (request.turn === 1) calls = Array.from({ length: CHILDREN }, (_, i) => ({ name: 'spawn_agent', args: { name: `w${i}`, task: 'work' } }));
    else { const last = request.messages.findLast((x) => x.role === 'tool'); const done = last?.role === 'tool' && last.content.includes('no_active_agents'); calls = [done ? { name: 'finish', args: { summary: 'all done' } } : { name: 'wait_for_agents', args: { reason: 'r' } }]; }
    return Promise.resolve({ text: null, toolCalls: calls.map((c) => ({ id: `c${++seq}`, name: c.name, arguments: JSON.stringify(c.args) })) });
  } };
  return m;
}
for (const durable of [false, true, true]) it(`fanout durable=${durable}`, async () => {
  const store = durable ? openStore({ path: join(mkdtempSync(join(tmpdir(), 'p-')), 'b.db') }) : undefined;
  let commits = 0;
  let port: any;
  if (store) { const p = portOf(store); port = { ...p, get boot() { return p.boot; }, commit: (ops: any) => { commits++; return p.commit(ops); } }; for (const k of Object.keys(p)) if (k !== 'commit' && k !== 'boot') port[k] = (p as any)[k]; }
  const m = model();
  const c = createCoordinator({ model: m, tools: [noop], limits: { maxChildren: CHILDREN, maxAgents: CHILDREN + 1, maxDepth: 1 }, ...(store ? { store: port } : {}) });
  const t0 = performance.now();
  const id = await c.start({ name: 'lead', task: 'work' });
  const r = await c.waitFor(id, ['completed', 'failed', 'crashed', 'stopped']);
  const ms = performance.now() - t0;
  console.log(`durable=${durable} ${r.status} ${ms.toFixed(0)} ms, ${m.turns} turns, commits=${commits}`);
  await c.shutdown(); store?.close();
}, 120000);
