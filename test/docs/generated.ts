/**
 * The parts of the README that mirror code, generated from the code: the lifecycle diagram (from
 * the agent machine), the CLI commands and flags (spec.ts), the exit codes (EXIT_ROWS), the
 * coordinator options (OPTION_DOCS, defaults from resolveOptions), the config file keys
 * (CONFIG_SCHEMA) and the error codes (ERROR_CODES); plus fixtures/troupe.config.schema.json.
 * `npm run docs` writes them; test/unit/docs.test.ts fails when the README or the schema file drifts.
 * @module
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { AnyStateNode } from 'xstate';
import { agentMachine } from '../../machines/agentMachine.js';
import { CONFIG_SCHEMA } from '../../src/cli/configSchema.js';
import { EXIT_ROWS } from '../../src/cli/exitCodes.js';
import { FLAGS, type FlagName } from '../../src/cli/flags.js';
import { COMMANDS } from '../../src/cli/spec.js';
import { ERROR_CODES } from '../../src/errors.js';
import { resolveOptions } from '../../src/host/options.js';
import { LIMIT_DOCS, OPTION_DOCS, type OptionDoc } from '../../src/host/optionsDoc.js';
import { DEFAULT_LIMITS } from '../../src/host/options.js';

export const README = fileURLToPath(new URL('../../README.md', import.meta.url));
export const SCHEMA_FILE = fileURLToPath(new URL('../../fixtures/troupe.config.schema.json', import.meta.url));

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

// ── the lifecycle, from the agent machine ──────────────────────────────────────────────────────

/** Words for the machine's guards and events; anything not listed is shown by its name. */
const WORDS: Record<string, string> = {
  'isOutcome:finish': 'agent_finish / finish',
  'isOutcome:failed': 'provider error',
  'isOutcome:crashed': 'anything escaping a turn',
  'isOutcome:stopped': 'budget, reserve',
  'isOutcome:budgetPaused': 'pause policy',
  isStopRequested: 'stop',
  'xstate.and:isRecoveryExhausted+isInteractive': '3 plain-text turns (interactive)',
  isRecoveryExhausted: '3 plain-text turns (autonomous)',
  'isWaitFor:agents': 'wait_for_agents',
  'isWaitFor:user': 'respond_to_user',
  isTurnLimitAfterThisTurn: 'max turns',
  isTurnLimitReached: 'max turns',
  'xstate.error.actor.cycle': 'anything escaping a turn',
  'agent.message': 'a message',
  'agent.stop': 'stop',
  'agent.idleTimeout': 'the idle timer',
  'agent.deadlock': 'a dead wait',
  'xstate.after.idleResume': 'the idle timer',
  isIdleExhausted: '3rd idle timeout',
  'budget.resume': 'budget resumed',
  isNewerEpoch: 'budget resumed',
  isRevivingMessage: 'a message (interactive)',
  isFromUser: 'a user message',
};

function guardKey(guard: unknown): string | null {
  if (guard === undefined) return null;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'function') {
    const g = guard as { guards?: unknown[]; name?: string };
    return g.guards ? `xstate.and:${g.guards.map(guardKey).join('+')}` : (g.name ?? 'guard');
  }
  const { type, params } = guard as { type: string; params?: Record<string, unknown> };
  const param = params
    ? Object.values(params)
        .filter((v) => typeof v === 'string')
        .at(-1)
    : undefined;
  return param === undefined ? type : `${type}:${param}`;
}

const eventKey = (event: string) => (event.startsWith('xstate.after.') ? 'xstate.after.idleResume' : event);

/** The top-level state a (possibly nested) state node belongs to. */
const topOf = (node: AnyStateNode): string => (node.parent?.parent ? topOf(node.parent) : node.key);

function lifecycleDiagram(): string {
  const edges = new Map<string, string[]>();
  const visit = (node: AnyStateNode) => {
    const from = topOf(node);
    const transitions: [string, { guard?: unknown; target?: readonly AnyStateNode[] }][] = [];
    for (const [event, list] of node.transitions) for (const t of list) transitions.push([event, t]);
    for (const t of node.always ?? []) transitions.push(['always', t]);
    for (const t of node.after) transitions.push([t.eventType, t]);
    for (const [event, t] of transitions) {
      for (const target of t.target ?? []) {
        if (from === 'boot') continue;
        const key = guardKey(t.guard);
        const label = (key !== null ? WORDS[key] : undefined) ?? WORDS[eventKey(event)] ?? key ?? eventKey(event);
        const edge = `${from} --> ${topOf(target)}`;
        const labels = edges.get(edge) ?? [];
        if (!labels.includes(label)) labels.push(label);
        edges.set(edge, labels);
      }
    }
    for (const child of Object.values(node.states)) visit(child);
  };
  visit(agentMachine.root);
  return ['```mermaid', 'stateDiagram-v2', '  [*] --> running', ...[...edges].map(([edge, labels]) => `  ${edge}: ${labels.join(', ')}`), '```'].join('\n');
}

// ── the CLI, from spec.ts ──────────────────────────────────────────────────────────────────────

function cliTables(): string {
  // One line per command: what it does, then its flags by name (`troupe <command> --help` says what each does).
  const name = (f: FlagName) => `\`${FLAGS[f].syntax.replace(/^-v, /, '').split(' ')[0]}\``;
  return COMMANDS.map((c) => `- \`troupe ${c.name}${c.args ? ` ${c.args}` : ''}\` ${c.summary} · ${c.flags.map(name).join(' ')}`).join('\n');
}

// ── exit codes, options, config keys, errors ───────────────────────────────────────────────────

function exitCodeTable(): string {
  const rows = Object.values(EXIT_ROWS).sort((a, b) => a.code - b.code);
  return [
    '| code | meaning |',
    '|---|---|',
    ...rows.map((r) => `| ${r.code} | ${cell(r.meaning)}${r.errors.length ? ` (${r.errors.map((e) => `\`${e}\``).join(', ')})` : ''} |`),
  ].join('\n');
}

function optionsTable(): string {
  const resolved = resolveOptions({ model: { complete: () => Promise.reject(new Error('unused')) } });
  const rows = ['| option | default | meaning |', '|---|---|---|'];
  for (const [name, doc] of Object.entries(OPTION_DOCS) as [string, OptionDoc][]) {
    if (name === 'limits') {
      // The limits on one row: each with its default (their TSDoc on `Limits` says more).
      const limits = Object.entries(LIMIT_DOCS).map(
        ([limit, meaning]) => `\`${limit}\` ${DEFAULT_LIMITS[limit as keyof typeof DEFAULT_LIMITS].toLocaleString('en-US')} (${meaning})`,
      );
      rows.push(`| \`limits\` | see meaning | ${cell(limits.join(', '))} |`);
      continue;
    }
    rows.push(`| \`${name}\` | ${doc.default ? doc.default(resolved) : '—'} | ${cell(doc.meaning)} |`);
  }
  return rows.join('\n');
}

/** The types are in the schema file (editors read it); the README lists keys and meanings. */
interface SchemaNode {
  description?: string;
  properties?: Record<string, SchemaNode>;
}

function configTable(): string {
  const rows = ['| key | meaning |', '|---|---|'];
  for (const [key, node] of Object.entries(CONFIG_SCHEMA.properties as Record<string, SchemaNode>)) {
    if (key === '$schema') continue;
    const fields = node.properties ? ` \`{ ${Object.keys(node.properties).join(', ')} }\`` : '';
    rows.push(`| \`${key}\`${fields} | ${cell(node.description ?? '')} |`);
  }
  return rows.join('\n');
}

function errorTable(): string {
  return [
    '| code | retryable | meaning |',
    '|---|---|---|',
    ...Object.entries(ERROR_CODES).map(([code, e]) => `| \`${code}\` | ${e.retryable ? 'yes' : 'no'} | ${cell(e.description)} |`),
  ].join('\n');
}

const BLOCKS: Record<string, () => string> = {
  lifecycle: lifecycleDiagram,
  cli: cliTables,
  'exit-codes': exitCodeTable,
  options: optionsTable,
  config: configTable,
  errors: errorTable,
};

export const schemaFile = () => `${JSON.stringify(CONFIG_SCHEMA, null, 2)}\n`;

/** The README with every `<!-- generated:NAME -->…<!-- /generated:NAME -->` block regenerated. */
export function regenerate(readme: string): string {
  let out = readme;
  for (const [name, make] of Object.entries(BLOCKS)) {
    const open = `<!-- generated:${name} (npm run docs) -->`;
    const close = `<!-- /generated:${name} -->`;
    const start = out.indexOf(open);
    const end = out.indexOf(close);
    if (start < 0 || end < start) throw new Error(`README.md has no ${open} … ${close} block`);
    out = `${out.slice(0, start + open.length)}\n${make()}\n${out.slice(end)}`;
  }
  return out;
}

/** `npm run docs`: write the README's generated blocks and the schema file. */
export function writeDocs(): void {
  writeFileSync(README, regenerate(readFileSync(README, 'utf8')));
  writeFileSync(SCHEMA_FILE, schemaFile());
}
