/**
 * A third-party server, unchanged: the reference `@modelcontextprotocol/server-everything` over
 * stdio (installed from npm as a dev dependency). Its tools reach the model with their schemas,
 * results come back readable, and it does not see troupe's environment.
 */
import { createRequire } from 'node:module';
import { afterEach, describe, expect, it } from 'vitest';
import { createCoordinator, type Coordinator } from '../../src/host/createCoordinator.js';
import { mcpServer } from '../../src/mcp/config.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { codeOf, toolItems } from '../helpers/mcp.js';
import { TERMINAL } from '../helpers/team.js';

const EVERYTHING = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');

const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.shutdown()));
});

describe('@modelcontextprotocol/server-everything', () => {
  it('a scripted team calls its echo, get-sum, get-structured-content, get-tiny-image and get-env tools', async () => {
    const previous = process.env.OPENAI_API_KEY;
    process.env.OPENAI_API_KEY = 'sk-troupe-test-never-inherited';
    try {
      const model = scriptedModel({
        agents: {
          lead: [
            {
              tools: [
                { name: 'echo', args: { message: 'hello' } },
                { name: 'get-sum', args: { a: 2, b: 40 } },
                { name: 'get-structured-content', args: { location: 'Chicago' } },
                { name: 'get-tiny-image', args: {} },
                { name: 'get-env', args: {} },
                { name: 'get-sum', args: { a: 'two' } },
              ],
            },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      });
      const store = memoryStore();
      const c = createCoordinator({
        model,
        store,
        tools: [mcpServer({ name: 'everything', command: process.execPath, args: [EVERYTHING, 'stdio'], env: { MARKER: 'given' } })],
      });
      open.push(c);
      const rootId = await c.start({ name: 'lead', task: 'Try everything.' });
      expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
      const offered = model.calls[0]!.request.tools;
      expect(offered.find((t) => t.name === 'get-sum')?.parameters).toMatchObject({
        type: 'object',
        properties: { a: { type: 'number' }, b: { type: 'number' } },
      });
      const items = toolItems(store.loadSession(rootId));
      expect(items.map(codeOf)).toEqual([null, null, null, null, null, 'TOOL_INPUT_INVALID', null]);
      expect(items[0]!.content).toContain('hello');
      expect(items[1]!.content).toContain('42');
      expect(JSON.parse(items[2]!.content)).toMatchObject({ structuredContent: { temperature: expect.any(Number), conditions: expect.any(String) } });
      expect(items[3]!.content).toMatch(/\[image image\/png, \d+ bytes: shown to you after the tool results\]/);
      // Its pixels follow the turn's tool results, as an image part.
      const shown = store.loadSession(rootId).find((i) => i.role === 'user' && Array.isArray(i.content) && i.content.some((p) => p.type === 'image'));
      expect(JSON.stringify(shown)).toMatch(/"url":"data:image\/png;base64,[A-Za-z0-9+/]+=*"/);
      const env = JSON.parse(items[4]!.content.slice(items[4]!.content.indexOf('{'))) as Record<string, string>;
      expect(env.MARKER).toBe('given');
      expect(env).not.toHaveProperty('OPENAI_API_KEY');
    } finally {
      if (previous === undefined) delete process.env.OPENAI_API_KEY;
      else process.env.OPENAI_API_KEY = previous;
    }
  });
});
