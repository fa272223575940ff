/**
 * The parts of the README that mirror code, generated from the code: the lifecycle diagram (from
 * the agent machine), the CLI commands (spec.ts), the exit codes (EXIT_ROWS, one line) and the
 * error codes (ERROR_CODES, with their retryable flag); plus fixtures/troupe.config.schema.json.
 * The full reference (options, config keys, exit codes and errors with their meanings) is not in
 * the README: `troupe help <topic>` prints it from the same code (src/cli/reference.ts).
 * `npm run docs` writes them; test/unit/docs.test.ts fails when the README or the schema file drifts.
 * @module
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { AnyStateNode } from 'xstate';
import { agentMachine } from '../../machines/agentMachine.js';
import { CONFIG_SCHEMA } from '../../src/cli/configSchema.js';
import { EXIT_ROWS } from '../../src/cli/exitCodes.js';
import { COMMANDS } from '../../src/cli/spec.js';
import { ERROR_CODES } from '../../src/errors.js';

export const README = fileURLToPath(new URL('../../README.md', import.meta.url));
export const SCHEMA_FILE = fileURLToPath(new URL('../../fixtures/troupe.config.schema.json', import.meta.url));

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
  'isWaitFor:timer': 'sleep_until',
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

function commandList(): string {
  // The commands by name, on one line: `troupe --help` says what each does, `troupe <command> --help` its flags.
  return `Commands: ${COMMANDS.map((c) => `\`${c.name}${c.args ? ` ${c.args}` : ''}\``).join(', ')}.`;
}

// ── exit codes and error codes, without their meanings (troupe help exit-codes / errors print them) ──

function exitCodeLine(): string {
  const rows = Object.entries(EXIT_ROWS).sort(([, a], [, b]) => a.code - b.code);
  return rows.map(([name, r]) => `\`${r.code}\` ${name.toLowerCase().replace(/_/g, ' ')}`).join(', ');
}

/** Every code, on two lines by its retryable flag (a list, not a table: the README stays short); test/unit/errors.test.ts reads them. */
function errorTable(): string {
  const codes = (retryable: boolean) =>
    Object.entries(ERROR_CODES)
      .filter(([, e]) => e.retryable === retryable)
      .map(([code]) => `\`${code}\``)
      .join(', ');
  return `Retryable: ${codes(true)}.\n\nNot retryable: ${codes(false)}.`;
}

const BLOCKS: Record<string, () => string> = {
  lifecycle: lifecycleDiagram,
  cli: commandList,
  'exit-codes': exitCodeLine,
  errors: errorTable,
};

export const schemaFile = () => `${JSON.stringify(CONFIG_SCHEMA, null, 2)}\n`;

/** The README with every `<!-- generated:NAME -->…<!-- /generated:NAME -->` block regenerated. */
export function regenerate(readme: string): string {
  // A block the code no longer generates would stay in the README unchecked.
  for (const [, name] of readme.matchAll(/<!-- generated:([\w-]+)/g))
    if (!(name! in BLOCKS)) throw new Error(`README.md has a generated:${name} block nothing generates`);
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
