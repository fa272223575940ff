/** User tools the tests share. */
import { defineTool, type Tool } from '../../src/tools/defineTool.js';

/** A read-only `search` tool answering `{ hits: ['<q>.ts'] }`; name and description can be changed (a replay's code under test). */
export const searchTool = ({ name = 'search', description = 'Search the code base.' }: { name?: string; description?: string } = {}): Tool =>
  defineTool({
    name,
    description,
    parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
    execute: (args: { q: string }) => ({ hits: [`${args.q}.ts`] }),
  }) as Tool;
