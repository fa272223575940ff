#!/usr/bin/env node
/**
 * The `troupe` command. For now it runs the offline demo team; run/resume/status/tree/send/stop
 * arrive with the CLI issue.
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createCoordinator } from '../coordinator/createCoordinator.js';
import type { TreeNode } from '../coordinator/registry.js';
import { isTroupeError } from '../errors.js';
import { scriptedModel, type Script } from '../model/scriptedModel.js';

const USAGE = `troupe — a durable coordinator for teams of LLM agents

Usage:
  troupe demo [--json]   run the offline demo team (no network, no API key)
  troupe --help

run, resume, status, tree, send and stop arrive with the CLI issue.`;

function findFixture(name: string): string {
  // Works from src/cli (tests) and dist/src/cli (the built bin).
  for (const up of ['../../fixtures', '../../../fixtures']) {
    const path = fileURLToPath(new URL(`${up}/scenarios/${name}`, import.meta.url));
    if (existsSync(path)) return path;
  }
  throw new Error(`fixture ${name} not found`);
}

function printTree(nodes: TreeNode[], indent = ''): void {
  for (const n of nodes) {
    console.log(`${indent}- ${n.name} (${n.id}) ${n.status}  turns=${n.turns}${n.lastTool ? `  last=${n.lastTool}` : ''}`);
    printTree(n.children, `${indent}  `);
  }
}

async function demo(json: boolean): Promise<number> {
  const script = JSON.parse(readFileSync(findFixture('demo.json'), 'utf8')) as Script;
  // Short backoff so the rate-limited worker recovers quickly on the real clock.
  const coordinator = createCoordinator({ model: scriptedModel(script), retry: { baseDelayMs: 200 } });
  if (!json) console.log(`${script.description ?? ''}\n`);
  coordinator.subscribe((event) => {
    if (json) console.log(JSON.stringify(event));
    else if (event.type === 'agent.status') console.log(`  ${event.name.padEnd(8)} ${event.from ?? 'new'} → ${event.to}`);
  });
  const rootId = await coordinator.start({ name: 'lead', task: 'Review this repository with a small team.' });
  const root = await coordinator.waitFor(rootId, ['completed', 'stopped', 'failed', 'crashed'], { timeoutMs: 60_000 });
  await coordinator.whenIdle();
  if (json) {
    console.log(JSON.stringify({ type: 'run.finished', tree: coordinator.tree(), report: root.report }));
  } else {
    console.log('\nTeam:');
    printTree(coordinator.tree());
    console.log(`\nReport (${root.status}):\n${root.report?.summary ?? root.error?.message ?? '(none)'}`);
  }
  await coordinator.shutdown();
  return root.status === 'completed' ? 0 : 1;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h') {
    console.log(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command === 'demo') return demo(rest.includes('--json'));
  console.error(`troupe: "${command}" is not available yet.\n\n${USAGE}`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(isTroupeError(err) ? `${err.code}: ${err.message}` : err);
    process.exit(1);
  },
);
