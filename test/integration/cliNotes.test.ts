/**
 * `troupe notes` end to end, on a SQLite file and on PostgreSQL (issue 34 item 8): a run's
 * background review proposes a note; `troupe notes` lists it quarantined; `troupe notes promote`
 * promotes it once (a second time: exit 2, NOTE_ALREADY_DECIDED; an unknown id: exit 4,
 * NOTE_NOT_FOUND); the next `troupe run` sends the note to the model in its root's first request.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { expectOneLine, troupe, workdir } from '../helpers/cli.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

const LESSON = 'Look at the agent graph before finishing.';

interface Body {
  messages: { role: string; content: string }[];
}

const drops: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(drops.map((drop) => drop()));
});

const pg = await pgAvailable();
const stores = [
  { title: 'a SQLite file', skip: false, db: () => join(workdir(), 'team.db') },
  {
    title: pgTitle(pg, 'PostgreSQL'),
    skip: !pg,
    db: () => {
      const { schema, drop } = freshSchema();
      drops.push(drop);
      return `${PG_URL}?schema=${schema}`;
    },
  },
];

for (const store of stores) {
  describe.skipIf(store.skip)(`troupe notes on ${store.title}`, { timeout: 120_000 }, () => {
    it('lists the proposal quarantined, promotes it once, and the next run sends it to the model', async () => {
      await using server = await createFakeOpenAIServer((request) => {
        const body = request.body as Body;
        if (body.messages[0]!.content.includes('background reviewer')) {
          return { message: { toolCalls: [{ name: 'propose_note', arguments: { title: 'Graph first', content: LESSON } }] } };
        }
        return { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'all done' } }] } };
      });
      const db = store.db();
      const cwd = workdir();
      const config = (review: boolean) =>
        writeFileSync(
          join(cwd, 'troupe.config.json'),
          JSON.stringify({ model: 'm', baseURL: server.url, apiKey: 'k', ...(review ? { review: { everyTurns: 1, maxSteps: 1 } } : {}) }),
        );
      config(true);
      const first = await troupe(['run', 'Fix the build', '--db', db, '--json'], cwd);
      expect(first.code, first.stderr).toBe(0);
      const rootRequests = () => server.requests.filter((r) => !(r.body as Body).messages[0]!.content.includes('background reviewer'));
      expect(JSON.stringify(rootRequests()[0]!.body)).not.toContain(LESSON);

      const listed = await troupe(['notes', '--db', db, '--json'], cwd);
      expect(listed.code, listed.stderr).toBe(0);
      const { notes } = JSON.parse(listed.stdout) as { notes: { id: string; state: string; title: string; content: string }[] };
      expect(notes).toEqual([expect.objectContaining({ state: 'quarantined', title: 'Graph first', content: LESSON })]);
      const id = notes[0]!.id;
      const text = await troupe(['notes', '--db', db], cwd);
      expect(text.stdout).toMatch(new RegExp(`^${id}  quarantined  Graph first  \\(lead, run `));

      const promoted = await troupe(['notes', 'promote', id, '--db', db], cwd);
      expect(promoted.code, promoted.stderr).toBe(0);
      expect(promoted.stdout).toContain(`${id} promoted (Graph first)`);
      const twice = await troupe(['notes', 'promote', id, '--db', db], cwd);
      expect(twice.code).toBe(2);
      expectOneLine(twice, 'NOTE_ALREADY_DECIDED');
      const unknown = await troupe(['notes', 'reject', 'n000000000000', '--db', db], cwd);
      expect(unknown.code).toBe(4);
      expectOneLine(unknown, 'NOTE_NOT_FOUND');
      const usage = await troupe(['notes', 'publish', id, '--db', db], cwd);
      expect(usage.code).toBe(2);

      config(false);
      const before = rootRequests().length;
      const second = await troupe(['run', 'Fix it again', '--db', db, '--json'], cwd);
      expect(second.code, second.stderr).toBe(0);
      const next = rootRequests()[before]!.body as Body;
      expect(next.messages.find((m) => m.role === 'user')!.content).toContain(LESSON);
      expect(JSON.parse((await troupe(['notes', '--db', db, '--json'], cwd)).stdout)).toEqual({
        notes: [expect.objectContaining({ id, state: 'promoted' })],
      });
    });
  });
}
