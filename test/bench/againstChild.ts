/**
 * One process of `npm run bench:against` (against.ts): loads a compiled troupe from the dist/
 * folder it is given — this checkout's, or an older commit's — and measures it through the public
 * API, as fanout.bench.ts does: `solo`, µs per in-memory turn of one agent (1,000 tool turns with
 * 200-character results, instant model) in the steady state after 100 runs, median of 40 runs; or
 * `fanout`, ms for a durable (SQLite FULL) team of 1,000 children × 5 turns at default concurrency,
 * median of 3 runs after one. Prints one JSON line. Only entry points that every version since the
 * first has are used (the coordinator lived in src/coordinator/ before it moved to src/host/).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

interface Call {
  name: string;
  args: object;
}
interface Request {
  turn: number;
  agent: { parentId: string | null };
  messages: { role: string; content?: unknown }[];
}
interface Coordinator {
  start(spec: { name: string; task: string }): Promise<string>;
  waitFor(id: string, statuses: string[]): Promise<{ status: string }>;
  shutdown(): Promise<void>;
}

const [dist, metric] = process.argv.slice(2);
if (!dist || (metric !== 'solo' && metric !== 'fanout')) {
  process.stderr.write('usage: node againstChild.js <dist folder> solo|fanout\n');
  process.exit(2);
}
const load = async (path: string) => (await import(pathToFileURL(join(dist, path)).href)) as Record<string, (...args: never[]) => unknown>;
const hostPath = existsSync(join(dist, 'src/host/createCoordinator.js')) ? 'src/host/createCoordinator.js' : 'src/coordinator/createCoordinator.js';
const createCoordinator = (await load(hostPath)).createCoordinator as unknown as (options: object) => Coordinator;
const defineTool = (await load('src/tools/defineTool.js')).defineTool as unknown as (tool: object) => object;
const openStore = (await load('src/store/sqliteStore.js')).openStore as unknown as (o: { path: string }) => { close(): void };

const RESULT = 'r'.repeat(200);
const work = defineTool({ name: 'work', description: 'does a step', parameters: { type: 'object' }, execute: () => RESULT });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function instantModel(answer: (request: Request) => Call[]) {
  let seq = 0;
  const model = {
    turns: 0,
    complete(request: Request) {
      model.turns++;
      const toolCalls = answer(request).map((c) => ({ id: `c${++seq}`, name: c.name, arguments: JSON.stringify(c.args) }));
      return Promise.resolve({ text: null, toolCalls });
    },
  };
  return model;
}

async function team(model: ReturnType<typeof instantModel>, limits: object, store?: object): Promise<number> {
  const c = createCoordinator({ model, tools: [work], limits, ...(store ? { store } : {}) });
  const t0 = performance.now();
  const id = await c.start({ name: 'lead', task: 'work' });
  const root = await c.waitFor(id, ['completed', 'failed', 'crashed', 'stopped']);
  const ms = performance.now() - t0;
  if (root.status !== 'completed') throw new Error(`root ended ${root.status}`);
  await c.shutdown();
  return ms;
}

if (metric === 'solo') {
  const TURNS = 1_000;
  const perTurn: number[] = [];
  for (let i = 0; i < 140; i++) {
    const model = instantModel((r) => [r.turn < TURNS ? { name: 'work', args: {} } : { name: 'finish', args: { summary: 'done' } }]);
    perTurn.push(((await team(model, { maxTurns: TURNS + 1 })) * 1_000) / model.turns);
  }
  process.stdout.write(`${JSON.stringify({ metric, value: median(perTurn.slice(100)), cold: median(perTurn.slice(0, 25)) })}\n`);
} else {
  const fanout = () =>
    instantModel((r) => {
      if (r.agent.parentId !== null) return [r.turn < 5 ? { name: 'work', args: {} } : { name: 'agent_finish', args: { summary: 'ok' } }];
      if (r.turn === 1) return Array.from({ length: 1_000 }, (_, i) => ({ name: 'spawn_agent', args: { name: `w${i}`, task: 'work' } }));
      const last = r.messages.findLast((m) => m.role === 'tool');
      const done = typeof last?.content === 'string' && last.content.includes('no_active_agents');
      return [done ? { name: 'finish', args: { summary: 'all done' } } : { name: 'wait_for_agents', args: { reason: 'reports' } }];
    });
  const ms: number[] = [];
  for (let i = 0; i < 4; i++) {
    const dir = mkdtempSync(join(tmpdir(), 'troupe-against-'));
    const store = openStore({ path: join(dir, 'b.db') });
    ms.push(await team(fanout(), { maxChildren: 1_000, maxAgents: 1_001, maxDepth: 1 }, store));
    try {
      store.close();
    } catch {
      // Versions whose shutdown closes the store it was given.
    }
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${JSON.stringify({ metric, value: median(ms.slice(1)), cold: ms[0] })}\n`);
}
