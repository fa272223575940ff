/**
 * Schedules fire once (issue 33 item 6): several serving processes on one database, each running
 * the same schedule, fire each tick exactly once — its claim row keyed by (scope, trigger, tick)
 * is inserted by one of them, and only that one routes the tick. Three in-process managers with
 * their own connection pools on one simulated clock (PostgreSQL), two on one SQLite file, and
 * three real `troupe serve` processes on a short real interval (PostgreSQL). A tick whose claimant
 * died is taken over (moveFireClaim, a compare-and-set: one taker) and routed once; a claimant
 * that was only slow and submits after the takeover is counted `taken`, the run made once.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { ProactiveManager } from '../../src/autonomy/proactive.js';
import type { ProactiveTrigger } from '../../src/autonomy/proactiveTrigger.js';
import type { HostingStore } from '../../src/hosting/hostingStore.js';
import { postgresHosting } from '../../src/hosting/postgresHosting.js';
import { sqliteHosting } from '../../src/hosting/sqliteHosting.js';
import { openStore } from '../../src/store/sqliteStore.js';
import type { InboxKind } from '../../src/store/types.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/store.js';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { databaseFires, type FireRoute } from '../../src/autonomy/fires.js';
import { submitRun } from '../../src/worker/submit.js';
import { spawnTroupe, workdir, type Spawned } from '../helpers/cli.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

const available = await pgAvailable();

const MINUTE = 60_000;
const TICKS = 20;
/** Real `troupe serve` processes tick on wall time (1 s apart): ten ticks of three processes show no tick lost or doubled. */
const SERVE_TICKS = 10;

/** A root schedule (run proactive-pulse) and an agent schedule (the main run's lead), both every minute. */
const triggers: ProactiveTrigger[] = [
  { name: 'pulse', type: 'schedule', intervalMs: MINUTE, cooldownMs: 0, promptTemplate: 'pulse at ${timestamp}' },
  { name: 'nudge', type: 'schedule', intervalMs: MINUTE, cooldownMs: 0, promptTemplate: 'nudge at ${timestamp}', target: { agent: 'lead' } },
];

/** `hosts` serving "processes" on one clock, each with its own manager and fires; drive them `TICKS` minutes. */
async function tickAll(hostings: HostingStore[], mainRunId: string): Promise<FireRoute[]> {
  const clock = new SimulatedClock();
  clock.increment(1_000_000 * MINUTE);
  const routes: Promise<FireRoute>[] = [];
  const managers = hostings.map((hosting) => {
    const fires = databaseFires({ hosting, mainRunId, now: () => clock.now() });
    return new ProactiveManager({ triggers, clock, onFire: (fire) => void routes.push(fires.route(fire)) });
  });
  for (const m of managers) m.start();
  try {
    for (let i = 0; i < TICKS; i++) {
      clock.increment(MINUTE);
      // Each manager's timer ran in the increment and started its route: wait for all of them.
      await Promise.all(routes);
    }
  } finally {
    await Promise.all(managers.map((m) => m.stop()));
  }
  return Promise.all(routes);
}

/** The prompts each run got from the fires: its root's task (a submit) and the proactive messages in its inbox. */
function expectEachTickOnce(routes: FireRoute[], prompts: { pulse: string[]; nudge: string[] }, hosts: number): void {
  const start = 1_000_000 * MINUTE;
  const expected = (name: string) => Array.from({ length: TICKS }, (_, i) => `${name} at ${new Date(start + (i + 1) * MINUTE).toISOString()}`);
  expect(routes).toHaveLength(TICKS * 2 * hosts);
  expect(routes.filter((r) => r.kind === 'taken')).toHaveLength(TICKS * 2 * (hosts - 1));
  expect(routes.filter((r) => r.kind === 'started')).toHaveLength(1);
  // Exactly one prompt per tick: none doubled, none lost.
  expect([...prompts.pulse].sort()).toEqual(expected('pulse'));
  expect([...prompts.nudge].sort()).toEqual(expected('nudge'));
}

describe.skipIf(!available)(pgTitle(available, 'schedules fire once on PostgreSQL'), { timeout: 180_000 }, () => {
  const { schema, drop } = freshSchema();
  const stores: PostgresStore[] = [];
  const running: Spawned[] = [];
  afterAll(async () => {
    for (const r of running) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
    await Promise.all(stores.map((s) => s.close()));
    await drop();
  });

  beforeAll(async () => {
    for (let i = 0; i < 3; i++) stores.push(await openPostgresStore({ url: PG_URL, schema }));
  });

  const inboxPrompts = async (runId: string): Promise<string[]> => {
    const { rows } = await adminQuery(`SELECT payload FROM ${schema}.inbox WHERE run_id = $1 ORDER BY id`, [runId]);
    return rows.map((r: { payload: string }) => (JSON.parse(r.payload) as { content: string }).content);
  };

  it('three processes, each with its own pool, on one schema: a schedule ticking 20 times fires 20 times', async () => {
    const hostings = stores.map((s) => postgresHosting(s));
    const { runId: mainRunId } = await submitRun(hostings[0]!, { root: { name: 'lead', task: 'Stand by' }, interactive: true });

    const routes = await tickAll(hostings, mainRunId);

    const run = await stores[0]!.reads.getRun('proactive-pulse');
    const root = (await stores[0]!.reads.listAgents('proactive-pulse')).find((a) => a.id === run!.rootId)!;
    expectEachTickOnce(routes, { pulse: [root.task, ...(await inboxPrompts('proactive-pulse'))], nudge: await inboxPrompts(mainRunId) }, 3);
    // One claim per tick, and each posted tick's claim names its inbox request.
    const { rows } = await adminQuery(
      `SELECT trigger_name, count(*)::int AS n, count(request_id)::int AS posted FROM ${schema}.proactive_fires GROUP BY 1 ORDER BY 1`,
    );
    expect(rows).toEqual([
      { trigger_name: 'nudge', n: TICKS, posted: TICKS },
      { trigger_name: 'pulse', n: TICKS, posted: TICKS - 1 },
    ]);
  });

  it('a fire prunes the claims older than the retention', async () => {
    const hosting = postgresHosting(stores[0]!);
    const claim = (tick: string, at: number) => ({ scope: 'proactive-prune', trigger: 'prune', tick, at });
    expect(await hosting.claimFire(claim('old', 1_000))).toMatchObject({ claimed: true });
    expect(await hosting.claimFire(claim('recent', 2_500))).toMatchObject({ claimed: true });
    const fires = databaseFires({ hosting, now: () => 3_000, retentionMs: 1_000 });
    const fire = { trigger: 'prune', sessionId: 'proactive-prune', prompt: 'p', target: { root: true as const }, at: 3_000, tick: 'now' };
    expect(await fires.route(fire)).toMatchObject({ kind: 'started', runId: 'proactive-prune' });
    await fires.settled();
    // Claimed before 3 000 - 1 000: forgotten (claimable again); the recent one is kept.
    expect(await hosting.claimFire(claim('old', 3_000))).toMatchObject({ claimed: true });
    expect(await hosting.claimFire(claim('recent', 3_000))).toEqual({ claimed: false });
  });

  it('a claim and its message are one transaction: a post that fails leaves the tick unclaimed', async () => {
    await expectClaimRolledBack(postgresHosting(stores[0]!));
  });

  it('moveFireClaim is a compare-and-set: of two processes moving one claim, one does; released, the tick is claimable again', async () => {
    await expectMoveIsCompareAndSet(postgresHosting(stores[0]!), postgresHosting(stores[1]!));
  });

  it('claimed, then its process died before the run was submitted: taken over once the claim is older than the grace, and submitted once', async () => {
    const [a, b] = [postgresHosting(stores[0]!), postgresHosting(stores[1]!)];
    await expectDeadClaimantTakenOver(a, b, 'proactive-dead', tasksOf(stores[0]!));
  });

  it('claimed, then its submit came late, after another process took the claim over and submitted: the late one is counted taken, the run made once', async () => {
    await expectLateSubmitTaken(postgresHosting(stores[0]!), postgresHosting(stores[1]!), 'proactive-late', tasksOf(stores[0]!), inboxPrompts);
  });

  it('three real troupe serve processes on one schema fire each tick of a short schedule once', async () => {
    const other = freshSchema();
    await using server = await createFakeOpenAIServer(() => ({ message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: 'Noted.' } }] } }));
    try {
      const cwd = workdir();
      const config = join(cwd, 'serve.json');
      // Long enough that all three processes missing one tick (each event loop stalled a second at once) is not a risk.
      const intervalMs = 1_000;
      writeFileSync(
        config,
        JSON.stringify({
          model: 'm',
          baseURL: server.url,
          apiKey: 'k',
          proactive: { triggers: [{ name: 'beat', trigger_type: 'schedule', intervalMs, prompt_template: 'beat at ${timestamp}', cooldown_seconds: 0 }] },
        }),
      );
      const db = `${PG_URL}?schema=${other.schema}`;
      const serves = [0, 1, 2].map(() => spawnTroupe(['serve', 'Stand by', '--db', db, '--config', config], cwd));
      running.push(...serves);
      await Promise.all(serves.map((s) => s.line(/^ready /)));
      const claims = async () =>
        (await adminQuery(`SELECT tick FROM ${other.schema}.proactive_fires WHERE trigger_name = 'beat' ORDER BY tick::bigint`)).rows.map(
          (r: { tick: string }) => Number(r.tick),
        );
      // SERVE_TICKS ticks after all three are serving (each process prints one line per tick it saw).
      const seen = await claims();
      const from = seen.at(-1) ?? 0;
      const taken = /^proactive {2}beat → tick (\d+) for run proactive-beat fired by another process/;
      for (;;) {
        const ticks = await claims();
        if (ticks.filter((t) => t > from).length >= SERVE_TICKS) break;
        // A pause between two reads of rows other processes write.
        await new Promise((resolve) => setTimeout(resolve, intervalMs));
      }
      for (const s of serves) s.child.kill('SIGTERM');
      for (const s of serves) expect(await s.exited, s.stderr()).toEqual({ code: 0, signal: null });

      const ticks = await claims();
      // Consecutive multiples of the interval from the first claim to the last: none lost.
      expect(ticks.length).toBeGreaterThanOrEqual(SERVE_TICKS);
      expect(ticks.every((t) => t % intervalMs === 0)).toBe(true);
      expect(ticks.at(-1)! - ticks[0]!).toBe((ticks.length - 1) * intervalMs);
      // One prompt per claimed tick, the root's task and the rest messages: none doubled.
      const { rows } = await adminQuery(`SELECT payload FROM ${other.schema}.inbox WHERE run_id = 'proactive-beat' ORDER BY id`);
      const reader = await openPostgresStore({ url: PG_URL, schema: other.schema });
      const rootTask = await reader.reads
        .getRun('proactive-beat')
        .then(async (run) => (await reader.reads.listAgents('proactive-beat')).find((a) => a.id === run!.rootId)!.task)
        .finally(() => reader.close());
      const prompts = [rootTask, ...rows.map((r: { payload: string }) => (JSON.parse(r.payload) as { content: string }).content)];
      expect(prompts.sort()).toEqual(ticks.map((t) => `beat at ${new Date(t).toISOString()}`).sort());
      // Every process saw ticks another one had fired.
      for (const s of serves)
        expect(
          s.lines.some((l) => taken.test(l)),
          s.lines.join('\n'),
        ).toBe(true);
    } finally {
      await other.drop();
    }
  });
});

/** A claim whose post fails (a kind the inbox refuses) is rolled back with it: the next claim of the tick wins. */
async function expectClaimRolledBack(hosting: HostingStore): Promise<void> {
  const claim = { scope: 'proactive-atomic', trigger: 'atomic', tick: '1', at: 1 };
  const bad = { runId: 'proactive-atomic', kind: 'nonsense' as InboxKind, payload: {}, at: 1 };
  await expect(hosting.claimFire(claim, bad)).rejects.toThrow();
  expect(await hosting.claimFire(claim)).toEqual({ claimed: true, requestId: null });
  expect(await hosting.claimFire(claim)).toEqual({ claimed: false });
}

/** The tasks of a run's agents, as a store reads them. */
const tasksOf = (store: Pick<PostgresStore, 'reads'>) => async (runId: string) => (await store.reads.listAgents(runId)).map((a) => a.task);

/** moveFireClaim against `a` and `b`, two processes' views of one store. */
async function expectMoveIsCompareAndSet(a: HostingStore, b: HostingStore): Promise<void> {
  const key = { scope: 'proactive-cas', trigger: 'cas', tick: '7' };
  expect(await a.fireClaimedAt(key)).toBeNull();
  // Nothing to move before a claim.
  expect(await a.moveFireClaim(key, 1_000, 2_000)).toBe(false);
  expect(await a.claimFire({ ...key, at: 1_000 })).toMatchObject({ claimed: true });
  expect(await b.fireClaimedAt(key)).toBe(1_000);
  // A move from a time the claim no longer has (or never had) moves nothing.
  expect(await b.moveFireClaim(key, 999, 2_000)).toBe(false);
  expect(await b.fireClaimedAt(key)).toBe(1_000);
  // Two processes take it over from the same sighting at once: one does.
  const moved = await Promise.all([a.moveFireClaim(key, 1_000, 2_000), b.moveFireClaim(key, 1_000, 3_000)]);
  expect(moved.filter(Boolean)).toHaveLength(1);
  const winner = moved[0] ? 2_000 : 3_000;
  expect(await a.fireClaimedAt(key)).toBe(winner);
  // The loser's release (from its own time) releases nothing; the holder's does.
  expect(await a.moveFireClaim(key, winner === 2_000 ? 3_000 : 2_000, null)).toBe(false);
  expect(await b.moveFireClaim(key, winner, null)).toBe(true);
  expect(await a.fireClaimedAt(key)).toBeNull();
  expect(await b.claimFire({ ...key, at: 4_000 })).toMatchObject({ claimed: true });
  // Another tick of the same trigger is its own claim.
  expect(await a.fireClaimedAt({ ...key, tick: '8' })).toBeNull();
}

/** A claim left by a process that died before submitting: two processes later see the tick; one takes it over and submits, once. */
async function expectDeadClaimantTakenOver(a: HostingStore, b: HostingStore, runId: string, tasks: (runId: string) => Promise<string[]>): Promise<void> {
  const T0 = 1_000_000 * MINUTE;
  const trigger = runId.slice('proactive-'.length);
  const fire = { trigger, sessionId: runId, prompt: `${trigger} at ${T0}`, target: { root: true as const }, at: 0, tick: String(T0) };
  expect(await a.claimFire({ scope: runId, trigger, tick: fire.tick, at: T0 })).toMatchObject({ claimed: true });
  const routes = await Promise.all([a, b].map((hosting) => databaseFires({ hosting, now: () => T0 + MINUTE, claimGraceMs: MINUTE }).route(fire)));
  expect(routes.map((r) => r.kind).sort()).toEqual(['started', 'taken']);
  expect(await tasks(runId)).toEqual([fire.prompt]);
  expect(await a.fireClaimedAt({ scope: runId, trigger, tick: fire.tick })).toBe(T0 + MINUTE);
}

/**
 * A claimant that was slow, not dead: its submit is held after its claim until another process
 * took the claim over (past the grace) and submitted. The late submit then finds the run its own
 * fire made: counted taken, no second root, no prompt posted twice.
 */
async function expectLateSubmitTaken(
  a: HostingStore,
  b: HostingStore,
  runId: string,
  tasks: (runId: string) => Promise<string[]>,
  prompts: (runId: string) => Promise<string[]>,
): Promise<void> {
  const T0 = 1_000_000 * MINUTE;
  const trigger = runId.slice('proactive-'.length);
  const fire = { trigger, sessionId: runId, prompt: `${trigger} at ${T0}`, target: { root: true as const }, at: 0, tick: String(T0) };
  let reached!: () => void;
  const atSubmit = new Promise<void>((resolve) => (reached = resolve));
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  // The slow process's submit stops at its lease claim (after it saw no run) until the gate opens.
  const slow: HostingStore = {
    ...a,
    claim: async (id, lease) => {
      reached();
      await gate;
      return a.claim(id, lease);
    },
  };
  const late = databaseFires({ hosting: slow, now: () => T0, claimGraceMs: MINUTE }).route(fire);
  await atSubmit;
  expect(await a.fireClaimedAt({ scope: runId, trigger, tick: fire.tick })).toBe(T0);
  const taker = await databaseFires({ hosting: b, now: () => T0 + MINUTE, claimGraceMs: MINUTE }).route(fire);
  expect(taker).toMatchObject({ kind: 'started', runId });
  expect(await b.fireClaimedAt({ scope: runId, trigger, tick: fire.tick })).toBe(T0 + MINUTE);
  open();
  expect(await late).toEqual({ kind: 'taken', runId, tick: fire.tick });
  expect(await tasks(runId)).toEqual([fire.prompt]);
  expect(await prompts(runId)).toEqual([]);
  // The taker's claim stands: the late process released nothing.
  expect(await a.fireClaimedAt({ scope: runId, trigger, tick: fire.tick })).toBe(T0 + MINUTE);
}

/** A tick of trigger `pulse` (run proactive-pulse), as every serving process sees it. */
const pulseTick = (tick: string) => ({
  trigger: 'pulse',
  sessionId: 'proactive-pulse',
  prompt: `pulse at ${tick}`,
  target: { root: true as const },
  at: 0,
  tick,
});

describe('a tick whose claimant dies or fails is routed by another process, once (SQLite file)', () => {
  const T0 = 1_000_000 * MINUTE;

  it('claimed, then its process died before the run was submitted: taken over once the claim is older than the grace, and submitted once', async () => {
    const store = openStore({ path: join(mkdtempSync(join(tmpdir(), 'troupe-fires-')), 'troupe.db') });
    try {
      const hosting = sqliteHosting(store);
      const fire = pulseTick(String(T0));
      // The dead process's claim: made, and nothing after it.
      expect(await hosting.claimFire({ scope: 'proactive-pulse', trigger: 'pulse', tick: fire.tick, at: T0 })).toMatchObject({ claimed: true });
      const routes = await Promise.all([0, 1].map(() => databaseFires({ hosting, now: () => T0 + MINUTE, claimGraceMs: MINUTE }).route(fire)));
      expect(routes.map((r) => r.kind).sort()).toEqual(['started', 'taken']);
      expect(store.listAgents('proactive-pulse').map((a) => a.task)).toEqual([fire.prompt]);
      expect(store.openInbox('proactive-pulse')).toEqual([]);
      // Seen again later by a third process: already routed.
      expect(await databaseFires({ hosting, now: () => T0 + 2 * MINUTE }).route(fire)).toEqual({ kind: 'taken', runId: 'proactive-pulse', tick: fire.tick });
    } finally {
      store.close();
    }
  });

  it('claimed, then its submit failed: the claim is released and the tick is routed by the next fire of it', async () => {
    const store = openStore({ path: join(mkdtempSync(join(tmpdir(), 'troupe-fires-')), 'troupe.db') });
    try {
      const hosting = sqliteHosting(store);
      const broken: HostingStore = { ...hosting, claim: () => Promise.reject(new Error('the database went away')) };
      const fire = pulseTick(String(T0));
      // Nobody else submits here: the fire need not wait the default 10 s for another process's run.
      await expect(databaseFires({ hosting: broken, now: () => T0, racedSubmitWaitMs: 0 }).route(fire)).rejects.toThrow('the database went away');
      expect(store.getRun('proactive-pulse')).toBeUndefined();
      // Within the grace of the failed claim: the tick is free again, not left claimed by nobody.
      expect(await databaseFires({ hosting, now: () => T0, claimGraceMs: 1_000 }).route(fire)).toMatchObject({ kind: 'started', runId: 'proactive-pulse' });
      expect(store.listAgents('proactive-pulse').map((a) => a.task)).toEqual([fire.prompt]);
    } finally {
      store.close();
    }
  });
});

describe('schedules fire once on a SQLite file', () => {
  /** Two serving managers' hostings over one file (one process owns a file: they share its store), closed after `body`. */
  async function onOneFile(
    body: (a: HostingStore, b: HostingStore, tasks: (runId: string) => Promise<string[]>, prompts: (runId: string) => Promise<string[]>) => Promise<void>,
  ) {
    const store = openStore({ path: join(mkdtempSync(join(tmpdir(), 'troupe-fires-')), 'troupe.db') });
    try {
      await body(
        sqliteHosting(store),
        sqliteHosting(store),
        (runId) => Promise.resolve(store.listAgents(runId).map((a) => a.task)),
        (runId) => Promise.resolve(store.openInbox(runId).map((r) => (r.payload as { content: string }).content)),
      );
    } finally {
      store.close();
    }
  }

  it('moveFireClaim is a compare-and-set: of two processes moving one claim, one does; released, the tick is claimable again', async () => {
    await onOneFile((a, b) => expectMoveIsCompareAndSet(a, b));
  });

  it('claimed, then its submit came late, after another process took the claim over and submitted: the late one is counted taken, the run made once', async () => {
    await onOneFile((a, b, tasks, prompts) => expectLateSubmitTaken(a, b, 'proactive-late', tasks, prompts));
  });

  it('a claim and its message are one transaction: a post that fails leaves the tick unclaimed', async () => {
    const store = openStore({ path: join(mkdtempSync(join(tmpdir(), 'troupe-fires-')), 'troupe.db') });
    try {
      await expectClaimRolledBack(sqliteHosting(store));
    } finally {
      store.close();
    }
  });

  it('two serving managers over one file fire each tick once, and a tick claimed before a reopen stays claimed', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-fires-')), 'troupe.db');
    let store = openStore({ path });
    try {
      const hosting = sqliteHosting(store);
      const { runId: mainRunId } = await submitRun(hosting, { root: { name: 'lead', task: 'Stand by' }, interactive: true });
      const routes = await tickAll([hosting, hosting], mainRunId);
      const prompts = (runId: string) => store.openInbox(runId).map((r) => (r.payload as { content: string }).content);
      const root = store.listAgents('proactive-pulse').find((a) => a.id === store.getRun('proactive-pulse')!.rootId)!;
      expectEachTickOnce(routes, { pulse: [root.task, ...prompts('proactive-pulse')], nudge: prompts(mainRunId) }, 2);

      store.close();
      store = openStore({ path });
      const again = databaseFires({ hosting: sqliteHosting(store), mainRunId, now: () => (1_000_000 + TICKS + 1) * MINUTE });
      const tick = String(1_000_000 * MINUTE + MINUTE);
      const fire = { trigger: 'pulse', sessionId: 'proactive-pulse', prompt: 'again', target: { root: true as const }, at: 0, tick };
      expect(await again.route(fire)).toEqual({ kind: 'taken', runId: 'proactive-pulse', tick });
      expect(await again.route({ ...fire, tick: 'event:new' })).toMatchObject({ kind: 'posted', runId: 'proactive-pulse' });
      await again.settled();
    } finally {
      store.close();
    }
  });
});
