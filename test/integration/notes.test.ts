/**
 * The promotion path of review notes (issue 34 item 8, seeds/001): a proposal stays quarantined
 * until a person promotes it; then the root of every later run reads it (its first model request
 * holds it), within a bound; a rejected or quarantined note is never read. One decision per note
 * (NOTE_ALREADY_DECIDED), unknown ids NOTE_NOT_FOUND. The same on SQLite and PostgreSQL.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import type { CoordinatorOptions } from '../../src/host/options.js';
import type { TroupeEvent } from '../../src/host/runtime.js';
import { scriptedModel, type ScriptStep } from '../../src/model/scriptedModel.js';
import { noteId, notesText, type Notes } from '../../src/notes/notes.js';
import { postgresNotes } from '../../src/notes/postgresNotes.js';
import { sqliteNotes } from '../../src/notes/sqliteNotes.js';
import type { StorePort } from '../../src/store/port.js';
import { portOf } from '../../src/store/port.js';
import { replayRun } from '../../src/replay/replayRun.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/store.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

const finish: ScriptStep = { tool: 'finish', args: { summary: 'done' } };
const propose = (title: string, content: string): ScriptStep => ({ tool: 'propose_note', args: { title, content } });
const LESSON = 'When the build fails on lint, run prettier on the changed files first.';

/** A store as these tests use it: host a run on it, and its notes. */
interface Place {
  name: string;
  /** Host one run: its coordinator's port, and how to let it go. */
  host(): Promise<{ port: StorePort; runId?: string; done(): Promise<void> }>;
  notes(): Notes;
  close(): Promise<void>;
}

/** Run a root that finishes at once; its review (every turn) proposes `proposals` notes, one per run. */
async function runOnce(place: Place, options: { proposal?: [string, string]; notes?: CoordinatorOptions['notes'] } = {}) {
  const { port, runId, done } = await place.host();
  const model = scriptedModel({
    agents: { lead: [finish], ...(options.proposal ? { 'lead:review': [propose(...options.proposal), { tool: 'review_done', args: {} }] } : {}) },
  });
  const c = createCoordinator<StorePort>({
    store: port,
    model,
    ...(runId ? { runId } : {}),
    ...(options.proposal ? { review: { everyTurns: 1 } } : {}),
    ...(options.notes === undefined ? {} : { notes: options.notes }),
  });
  const events: TroupeEvent[] = [];
  c.subscribe((e) => events.push(e));
  const rootId = await c.start({ name: 'lead', task: 'Fix the build.' });
  await c.waitFor(rootId, ['completed']);
  await c.reviews.settled();
  await c.whenIdle();
  await c.shutdown();
  await done();
  const first = model.calls.find((call) => call.agentName === 'lead')!.request;
  const proposed = events.filter((e): e is Extract<TroupeEvent, { type: 'review.note' }> => e.type === 'review.note');
  return { firstInput: JSON.stringify(first.messages[0]), proposed, runId: c.runId };
}

function sqlitePlace(): Place {
  const path = join(mkdtempSync(join(tmpdir(), 'troupe-notes-')), 'troupe.db');
  return {
    name: 'SQLite',
    host: () => {
      const store = openStore({ path });
      return Promise.resolve({ port: portOf(store), done: () => Promise.resolve(store.close()) });
    },
    notes: () => sqliteNotes(path),
    close: () => Promise.resolve(),
  };
}

function postgresPlace(): Place {
  const { schema, drop } = freshSchema();
  let store: PostgresStore | undefined;
  const opened = async () => (store ??= await openPostgresStore({ url: PG_URL, schema }));
  let opening: Promise<PostgresStore> | undefined;
  return {
    name: 'PostgreSQL',
    async host() {
      const s = await (opening ??= opened());
      const runId = `run-${randomBytes(4).toString('hex')}`;
      const lease = await s.claim(runId, { owner: 'notes-test' });
      return { port: lease.port, runId, done: () => lease.release({ state: 'done' }).then(() => undefined) };
    },
    notes: () => {
      if (!store) throw new Error('host a run first');
      return postgresNotes(store);
    },
    close: async () => {
      await store?.close();
      await drop();
    },
  };
}

const pg = await pgAvailable();
const places: { title: string; skip: boolean; make: () => Place }[] = [
  { title: 'SQLite', skip: false, make: sqlitePlace },
  { title: pgTitle(pg, 'PostgreSQL'), skip: !pg, make: postgresPlace },
];

for (const { title, skip, make } of places) {
  describe.skipIf(skip)(`review notes on ${title}`, { timeout: 60_000 }, () => {
    const opened: Place[] = [];
    const place = () => {
      const p = make();
      opened.push(p);
      return p;
    };
    afterAll(async () => {
      for (const p of opened) await p.close();
    });

    it('a proposal stays quarantined (no run reads it) until promoted; then every later run reads it, once decided', async () => {
      const p = place();
      const first = await runOnce(p, { proposal: ['Lint first', LESSON] });
      expect(first.proposed).toHaveLength(1);
      const id = first.proposed[0]!.id;
      const notes = p.notes();
      expect(await notes.list()).toEqual([
        expect.objectContaining({ id, state: 'quarantined', title: 'Lint first', content: LESSON, agentName: 'lead', runId: first.runId, decidedAt: null }),
      ]);

      // Quarantined: a later run does not read it.
      expect((await runOnce(p)).firstInput).not.toContain(LESSON);

      const promoted = await notes.promote(id, { at: 1_000 });
      expect(promoted).toEqual({ ok: true, note: expect.objectContaining({ id, state: 'promoted', decidedAt: 1_000 }) });
      expect((await notes.list()).map((n) => [n.id, n.state])).toEqual([[id, 'promoted']]);

      // Promoted: the next run's root reads it in its first request.
      const later = await runOnce(p);
      expect(later.firstInput).toContain(LESSON);
      expect(later.firstInput).toContain(`### Lint first (${id})`);
      // Unless the run reads no notes.
      expect((await runOnce(p, { notes: false })).firstInput).not.toContain(LESSON);

      // Decided once: a second promotion, and a rejection after it, are refused.
      for (const again of [await notes.promote(id), await notes.reject(id, { reason: 'changed my mind' })]) {
        expect(again.ok).toBe(false);
        expect(!again.ok && again.error.code).toBe('NOTE_ALREADY_DECIDED');
      }
      const unknown = await notes.promote('n000000000000');
      expect(!unknown.ok && unknown.error.code).toBe('NOTE_NOT_FOUND');
      await notes.close();
    });

    it('decisions at once: exactly one is recorded, the others are NOTE_ALREADY_DECIDED', async () => {
      const p = place();
      const id = (await runOnce(p, { proposal: ['Race', 'Only one decision stands.'] })).proposed[0]!.id;
      // Six deciders, as six processes would be: several read the note quarantined before any
      // writes, and the store's key decides between them.
      const deciders = Array.from({ length: 6 }, () => p.notes());
      const results = await Promise.all(deciders.map((n, i) => (i % 2 === 0 ? n.promote(id) : n.reject(id, { reason: 'no' }))));
      expect(results.filter((r) => r.ok)).toHaveLength(1);
      expect(new Set(results.filter((r) => !r.ok).map((r) => !r.ok && r.error.code))).toEqual(new Set(['NOTE_ALREADY_DECIDED']));
      const winner = results.find((r) => r.ok);
      const [kept] = await deciders[0]!.list();
      expect(kept!.state).toBe(winner?.ok && winner.note.state);
      for (const n of deciders) await n.close();
    });

    it('a rejected note is kept with its reason and never read; the bound leaves out whole notes, oldest promotions first', async () => {
      const p = place();
      const a = (await runOnce(p, { proposal: ['Alpha', 'A'.repeat(300)] })).proposed[0]!.id;
      const b = (await runOnce(p, { proposal: ['Beta', 'B'.repeat(300)] })).proposed[0]!.id;
      const r = (await runOnce(p, { proposal: ['Gamma', 'REJECTED-TEXT'] })).proposed[0]!.id;
      const notes = p.notes();
      expect((await notes.promote(a, { at: 10 })).ok).toBe(true);
      expect((await notes.promote(b, { at: 20 })).ok).toBe(true);
      expect(await notes.reject(r, { reason: 'too specific', at: 30 })).toEqual({
        ok: true,
        note: expect.objectContaining({ state: 'rejected', reason: 'too specific' }),
      });

      const both = (await runOnce(p)).firstInput;
      expect(both).toContain('A'.repeat(300));
      expect(both).toContain('B'.repeat(300));
      expect(both).not.toContain('REJECTED-TEXT');
      // Room for one: the newest promotion (Beta) is read whole, Alpha is left out and said so.
      const one = (await runOnce(p, { notes: { maxChars: 400 } })).firstInput;
      expect(one).toContain('B'.repeat(300));
      expect(one).not.toContain('AAAA');
      expect(one).toContain('1 older promoted note left out');
      expect((await notes.list()).find((n) => n.id === r)).toMatchObject({ state: 'rejected', reason: 'too specific' });
      await notes.close();
    });
  });
}

describe('a run that read notes, replayed', () => {
  it('is identical: the root keeps what it read (terms.notes), and the replay gives its root the same', async () => {
    const p = sqlitePlace();
    const id = (await runOnce(p, { proposal: ['Lint first', LESSON] })).proposed[0]!.id;
    expect((await p.notes().promote(id)).ok).toBe(true);
    const later = await runOnce(p);
    expect(later.firstInput).toContain(LESSON);
    const { port, done } = await p.host();
    try {
      const root = (await port.listAgents(later.runId))[0]!;
      expect(root.terms?.notes).toContain(LESSON);
      const replayed = await replayRun(port, later.runId);
      expect(replayed.divergence).toBeNull();
      expect(replayed.outcome).toBe('identical');
    } finally {
      await done();
    }
  });
});

describe('notes, unit', () => {
  it('a note id is a digest of what was proposed: stable, and different for a different note', () => {
    const n = { at: 5, title: 't', content: 'c' };
    expect(noteId(n)).toBe(noteId({ ...n }));
    expect(noteId(n)).toMatch(/^n[0-9a-f]{12}$/);
    expect(noteId({ ...n, content: 'd' })).not.toBe(noteId(n));
  });

  it('notesText: none is null; whole notes only, newest first, within maxChars', () => {
    expect(notesText([], 100)).toBeNull();
    const notes = [
      { id: 'n1', title: 'one', content: 'x'.repeat(50) },
      { id: 'n2', title: 'two', content: 'y'.repeat(50) },
    ];
    expect(notesText(notes, 10)).toBeNull();
    const text = notesText(notes, 60)!;
    expect(text).toContain('### one (n1)');
    expect(text).not.toContain('### two');
    expect(text).toContain('1 older promoted note left out');
    expect(notesText(notes, 106)).toContain('### two (n2)');
  });
});
