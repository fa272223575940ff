/**
 * `openStore({ commitThread: true })` (issue 36 item 2: commits never make the event loop wait on
 * the disk): a file's batches are applied by a worker thread with its own connection; with
 * `'auto'`, the default, once they outgrow the main thread. The thread
 * is the compiled `sqliteWriterThread.js` (dist/, built by the project's global setup), so the
 * package is loaded from dist/.
 */
import { copyFileSync, existsSync, mkdtempSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';

const dist = (path: string) => new URL(`../../dist/${path}`, import.meta.url);
const troupe = (await import(dist('src/index.js').href)) as typeof import('../../src/index.js');
const { portOf } = (await import(dist('src/store/port.js').href)) as typeof import('../../src/store/port.js');
const { newAgentRow } = (await import(dist('src/store/rows.js').href)) as typeof import('../../src/store/rows.js');
type SqliteStore = import('../../src/index.js').SqliteStore;
type Script = import('../../src/index.js').Script;

const tempDir = () => mkdtempSync(join(tmpdir(), 'troupe-commits-'));
const TERMINAL = ['completed', 'failed', 'crashed', 'stopped'] as const;
const BUDGET = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
const run = { id: 'run1', createdAt: 1, interactive: false, rootId: null, budget: BUDGET };
const agent = (id: string) => newAgentRow({ id, runId: 'run1', name: `n-${id}`, parentId: null, depth: 0, task: 'task', skills: [] }, 1);

/** Run the autonomous scenario on `store` and close it; how many transactions the main thread ran during the run. */
async function runTeam(store: SqliteStore): Promise<number> {
  const script = JSON.parse(readFileSync(new URL('../../fixtures/scenarios/team-autonomous.json', import.meta.url), 'utf8')) as Script;
  let transactions = 0;
  const transaction = store.transaction.bind(store);
  store.transaction = <T>(fn: () => T): T => {
    transactions++;
    return transaction(fn);
  };
  const c = troupe.createCoordinator({ model: troupe.scriptedModel(script), store });
  const lead = Object.keys(script.agents)[0]!;
  const root = await c.start({ name: lead, task: 'lead the team' });
  await c.waitFor(root, [...TERMINAL]);
  await c.shutdown();
  store.close();
  return transactions;
}

/** What a file holds of a run, agent ids replaced by names (they are random per run). */
function contents(path: string) {
  const store = troupe.openStore({ path, readonly: true });
  const [r] = store.listRuns();
  const agents = store.listAgents(r!.id);
  let text = JSON.stringify({
    agents: agents.map((a) => ({ name: a.name, parent: a.parentId, status: a.status, session: store.loadSession(a.id) })),
    messages: store.listMessages(r!.id).map((m) => ({ to: m.to, from: m.from, type: m.type, content: m.content, delivered: m.deliveredAt !== null })),
    events: store.listEvents(r!.id).map((e) => [e.agentId, e.type]),
  });
  store.close();
  for (const a of agents) text = text.split(a.id).join(a.name);
  return JSON.parse(text) as unknown;
}

describe('commits on a thread', () => {
  it('a team commits nothing on the main thread, and its file holds what the same team writes there', async () => {
    const dir = tempDir();
    const onThread = await runTeam(troupe.openStore({ path: join(dir, 'thread.db'), commitThread: true }));
    // Nothing set ('auto'): a team this small never outgrows the main thread.
    const main = troupe.openStore({ path: join(dir, 'main.db') });
    const onMain = await runTeam(main);
    expect(onThread).toBe(0);
    expect(onMain).toBeGreaterThan(0);
    expect(main.commitsOnThread).toBe(false);
    const threaded = contents(join(dir, 'thread.db'));
    expect(threaded).toEqual(contents(join(dir, 'main.db')));
    expect((threaded as { agents: unknown[] }).agents.length).toBeGreaterThan(1);
  });

  it("the main thread reads the thread's writes (it caches nothing the thread changes)", async () => {
    const store = troupe.openStore({ path: join(tempDir(), 's.db'), commitThread: true });
    const port = portOf(store);
    await port.commit([
      { op: 'insertRun', run },
      { op: 'registerAgent', agent: agent('a'), firstInput: [{ role: 'user', content: 'first' }] },
    ]);
    expect(store.loadSession('a')).toHaveLength(1);
    expect(store.getAgent('a')?.status).toBe('running');
    await port.commit([
      { op: 'appendSession', agentId: 'a', items: [{ role: 'assistant', content: 'second' }] },
      { op: 'updateAgent', id: 'a', patch: { status: 'waiting' } },
    ]);
    expect(store.loadSession('a').map((i) => (i as { content: string }).content)).toEqual(['first', 'second']);
    expect(store.getAgent('a')?.status).toBe('waiting');
    expect((await port.listAgents('run1')).map((a) => a.status)).toEqual(['waiting']);
    // The thread caches what it writes: this connection may not write it behind its back.
    expect(() => store.appendSession('a', [{ role: 'user', content: 'behind its back' }])).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    expect(() => store.updateAgent('a', { status: 'running' })).toThrow(/coordinator's port/);
    store.close();
  });

  it("the agents the open's verify pass decoded are not handed out once the thread wrote", async () => {
    const path = join(tempDir(), 's.db');
    const first = troupe.openStore({ path });
    await portOf(first).commit([
      { op: 'insertRun', run },
      { op: 'registerAgent', agent: agent('a'), firstInput: [] },
    ]);
    first.close();
    const store = troupe.openStore({ path, commitThread: true });
    await portOf(store).commit([{ op: 'updateAgent', id: 'a', patch: { status: 'waiting' } }]);
    expect(store.listAgents('run1').map((a) => a.status)).toEqual(['waiting']);
    store.close();
  });

  it('close() returns after the thread applied every batch posted, so the next owner finds them', async () => {
    const path = join(tempDir(), 's.db');
    const store = troupe.openStore({ path, commitThread: true });
    const port = portOf(store);
    await port.commit([{ op: 'insertRun', run }]);
    // Large enough that the thread is still at it when close() is called (tens of ms of work).
    const items = Array.from({ length: 5_000 }, (_, i) => ({ role: 'user' as const, content: `item ${i}` }));
    const last = port.commit([{ op: 'registerAgent', agent: agent('late'), firstInput: items }]);
    store.close();
    // Nothing more is written once closed: not by this thread, not by a new one without the lock.
    await expect(port.commit([{ op: 'insertRun', run: { ...run, id: 'after-close' } }])).rejects.toMatchObject({ code: 'STORE_IO' });
    // Read at once, as another process would the moment the lock is free.
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare("SELECT count(*) AS n FROM session_items WHERE agent_id = 'late'").get()).toEqual({ n: 5_000 });
    raw.close();
    await last;
    const again = troupe.openStore({ path });
    expect(again.getAgent('late')?.name).toBe('n-late');
    expect(again.getRun('after-close')).toBeUndefined();
    again.close();
  });

  it('a store closed before its first commit starts no thread after', async () => {
    const path = join(tempDir(), 's.db');
    const store = troupe.openStore({ path, commitThread: true });
    store.close();
    await expect(portOf(store).commit([{ op: 'insertRun', run }])).rejects.toMatchObject({ code: 'STORE_IO' });
    const again = troupe.openStore({ path });
    expect(again.listRuns()).toEqual([]);
    again.close();
  });

  it('a full disk on the thread stops the store: STORE_IO, every later commit refused, the file sound', async () => {
    const path = join(tempDir(), 's.db');
    const store = troupe.openStore({ path, commitThread: true, maxSizeBytes: 256 * 1024 });
    const port = portOf(store);
    await port.commit([
      { op: 'insertRun', run },
      { op: 'registerAgent', agent: agent('a'), firstInput: [] },
    ]);
    const big = { role: 'user' as const, content: 'x'.repeat(30_000) };
    let failed: unknown = null;
    for (let i = 0; i < 40 && failed === null; i++)
      failed = await port.commit([{ op: 'appendSession', agentId: 'a', items: [big] }]).then(
        () => null,
        (err: unknown) => err,
      );
    expect(failed).toMatchObject({ code: 'STORE_IO' });
    expect(store.failure?.code).toBe('STORE_IO');
    await expect(port.commit([{ op: 'updateAgent', id: 'a', patch: { status: 'waiting' } }])).rejects.toMatchObject({ code: 'STORE_IO' });
    store.close();
    const again = troupe.openStore({ path });
    expect(again.integrityCheck()).toBe('ok');
    expect(again.getAgent('a')?.status).toBe('running');
    again.close();
  });

  it('a secret the redactor learns after the thread started is scrubbed by the thread too', async () => {
    const path = join(tempDir(), 's.db');
    const redactor = troupe.createRedactor(['sk-known-before-0001']);
    const store = troupe.openStore({ path, commitThread: true, redactor });
    const port = portOf(store);
    await port.commit([
      { op: 'insertRun', run },
      { op: 'registerAgent', agent: agent('a'), firstInput: [{ role: 'user', content: 'key sk-known-before-0001' }] },
    ]);
    redactor.add('sk-learned-after-0002');
    await port.commit([{ op: 'appendSession', agentId: 'a', items: [{ role: 'user', content: 'key sk-learned-after-0002' }] }]);
    store.close();
    const raw = [path, `${path}-wal`].map((file) => (existsSync(file) ? readFileSync(file).toString('latin1') : '')).join('');
    expect(raw).not.toContain('sk-known-before-0001');
    expect(raw).not.toContain('sk-learned-after-0002');
    const again = troupe.openStore({ path, readonly: true });
    expect(again.loadSession('a').map((i) => (i as { content: string }).content)).toEqual(['key [redacted]', 'key [redacted]']);
    again.close();
  });

  it('a thread that cannot open the file the owner opened (moved, or another in its place) stops the store, and creates no file', async () => {
    const other = join(tempDir(), 'other.db');
    troupe.openStore({ path: other }).close();
    for (const instead of ['nothing', 'another troupe file'] as const) {
      const dir = tempDir();
      const path = join(dir, 's.db');
      const store = troupe.openStore({ path, commitThread: true });
      renameSync(path, join(dir, 'moved.db'));
      if (instead === 'another troupe file') copyFileSync(other, path);
      const port = portOf(store);
      await expect(port.commit([{ op: 'insertRun', run }])).rejects.toMatchObject({ code: 'STORE_OPEN_FAILED' });
      expect(store.failure?.code).toBe('STORE_OPEN_FAILED');
      await expect(port.commit([{ op: 'insertRun', run }])).rejects.toMatchObject({ code: 'STORE_OPEN_FAILED' });
      store.close();
      if (instead === 'nothing') expect(existsSync(path)).toBe(false);
      else {
        const reader = troupe.openStore({ path, readonly: true });
        expect(reader.listRuns()).toEqual([]);
        reader.close();
      }
    }
  });

  it('is refused with CONFIG_INVALID where it cannot work', () => {
    const path = join(tempDir(), 's.db');
    const own = { add: () => undefined, scrub: (t: string) => t, scrubJson: (v: unknown) => JSON.stringify(v) };
    expect(() => troupe.openStore({ path: ':memory:', commitThread: true })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    expect(() => troupe.openStore({ path, commitThread: true, redactor: own })).toThrow(/createRedactor/);
    expect(() => troupe.openStore({ path, commitThread: 'yes' as unknown as boolean })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    troupe.openStore({ path }).close();
    expect(() => troupe.openStore({ path, readonly: true, commitThread: true })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
  });
});

/** Thresholds every commit meets: 'auto' moves the commits after the first. */
const AT_ONCE = { windowMs: 0, share: 0, commitMs: 0 };

describe("'auto' (the default): commits move to the thread once they outgrow the main thread", () => {
  it('a team that moves mid-run leaves the file the same team writes on the main thread', async () => {
    const dir = tempDir();
    const moving = troupe.openStore({ path: join(dir, 'moved.db'), commitThread: AT_ONCE });
    const onMain = await runTeam(moving);
    expect(moving.commitsOnThread).toBe(true);
    expect(onMain).toBeGreaterThan(0);
    const fixed = await runTeam(troupe.openStore({ path: join(dir, 'main.db'), commitThread: false }));
    expect(onMain).toBeLessThan(fixed);
    expect(contents(join(dir, 'moved.db'))).toEqual(contents(join(dir, 'main.db')));
  });

  it('the main thread forgets what it cached when the commits move, and then refuses to write behind their back', async () => {
    const store = troupe.openStore({ path: join(tempDir(), 's.db'), commitThread: AT_ONCE });
    const port = portOf(store);
    await port.commit([
      { op: 'insertRun', run },
      { op: 'registerAgent', agent: agent('a'), firstInput: [{ role: 'user', content: 'first' }] },
    ]);
    expect(store.loadSession('a')).toHaveLength(1); // read (and kept) before the move
    expect(store.getAgent('a')?.status).toBe('running');
    expect(store.commitsOnThread).toBe(true);
    // Not yet written by the thread: the main connection may still write.
    store.appendSession('a', [{ role: 'user', content: 'direct' }]);
    await port.commit([
      { op: 'appendSession', agentId: 'a', items: [{ role: 'assistant', content: 'second' }] },
      { op: 'updateAgent', id: 'a', patch: { status: 'waiting' } },
    ]);
    expect(store.loadSession('a').map((i) => (i as { content: string }).content)).toEqual(['first', 'direct', 'second']);
    expect(store.getAgent('a')?.status).toBe('waiting');
    expect((await port.listAgents('run1')).map((a) => a.status)).toEqual(['waiting']);
    expect(() => store.appendSession('a', [{ role: 'user', content: 'behind its back' }])).toThrow(/commitThread: false/);
    store.close();
    const again = troupe.openStore({ path: store.path, readonly: true });
    expect(again.loadSession('a')).toHaveLength(3);
    again.close();
  });

  it('long commits taking a fifth of the loop move within a window or two; short ones never do', async () => {
    const items = Array.from({ length: 3_000 }, (_, i) => ({ role: 'user' as const, content: `item ${i} ${'x'.repeat(100)}` }));
    const long = troupe.openStore({ path: join(tempDir(), 's.db') });
    const port = portOf(long);
    await port.commit([{ op: 'insertRun', run }]);
    const t0 = performance.now();
    for (let i = 0; !long.commitsOnThread && performance.now() - t0 < 10_000; i++) {
      await port.commit([{ op: 'registerAgent', agent: agent(`a${i}`), firstInput: items }]);
    }
    expect(long.commitsOnThread).toBe(true);
    long.close();

    const short = troupe.openStore({ path: join(tempDir(), 's.db'), synchronous: 'NORMAL' });
    const shortPort = portOf(short);
    await shortPort.commit([
      { op: 'insertRun', run },
      { op: 'registerAgent', agent: agent('a'), firstInput: [] },
    ]);
    // The whole loop in commits (a share far over the rule's), each far under its 2 ms.
    const t1 = performance.now();
    let n = 0;
    while (performance.now() - t1 < 1_500) await shortPort.commit([{ op: 'updateAgent', id: 'a', patch: { stint: ++n } }]);
    expect(n).toBeGreaterThan(100);
    expect(short.commitsOnThread).toBe(false);
    short.close();
  });

  it('stays off where the thread cannot run, and a bad rule is refused with CONFIG_INVALID', async () => {
    const path = join(tempDir(), 's.db');
    const own = { add: () => undefined, scrub: (t: string) => t, scrubJson: (v: unknown) => JSON.stringify(v) };
    const memory = troupe.openStore({ path: ':memory:', commitThread: 'auto' });
    await portOf(memory).commit([{ op: 'insertRun', run }]);
    expect(memory.commitsOnThread).toBe(false);
    memory.close();
    const theirs = troupe.openStore({ path, redactor: own });
    await portOf(theirs).commit([{ op: 'insertRun', run }]);
    expect(theirs.commitsOnThread).toBe(false);
    theirs.close();
    expect(() => troupe.openStore({ path: ':memory:', commitThread: AT_ONCE })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    expect(() => troupe.openStore({ path, commitThread: AT_ONCE, redactor: own })).toThrow(/createRedactor/);
    for (const bad of [{ ...AT_ONCE, share: 2 }, { ...AT_ONCE, windowMs: -1 }, { share: 0.2, commitMs: 2 }, { ...AT_ONCE, commitMs: Number.NaN }, 'always']) {
      expect(() => troupe.openStore({ path, commitThread: bad as never })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    }
  });
});
