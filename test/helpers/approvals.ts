/** The destructive tool the approval suites ask about: it records every run of it. */
import { defineTool } from '../../src/tools/defineTool.js';

export function dropTableTool() {
  const runs: Record<string, unknown>[] = [];
  const tool = defineTool({
    name: 'drop_table',
    description: 'Drop a table.',
    parameters: { type: 'object', properties: { table: { type: 'string' } }, required: ['table'], additionalProperties: false },
    risk: 'destructive',
    execute: (args: { table: string }) => {
      runs.push(args);
      return `dropped ${args.table}`;
    },
  });
  return { runs, tool };
}
