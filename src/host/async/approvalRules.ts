/**
 * Approval rules (option `approvals` as rules, issue 33 item 2): which steps ask a person, which
 * are pre-authorised, what a run without a user does, and how long an approval's window lasts.
 * Checked once, here; host/async/approvals.ts applies them.
 * @module
 */
import { ConfigError } from '../../errors.js';

export type ApprovalRisk = 'read_only' | 'mutation' | 'destructive';

/** How long an approval lets the agent's later mutations run without asking, by default. */
export const DEFAULT_APPROVAL_WINDOW_MS = 30 * 60_000;

/** Which steps ask a person (option `approvals` as rules). */
export interface ApprovalRules {
  /** The risks that ask (default: destructive). A read-only step never asks. */
  ask?: ('mutation' | 'destructive')[];
  /** Tool names pre-authorised: never ask (`name*` matches a prefix). */
  allow?: string[];
  /** A run without a user (not interactive): `refuse` such steps (default) or `ask` anyway. */
  unattended?: 'refuse' | 'ask';
  /** How long an approval lets the agent's later mutations run without asking (default 30 min; 0: never). */
  windowMs?: number;
}

export interface ResolvedApprovalRules {
  ask: ReadonlySet<ApprovalRisk>;
  allow: readonly string[];
  unattended: 'refuse' | 'ask';
  windowMs: number;
}

const show = (value: unknown) => `${typeof value === 'string' ? JSON.stringify(value) : String(value)} (${typeof value})`;

export const isRules = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && typeof (value as { request?: unknown }).request !== 'function';

const RULE_KEYS = new Set(['ask', 'allow', 'unattended', 'windowMs']);

/** Durable approval rules, checked (a gate or no approvals: null). */
export function resolveApprovalRules(value: unknown): ResolvedApprovalRules | null {
  if (!isRules(value)) return null;
  for (const key of Object.keys(value))
    if (!RULE_KEYS.has(key)) throw new ConfigError(`Unknown approvals rule ${JSON.stringify(key)} (expected ask, allow, unattended, windowMs)`);
  const ask = value.ask ?? ['destructive'];
  if (!Array.isArray(ask) || ask.some((r) => r !== 'mutation' && r !== 'destructive')) {
    throw new ConfigError(`Expected approvals.ask to be a list of "mutation" and "destructive", got ${show(value.ask)}`);
  }
  const allow = value.allow ?? [];
  if (!Array.isArray(allow) || allow.some((n) => typeof n !== 'string' || n === '')) {
    throw new ConfigError(`Expected approvals.allow to be a list of tool names, got ${show(value.allow)}`);
  }
  const unattended = value.unattended ?? 'refuse';
  if (unattended !== 'refuse' && unattended !== 'ask')
    throw new ConfigError(`Expected approvals.unattended to be "refuse" or "ask", got ${show(value.unattended)}`);
  const windowMs = value.windowMs ?? DEFAULT_APPROVAL_WINDOW_MS;
  if (typeof windowMs !== 'number' || !Number.isFinite(windowMs) || windowMs < 0) {
    throw new ConfigError(`Expected approvals.windowMs to be a number >= 0, got ${show(value.windowMs)}`);
  }
  return { ask: new Set(ask as ('mutation' | 'destructive')[]), allow: allow as string[], unattended, windowMs };
}
