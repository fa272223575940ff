/**
 * A key a provider echoed never reaches a model (issue 31, item 8). The store scrubbed it from the
 * database, but the parent's next request carried it raw in "Last error: PROVIDER_AUTH: … Incorrect
 * API key provided: sk-…". Every text that enters an agent's conversation — a child's failure
 * notice, a tool's error result, a finished execution's note — is scrubbed with the store's
 * redactor, and a store given none knows the known keys (OPENAI_API_KEY) by default.
 */
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createRedactor, REDACTED } from '../../src/logging/redact.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { openStore, type SqliteStore } from '../../src/store/sqliteStore.js';
import type { Store } from '../../src/store/types.js';
import type { FakeRequest } from '../../src/testing/fakeOpenAIServer.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { agentOf, call, openaiTeam, status } from '../helpers/provider.js';
import { team, TERMINAL } from '../helpers/team.js';

const KEY = 'sk-troupe-model-0123456789abcdefSECRET';

/** A provider that refuses the key and quotes it back, as some do. */
const echoing401 = status(
  401,
  {},
  { error: { message: `Incorrect API key provided: ${KEY}. Check the key ${KEY}.`, type: 'invalid_request_error', code: 'invalid_api_key' } },
);

const dbFile = () => join(mkdtempSync(join(tmpdir(), 'troupe-secrets-')), 'troupe.db');
/** Every byte of the database (and its write-ahead log). */
const dbBytes = (path: string) =>
  [path, `${path}-wal`]
    .filter((p) => existsSync(p))
    .map((p) => readFileSync(p).toString('latin1'))
    .join('');
const bodyText = (r: FakeRequest) => JSON.stringify(r.body);

afterEach(() => {
  vi.unstubAllEnvs();
});

/**
 * The lead spawns a worker whose only call is refused with the key quoted back, waits, and
 * finishes. `apiKey: undefined` makes openaiModel read OPENAI_API_KEY.
 */
async function childRefusedWithEchoedKey(store: Store, apiKey: string | undefined) {
  const t = await openaiTeam(
    {
      lead: [
        call('spawn_agent', { name: 'worker', task: 'Work.' }),
        call('wait_for_agents', { reason: 'worker' }),
        call('finish', { summary: 'worker failed' }),
      ],
      worker: [echoing401],
    },
    { model: { apiKey }, coordinator: { store } },
  );
  await using _ = t;
  const rootId = await t.c.start({ name: 'lead', task: 'Delegate the work.' });
  expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
  expect(t.c.list().find((a) => a.name === 'worker')).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_AUTH' } });
  // The key did reach the provider, and the provider did quote it back.
  const worker = t.server.requests.filter((r) => agentOf(r) === 'worker');
  expect(worker[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
  return t.server.requests.filter((r) => agentOf(r) === 'lead');
}

/** The lead's request after the worker failed: it carries the failure notice, scrubbed. */
function expectScrubbedNotice(lead: FakeRequest[]) {
  expect(lead).toHaveLength(3);
  const after = bodyText(lead[2]!);
  expect(after).toContain('[Agent failed]');
  expect(after).toContain(`Last error: PROVIDER_AUTH: HTTP 401: Incorrect API key provided: ${REDACTED}. Check the key ${REDACTED}.`);
  for (const request of lead) expect(bodyText(request)).not.toContain(KEY);
}

describe("a key a provider echoes in a child's error never reaches the parent's model", () => {
  it("with the store's redactor (openStore({ redactor })): the notice in the parent's next request is scrubbed", async () => {
    const path = dbFile();
    const store = openStore({ path, redactor: createRedactor([KEY]) });
    try {
      expectScrubbedNotice(await childRefusedWithEchoedKey(store, KEY));
    } finally {
      store.close();
    }
    expect(dbBytes(path)).not.toContain(KEY);
  });

  it('with no redactor given: the key from OPENAI_API_KEY is known by default, to the model texts and to the database', async () => {
    vi.stubEnv('OPENAI_API_KEY', KEY);
    const path = dbFile();
    const store: SqliteStore = openStore({ path });
    try {
      expectScrubbedNotice(await childRefusedWithEchoedKey(store, undefined));
    } finally {
      store.close();
    }
    const db = dbBytes(path);
    expect(db).toContain(`Incorrect API key provided: ${REDACTED}`);
    expect(db).not.toContain(KEY);
  });

  it('on the in-memory store (no redactor at all): the known key is scrubbed from the model texts', async () => {
    vi.stubEnv('OPENAI_API_KEY', KEY);
    expectScrubbedNotice(await childRefusedWithEchoedKey(memoryStore(), undefined));
  });
});

describe('every other text built for a model is scrubbed too', () => {
  const A = '019f4b19-eafd-74ed-baa6-d24a27b3f52c';
  const leaky = defineTool({
    name: 'leaky',
    description: 'Fails quoting a key.',
    parameters: { type: 'object', properties: {} },
    execute: () => {
      throw new Error(`upstream said: bad token ${KEY}`);
    },
  });
  const provision = defineTool({
    name: 'provision',
    description: 'Start provisioning (asynchronous).',
    parameters: { type: 'object', properties: {} },
    execute: () => `started — execution ${A} running.`,
  });

  it("a tool's error result, a scripted provider error in a child's notice, a finished execution's note", async () => {
    vi.stubEnv('OPENAI_API_KEY', KEY);
    const t = team(
      {
        agents: {
          lead: [
            { tool: 'leaky', args: {} },
            {
              tools: [
                { name: 'provision', args: {} },
                { name: 'spawn_agent', args: { name: 'worker', task: 'Work.' } },
              ],
            },
            { tool: 'wait_for_agents', args: { reason: 'worker' } },
            { tool: 'respond_to_user', args: { message: 'waiting for the execution' } },
            { tool: 'respond_to_user', args: { message: 'done' } },
          ],
          worker: [{ error: { code: 'PROVIDER_AUTH', status: 401, message: `Incorrect API key provided: ${KEY}` } }],
        },
      },
      { tools: [leaky, provision], interactive: true },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Go.' });
    await t.advance(10, 10);
    // The lead answered the user and parks; the execution it started is still running.
    expect(t.model.calls.filter((c) => c.agentName === 'lead')).toHaveLength(4);
    expect(t.c.get(rootId).status).toBe('waiting');
    expect(await t.c.executions.finish(A, { status: 'failed', result: `provisioning failed: token ${KEY} rejected` })).toBe(true);
    await t.advance(10, 10);
    const lead = t.model.calls.filter((c) => c.agentName === 'lead').map((c) => JSON.stringify({ system: c.request.system, messages: c.request.messages }));
    expect(lead).toHaveLength(5);
    // Each text arrived, scrubbed: the tool error, the worker's failure notice, the execution's note.
    expect(lead[1]).toContain(`upstream said: bad token ${REDACTED}`);
    expect(lead.slice(2).join('\n')).toContain(`Last error: PROVIDER_AUTH: Incorrect API key provided: ${REDACTED}`);
    expect(lead[4]).toContain(`execution ${A} failed: provisioning failed: token ${REDACTED} rejected`);
    for (const request of lead) expect(request).not.toContain(KEY);
    await t.c.shutdown();
  });
});
