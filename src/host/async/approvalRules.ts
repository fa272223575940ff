/**
 * Approval rules (option `approvals` as rules, issue 33 item 2): which steps ask a person, which
 * are pre-authorised, what a run without a user does, and how long an approval's window lasts —
 * for the run, and per agent (`agents`, keyed by an agent's name or its profile). Checked once,
 * here; host/async/approvals.ts applies them.
 * @module
 */
import { ConfigError } from '../../errors.js';

export type ApprovalRisk = 'read_only' | 'mutation' | 'destructive';

/** How long an approval lets the agent's later mutations run without asking, by default. */
export const DEFAULT_APPROVAL_WINDOW_MS = 30 * 60_000;

/** One agent's rules: each field given replaces the run's, except `allow`, which adds to it. */
interface AgentApprovalRules {
  /** The risks that ask (default: destructive). A read-only step never asks. */
  ask?: ('mutation' | 'destructive')[];
  /** Tool names pre-authorised: never ask (`name*` matches a prefix). */
  allow?: string[];
  /** A run without a user (not interactive): `refuse` such steps (default) or `ask` anyway. */
  unattended?: 'refuse' | 'ask';
  /** How long an approval lets the agent's later mutations run without asking (default 30 min; 0: never). */
  windowMs?: number;
}

/** Which steps ask a person (option `approvals` as rules). */
export interface ApprovalRules extends AgentApprovalRules {
  /**
   * Per agent: the rules of the agents whose name, or else whose profile, matches the key
   * (`name*` matches a prefix; the first key in order wins), over the run's.
   */
  agents?: Record<string, AgentApprovalRules>;
}

export interface ResolvedRuleSet {
  ask: ReadonlySet<ApprovalRisk>;
  allow: readonly string[];
  unattended: 'refuse' | 'ask';
  windowMs: number;
}

export interface ResolvedApprovalRules extends ResolvedRuleSet {
  agents: readonly { key: string; rules: ResolvedRuleSet }[];
}

const show = (value: unknown) => `${typeof value === 'string' ? JSON.stringify(value) : String(value)} (${typeof value})`;

export const isRules = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && typeof (value as { request?: unknown }).request !== 'function';

/** Whether a name matches one of the patterns (`name*`: a prefix). */
export const matchesName = (patterns: readonly string[], name: string) =>
  patterns.some((p) => (p.endsWith('*') ? name.startsWith(p.slice(0, -1)) : p === name));

const SET_KEYS = ['ask', 'allow', 'unattended', 'windowMs'];

/** Durable approval rules, checked (a gate or no approvals: null). */
export function resolveApprovalRules(value: unknown): ResolvedApprovalRules | null {
  if (!isRules(value)) return null;
  const run = resolveSet(value, 'approvals', null, [...SET_KEYS, 'agents']);
  const agents = value.agents ?? {};
  if (typeof agents !== 'object' || agents === null || Array.isArray(agents)) {
    throw new ConfigError(`Expected approvals.agents to map agent names or profiles to rules, got ${show(value.agents)}`);
  }
  const perAgent = Object.entries(agents as Record<string, unknown>).map(([key, rules]) => {
    const path = `approvals.agents[${JSON.stringify(key)}]`;
    if (key === '' || key === '*') throw new ConfigError(`Expected ${path} to name an agent or a profile (the run's own rules apply to every agent)`);
    if (!isRules(rules)) throw new ConfigError(`Expected ${path} to be rules ({ ask, allow, unattended, windowMs }), got ${show(rules)}`);
    return { key, rules: resolveSet(rules, path, run, SET_KEYS) };
  });
  return { ...run, agents: perAgent };
}

/** The rules that apply to one agent: the first `agents` key matching its name, else its profile, else the run's. */
export function rulesFor(rules: ResolvedApprovalRules, agent: { name: string; profile?: string | undefined } | undefined): ResolvedRuleSet {
  if (!agent) return rules;
  const byName = rules.agents.find((a) => matchesName([a.key], agent.name));
  const profile = agent.profile;
  const byProfile = profile === undefined ? undefined : rules.agents.find((a) => matchesName([a.key], profile));
  return (byName ?? byProfile)?.rules ?? rules;
}

function resolveSet(value: Record<string, unknown>, path: string, base: ResolvedRuleSet | null, keys: string[]): ResolvedRuleSet {
  for (const key of Object.keys(value))
    if (!keys.includes(key)) throw new ConfigError(`Unknown ${path} rule ${JSON.stringify(key)} (expected ${keys.join(', ')})`);
  const ask = value.ask ?? (base ? [...base.ask] : ['destructive']);
  if (!Array.isArray(ask) || ask.some((r) => r !== 'mutation' && r !== 'destructive')) {
    throw new ConfigError(`Expected ${path}.ask to be a list of "mutation" and "destructive", got ${show(value.ask)}`);
  }
  const allow = value.allow ?? [];
  if (!Array.isArray(allow) || allow.some((n) => typeof n !== 'string' || n === '')) {
    throw new ConfigError(`Expected ${path}.allow to be a list of tool names, got ${show(value.allow)}`);
  }
  const unattended = value.unattended ?? base?.unattended ?? 'refuse';
  if (unattended !== 'refuse' && unattended !== 'ask')
    throw new ConfigError(`Expected ${path}.unattended to be "refuse" or "ask", got ${show(value.unattended)}`);
  const windowMs = value.windowMs ?? base?.windowMs ?? DEFAULT_APPROVAL_WINDOW_MS;
  if (typeof windowMs !== 'number' || !Number.isFinite(windowMs) || windowMs < 0) {
    throw new ConfigError(`Expected ${path}.windowMs to be a number >= 0, got ${show(value.windowMs)}`);
  }
  return {
    ask: new Set(ask as ('mutation' | 'destructive')[]),
    allow: [...(base?.allow ?? []), ...(allow as string[])],
    unattended,
    windowMs,
  };
}
