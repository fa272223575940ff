/**
 * Benchmark (not part of `npm test`; run `npm run bench`): durability costs of the SQLite store.
 *
 * - durable overhead per turn: one agent's tool turns on a real file, against bare better-sqlite3
 *   writes of the same rows in the same two transactions per turn, in FULL and NORMAL.
 * - flatness: per-turn time at turns 10-60 vs 1,000-1,050 of one agent (append-only sessions).
 * - resume: a database of 10,000 agents in mixed parked statuses until all are respawned; heap
 *   per parked agent (needs --expose-gc, set for the bench project).
 */
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, bench, describe } from 'vitest';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import type { Model, ModelRequest } from '../../src/model/types.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { newAgentRow } from '../../src/store/rows.js';
import { openStore } from '../../src/store/sqliteStore.js';
import type { AgentStatus } from '../../machines/types.js';
import { defineTool } from '../../src/tools/defineTool.js';

const tempDb = () => join(mkdtempSync(join(tmpdir(), 'troupe-bench-')), 'b.db');
const noop = defineTool({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, execute: () => 'ok' });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

/** One agent: `turns` no-op tool turns, then finish. Records when each model call starts. */
function soloModel(turns: number, starts: number[]): Model {
  let seq = 0;
  return {
    complete(request: ModelRequest) {
      starts.push(performance.now());
      const last = request.turn >= turns;
      return Promise.resolve({
        text: null,
        toolCalls: [{ id: `c${++seq}`, name: last ? 'finish' : 'noop', arguments: last ? '{"summary":"done"}' : '{}' }],
      });
    },
  };
}

async function troupeTurns(sync: 'FULL' | 'NORMAL', turns: number): Promise<number[]> {
  const store = openStore({ path: tempDb(), synchronous: sync });
  const starts: number[] = [];
  const c = createCoordinator({ model: soloModel(turns, starts), store, tools: [noop], limits: { maxTurns: turns + 1 } });
  const id = await c.start({ name: 'solo', task: 'work' });
  await c.waitFor(id, ['completed', 'failed', 'crashed', 'stopped']);
  await c.shutdown();
  store.close();
  return starts.slice(1).map((t, i) => (t - starts[i]!) * 1_000); // µs per turn
}

/** The same rows a troupe turn writes, in the same two transactions, with bare prepared statements. */
function bareTurns(sync: 'FULL' | 'NORMAL', turns: number): number[] {
  const db = new Database(tempDb());
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${sync}`);
  db.pragma('foreign_keys = ON');
  db.exec(MIGRATIONS[0]!.sql);
  db.prepare(`INSERT INTO runs VALUES ('r', 0, 0, 'a', '{}')`).run();
  db.prepare(`INSERT INTO agents VALUES ('a', 'r', 'solo', NULL, 0, 'work', '[]', 'running', 0, 0, '{}', 0, 0, 1)`).run();
  const item = db.prepare('INSERT INTO session_items VALUES (?, ?, ?, ?)');
  const usage = db.prepare(
    `INSERT INTO usage (run_id, agent_id, purpose, model, input_tokens, output_tokens, cached_input_tokens, cost_usd, at) VALUES ('r', 'a', 'main', 'm', 0, 0, 0, 0, ?)`,
  );
  const agent = db.prepare(`UPDATE agents SET status = 'running', notice_claimed = 0, stint = 0, state = ?, updated_at = ?, boot = 1 WHERE id = 'a'`);
  const tx = db.transaction((fn: () => void) => fn());
  const answer = JSON.stringify({ role: 'assistant', content: null, toolCalls: [{ id: 'c1', name: 'noop', arguments: '{}' }] });
  const result = JSON.stringify({ role: 'tool', toolCallId: 'c1', name: 'noop', content: '"ok"' });
  const state = JSON.stringify({ turns: 1, stintTurns: 1, recoveries: 0, lastTool: 'noop', waitKind: null, error: null, report: null });
  const times: number[] = [];
  for (let i = 0; i < turns; i++) {
    const t0 = performance.now();
    tx.immediate(() => {
      item.run('a', 2 * i + 1, answer, 'abcdef0123456789');
      usage.run(i);
    });
    tx.immediate(() => {
      item.run('a', 2 * i + 2, result, 'abcdef0123456789');
      agent.run(state, i);
    });
    times.push((performance.now() - t0) * 1_000);
  }
  db.close();
  return times;
}

// vitest's bench runner only runs top-level afterAll hooks: each block registers a reporter here.
const reporters: (() => string)[] = [];

describe('durable overhead per turn (one agent, instant model)', () => {
  for (const sync of ['FULL', 'NORMAL'] as const) {
    const turns = sync === 'FULL' ? 400 : 1_500;
    const troupe: number[] = [];
    const bare: number[] = [];
    bench(
      `${sync}: troupe turn vs bare inserts of the same rows`,
      async () => {
        // Steady state: skip the first 100 turns (JIT warm-up).
        troupe.push(median((await troupeTurns(sync, turns)).slice(100)));
        bare.push(median(bareTurns(sync, turns).slice(100)));
      },
      { iterations: 3, warmupIterations: 1, time: 0 },
    );
    reporters.push(() => {
      const t = median(troupe);
      const b = median(bare);
      return `${sync.padEnd(6)} troupe ${t.toFixed(0).padStart(5)} µs/turn, bare inserts ${b.toFixed(0).padStart(5)} µs/turn: ${(t / b).toFixed(2)}× (target ≤ 2.0×)`;
    });
  }
});

describe('per-turn cost stays flat as the session grows', () => {
  const early: number[] = [];
  const late: number[] = [];
  bench(
    'NORMAL: turns 10-60 vs 1,000-1,050 of one agent',
    async () => {
      const times = await troupeTurns('NORMAL', 1_100);
      early.push(median(times.slice(10, 60)));
      late.push(median(times.slice(1_000, 1_050)));
    },
    { iterations: 3, warmupIterations: 1, time: 0 },
  );
  reporters.push(
    () => `flatness: turn ~10 ${median(early).toFixed(0)} µs, turn ~1,000 ${median(late).toFixed(0)} µs (${(median(late) / median(early)).toFixed(2)}×)`,
  );
});

describe('resume a database of 10,000 agents', () => {
  const N = 10_000;
  const STATUSES: AgentStatus[] = ['waiting', 'stalled', 'completed', 'stopped', 'failed', 'crashed', 'budgetPaused'];
  const path = tempDb();
  const seed = openStore({ path, synchronous: 'NORMAL' });
  seed.transaction(() => {
    const budget = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
    seed.insertRun({ id: 'run', createdAt: 0, interactive: true, rootId: 'root', budget });
    const root = newAgentRow({ id: 'root', runId: 'run', name: 'lead', parentId: null, depth: 0, task: 'lead', skills: [] }, 0);
    seed.registerAgent({ ...root, status: 'waiting', waitKind: 'user' }, [{ role: 'user', content: 'go' }]);
    for (let i = 1; i < N; i++) {
      const status = STATUSES[i % STATUSES.length]!;
      const row = newAgentRow({ id: `a${i}`, runId: 'run', name: `w${i}`, parentId: i < 100 ? 'root' : `a${(i % 99) + 1}`, depth: i < 100 ? 1 : 2, task: 'work', skills: [] }, i);
      const waiting = status === 'waiting';
      seed.registerAgent(
        { ...row, status, waitKind: waiting ? 'agents' : null, waitingSince: waiting ? 0 : null, waitTimeoutMs: waiting ? 300_000 : null, noticeClaimed: !waiting && status !== 'stalled' && status !== 'budgetPaused' },
        [{ role: 'user', content: `task ${i}` }],
      );
    }
  });
  seed.close();
  const model: Model = { complete: () => Promise.reject(new Error('no model call expected while parked')) };
  const ms: number[] = [];
  const kb: number[] = [];
  const gc = (globalThis as { gc?: () => void }).gc;
  bench(
    `${N} agents in mixed parked statuses until all are respawned`,
    async () => {
      gc?.();
      const before = process.memoryUsage().heapUsed;
      const store = openStore({ path });
      const t0 = performance.now();
      const c = await resumeCoordinator({ store, model, limits: { maxAgents: N + 1, maxChildren: N } });
      ms.push(performance.now() - t0);
      gc?.();
      kb.push((process.memoryUsage().heapUsed - before) / N / 1024);
      await c.shutdown();
      store.close();
    },
    { iterations: 3, warmupIterations: 0, time: 0 },
  );
  // The first resume in the process is the honest one for memory (later ones reuse warmed caches).
  reporters.push(
    () => `resume ${N}: ${median(ms).toFixed(0)} ms (target ≤ 1,000); heap per parked agent ${kb[0]!.toFixed(2)} KB${gc ? '' : ' (no --expose-gc: unreliable)'} (target ≤ 8)`,
  );
});

describe("an owner's open: checking every row before the first write", () => {
  // 1,000 agents × 20 session items of ~500 bytes (~12 MB): the verify pass reads every row once.
  const path = tempDb();
  const seed = openStore({ path, synchronous: 'NORMAL' });
  seed.transaction(() => {
    const budget = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
    seed.insertRun({ id: 'run', createdAt: 0, interactive: true, rootId: 'a0', budget });
    for (let i = 0; i < 1_000; i++) {
      const row = newAgentRow({ id: `a${i}`, runId: 'run', name: `w${i}`, parentId: null, depth: 0, task: 'work', skills: [] }, i);
      seed.registerAgent(row, Array.from({ length: 20 }, (_, k) => ({ role: 'user' as const, content: `item ${k} ${'x'.repeat(500)}` })));
    }
  });
  seed.close();
  const times = { verify: [] as number[], skip: [] as number[], readonly: [] as number[] };
  for (const mode of ['verify', 'skip', 'readonly'] as const) {
    bench(
      `open ${mode === 'verify' ? 'as owner, every row checked' : mode === 'skip' ? 'as owner, verify: false' : 'read-only (quick_check only)'}`,
      () => {
        const t0 = performance.now();
        openStore({ path, ...(mode === 'readonly' ? { readonly: true } : { verify: mode === 'verify' }) }).close();
        times[mode].push(performance.now() - t0);
      },
      { iterations: 5, warmupIterations: 1, time: 0 },
    );
  }
  reporters.push(
    () =>
      `open of a ${(statSync(path).size / 1e6).toFixed(0)} MB file: owner ${median(times.verify).toFixed(0)} ms with every row checked, ` +
      `${median(times.skip).toFixed(0)} ms with verify: false, reader ${median(times.readonly).toFixed(0)} ms`,
  );
});

afterAll(() => {
  process.stderr.write(`\n${reporters.map((r) => r()).join('\n')}\n`);
});
