/**
 * createCoordinator's options resolved: every option validated up front, before any actor starts or
 * any row is written, with messages that say what was expected and what was given, and its default
 * filled in (the option types and the defaults users read are in options.ts).
 * @module
 */
import { DEFAULT_IDLE_RESUME_MS } from '../../machines/types.js';
import { ConfigError } from '../errors.js';
import { checkPrice, requirePriceForBudget } from '../model/prices.js';
import { DEFAULT_NOTES_MAX_CHARS } from '../notes/notes.js';
import type { Model, ModelPrice } from '../model/types.js';
import type { BreakerStore } from '../providers/breaker.js';
import { processQuotaStore, type QuotaStore } from '../providers/quota.js';
import type { StorePort } from '../store/port.js';
import type { Store } from '../store/types.js';
import { isRules, resolveApprovalRules } from './async/approvalRules.js';
import { DEFAULT_MAX_LAG_MS, type LagSource } from './calls/admission.js';
import { resolveProfiles } from './profiles.js';
import {
  DEFAULT_LIMITS,
  DEFAULT_RESERVE_FRACTION,
  type ApprovalPolicy,
  type BudgetOptions,
  type CoordinatorOptions,
  type Limits,
  type ResolvedOptions,
  type ReviewOptions,
} from './options.js';

const show = (value: unknown) => `${typeof value === 'string' ? JSON.stringify(value) : String(value)} (${typeof value})`;

function integer(name: string, value: unknown, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new ConfigError(`Expected ${name} to be an integer >= ${min}, got ${show(value)}`);
  }
  return value;
}

function positive(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new ConfigError(`Expected ${name} to be a finite number > 0, got ${show(value)}`);
  }
  return value;
}

function oneOf<T extends string>(name: string, value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (!allowed.includes(value as T)) {
    throw new ConfigError(`Expected ${name} to be one of ${allowed.map((a) => `"${a}"`).join(', ')}, got ${show(value)}`);
  }
  return value as T;
}

/** Adaptive admission of model calls: off unless asked (see CoordinatorOptions.concurrency). */
function resolveAdaptive(value: unknown): ResolvedOptions['concurrency']['adaptive'] {
  if (value === undefined || value === false) return null;
  if (value === true) return { maxLagMs: DEFAULT_MAX_LAG_MS, lag: null };
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(`Expected concurrency.adaptive to be a boolean or { maxLagMs?, lag? }, got ${show(value)}`);
  }
  const { maxLagMs, lag } = value as { maxLagMs?: unknown; lag?: unknown };
  if (lag !== undefined && typeof lag !== 'function') throw new ConfigError(`Expected concurrency.adaptive.lag to be a function, got ${show(lag)}`);
  return { maxLagMs: positive('concurrency.adaptive.maxLagMs', maxLagMs, DEFAULT_MAX_LAG_MS), lag: (lag as LagSource | undefined) ?? null };
}

/** How often the live stream's buffered rows are committed when nothing else commits (ms). */
const DEFAULT_STREAM_FLUSH_MS = 100;

function resolveStream(value: unknown): ResolvedOptions['stream'] {
  if (value === false) return false;
  if (value === undefined) return { flushMs: DEFAULT_STREAM_FLUSH_MS, asked: false };
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(`Expected stream to be false or { flushMs }, got ${show(value)}`);
  }
  return { flushMs: integer('stream.flushMs', (value as { flushMs?: unknown }).flushMs, DEFAULT_STREAM_FLUSH_MS, 1), asked: true };
}

function boolean(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new ConfigError(`Expected ${name} to be a boolean, got ${show(value)}`);
  return value;
}

/** A budget limit: finite and > 0 (a typed CONFIG_INVALID otherwise). */
export const positiveLimit = (name: string, value: unknown): number => positive(name, value, 1);

export function resolveBudget(budget: BudgetOptions | undefined): ResolvedOptions['budget'] {
  const limitUsd = budget?.limitUsd === undefined ? null : positive('budget.limitUsd', budget.limitUsd, 1);
  const reserveFraction = positive('budget.reserveFraction', budget?.reserveFraction, DEFAULT_RESERVE_FRACTION);
  if (reserveFraction > 1) throw new ConfigError(`Expected budget.reserveFraction to be <= 1, got ${show(reserveFraction)}`);
  return {
    limitUsd,
    reserveFraction,
    policy: oneOf('budget.policy', budget?.policy, ['stop', 'pause'], 'stop'),
    prices: resolvePrices(budget?.prices),
  };
}

function resolvePrices(prices: unknown): Record<string, ModelPrice> {
  if (prices === undefined) return {};
  if (typeof prices !== 'object' || prices === null || Array.isArray(prices)) {
    throw new ConfigError(`Expected budget.prices to be an object keyed by model name, got ${show(prices)}`);
  }
  const out: Record<string, ModelPrice> = {};
  for (const [model, price] of Object.entries(prices)) out[model] = checkPrice(`budget.prices["${model}"]`, price);
  return out;
}

function resolveRateLimit(value: unknown): ResolvedOptions['rateLimit'] {
  if (value === undefined) return null;
  const limit = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  if (limit.requests === undefined || limit.intervalMs === undefined) {
    throw new ConfigError(`Expected rateLimit to be { requests, intervalMs }, got ${typeof value === 'object' ? JSON.stringify(value) : show(value)}`);
  }
  return { requests: integer('rateLimit.requests', limit.requests, 0, 1), intervalMs: integer('rateLimit.intervalMs', limit.intervalMs, 0, 1) };
}

function resolveQuota(value: unknown): ResolvedOptions['quota'] {
  if (value === undefined) return null;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(`Expected quota to be { requestsPerMinute?, tokensPerMinute? }, got ${show(value)}`);
  }
  const v = value as Record<string, unknown>;
  for (const key of Object.keys(v)) if (key !== 'requestsPerMinute' && key !== 'tokensPerMinute') throw new ConfigError(`Unknown option quota.${key}`);
  const requestsPerMinute = v.requestsPerMinute === undefined ? null : integer('quota.requestsPerMinute', v.requestsPerMinute, 0, 1);
  const tokensPerMinute = v.tokensPerMinute === undefined ? null : integer('quota.tokensPerMinute', v.tokensPerMinute, 0, 1);
  return requestsPerMinute === null && tokensPerMinute === null ? null : { requestsPerMinute, tokensPerMinute };
}

function resolveQuotaStore(value: unknown): QuotaStore {
  if (value === undefined) return processQuotaStore;
  const store = value as Partial<QuotaStore> | null;
  if (
    typeof store !== 'object' ||
    store === null ||
    typeof store.take !== 'function' ||
    typeof store.adjust !== 'function' ||
    typeof store.pause !== 'function'
  ) {
    throw new ConfigError(`Expected quotaStore to be a QuotaStore { take, adjust, pause }, got ${show(value)}`);
  }
  return value as QuotaStore;
}

function resolveReview(value: unknown): ResolvedOptions['review'] {
  if (value === undefined) return null;
  if (typeof value !== 'object' || value === null) throw new ConfigError(`Expected review to be { everyTurns, maxSteps? }, got ${show(value)}`);
  const v = value as Partial<ReviewOptions>;
  for (const key of Object.keys(v))
    if (key !== 'everyTurns' && key !== 'maxSteps' && key !== 'subAgents') throw new ConfigError(`Unknown option review.${key}`);
  if (v.everyTurns === undefined) throw new ConfigError('Expected review.everyTurns to be an integer >= 1, got undefined');
  const maxSteps = integer('review.maxSteps', v.maxSteps, 3, 1);
  if (maxSteps > 10) throw new ConfigError(`Expected review.maxSteps to be at most 10, got ${maxSteps}`);
  if (v.subAgents !== undefined && typeof v.subAgents !== 'boolean')
    throw new ConfigError(`Expected review.subAgents to be a boolean, got ${show(v.subAgents)}`);
  return { everyTurns: integer('review.everyTurns', v.everyTurns, 1, 1), maxSteps, subAgents: v.subAgents ?? false };
}

function resolveApprovals(value: unknown): ApprovalPolicy | null {
  if (value === undefined || isRules(value)) return null;
  const v = value as Partial<ApprovalPolicy> | null;
  if (typeof v !== 'object' || v === null || typeof v.request !== 'function' || typeof v.windowOpen !== 'function') {
    throw new ConfigError(
      `Expected approvals to be an ApprovalGate (request() and windowOpen()) or rules ({ ask, allow, unattended, windowMs, agents }), got ${show(value)}`,
    );
  }
  return v as ApprovalPolicy;
}

/** `limits` with defaults filled in, validated; throws ConfigError naming the first invalid one. */
export function resolveLimits(given: Partial<Limits> | undefined): Limits {
  const l = given ?? {};
  if (typeof l !== 'object' || l === null) throw new ConfigError(`Expected limits to be an object, got ${show(l)}`);
  const known = new Set(Object.keys(DEFAULT_LIMITS));
  for (const key of Object.keys(l)) if (!known.has(key)) throw new ConfigError(`Unknown option limits.${key}`);
  return {
    maxDepth: integer('maxDepth', l.maxDepth, DEFAULT_LIMITS.maxDepth, 0),
    maxChildren: integer('maxChildren', l.maxChildren, DEFAULT_LIMITS.maxChildren, 0),
    maxAgents: integer('maxAgents', l.maxAgents, DEFAULT_LIMITS.maxAgents, 1),
    maxTurns: integer('maxTurns', l.maxTurns, DEFAULT_LIMITS.maxTurns, 1),
    maxMessageBytes: integer('maxMessageBytes', l.maxMessageBytes, DEFAULT_LIMITS.maxMessageBytes, 1),
    maxMailbox: integer('maxMailbox', l.maxMailbox, DEFAULT_LIMITS.maxMailbox, 1),
    maxResultTries: integer('maxResultTries', l.maxResultTries, DEFAULT_LIMITS.maxResultTries, 1),
  };
}

/** Validate every option; throws ConfigError naming the first invalid one. */
export function resolveOptions(options: CoordinatorOptions<Store | StorePort>): ResolvedOptions {
  if (typeof options !== 'object' || options === null) throw new ConfigError(`Expected an options object, got ${show(options)}`);
  const model = options.model as unknown;
  if (typeof model !== 'object' || model === null || typeof (model as Model).complete !== 'function') {
    throw new ConfigError(`Expected model to be an object with a complete(request, { signal }) method, got ${show(model)}`);
  }
  if (options.tools !== undefined && !Array.isArray(options.tools)) {
    throw new ConfigError(`Expected tools to be an array, got ${show(options.tools)}`);
  }
  const limits = resolveLimits(options.limits);
  const interactive = boolean('interactive', options.interactive, false);
  const retry = options.retry ?? {};
  const budget = resolveBudget(options.budget);
  requirePriceForBudget(options.model, budget.prices, budget.limitUsd);
  const auxiliaryModel = options.auxiliaryModel ?? null;
  if (auxiliaryModel !== null) {
    if (typeof auxiliaryModel !== 'object' || typeof (auxiliaryModel as Model).complete !== 'function') {
      throw new ConfigError(`Expected auxiliaryModel to be an object with a complete(request, { signal }) method, got ${show(auxiliaryModel)}`);
    }
    // Its calls count against the same limit: one it cannot price would spend unseen.
    requirePriceForBudget(auxiliaryModel, budget.prices, budget.limitUsd, 'budget.limitUsd (auxiliaryModel)');
  }
  return {
    interactive,
    holdTurns: boolean('holdTurns', options.holdTurns, false),
    mailReads: options.mailReads ?? null,
    strictMcp: boolean('strictMcp', options.strictMcp, false),
    stream: resolveStream(options.stream),
    limits,
    budget,
    idleResumeMs: integer('idleResumeMs', options.idleResumeMs, DEFAULT_IDLE_RESUME_MS, 1),
    toolTimeoutMs: integer('toolTimeoutMs', options.toolTimeoutMs, 120_000, 1),
    concurrency: {
      // One call in flight per agent the limits allow: a team as big as its limits is never held
      // back by a queue slot (issue 36: a fixed 8 ran 6.4 turns/s whatever the team's size; the
      // scale bench's K = 1,000 at ~95-99 % of ideal with one slot per agent).
      model: integer('concurrency.model', options.concurrency?.model, limits.maxAgents, 1),
      tools: integer('concurrency.tools', options.concurrency?.tools, 16, 1),
      adaptive: resolveAdaptive(options.concurrency?.adaptive),
    },
    rateLimit: resolveRateLimit(options.rateLimit),
    quota: resolveQuota(options.quota),
    quotaStore: resolveQuotaStore(options.quotaStore),
    messagePolicy: oneOf('messagePolicy', options.messagePolicy, ['family', 'any'], 'family'),
    interruptOnMessage: boolean('interruptOnMessage', options.interruptOnMessage, interactive),
    retry: {
      maxRetries: integer('retry.maxRetries', retry.maxRetries, 5, 0),
      baseDelayMs: integer('retry.baseDelayMs', retry.baseDelayMs, 2_000, 0),
      maxDelayMs: integer('retry.maxDelayMs', retry.maxDelayMs, 90_000, 0),
    },
    systemPrompt: options.systemPrompt,
    approvals: resolveApprovals(options.approvals),
    approvalRules: resolveApprovalRules(options.approvals),
    review: resolveReview(options.review),
    notes: resolveNotes(options.notes),
    session: resolveSession(options.session, options.model),
    reentry: resolveReentry(options.reentry),
    breaker: resolveBreaker(options.breaker),
    failurePatterns: resolveFailurePatterns(options.failurePatterns),
    auxiliaryModel,
    profiles: resolveProfiles(options.profiles, { tools: options.tools ?? [], prices: budget.prices, limitUsd: budget.limitUsd }),
  };
}

/**
 * The fields of an option that is `false` (off: null), absent (every default: {}) or an object;
 * anything else is CONFIG_INVALID naming `shape`.
 */
function policyFields(name: string, value: unknown, shape: string): Record<string, unknown> | null {
  if (value === false) return null;
  if (value !== undefined && (typeof value !== 'object' || value === null || Array.isArray(value))) {
    throw new ConfigError(`Expected ${name} to be false or { ${shape} }, got ${show(value)}`);
  }
  return (value ?? {}) as Record<string, unknown>;
}

function resolveNotes(value: unknown): ResolvedOptions['notes'] {
  const v = policyFields('notes', value, 'maxChars?');
  if (v) for (const key of Object.keys(v)) if (key !== 'maxChars') throw new ConfigError(`Unknown option notes.${key}`);
  return v && { maxChars: integer('notes.maxChars', v.maxChars, DEFAULT_NOTES_MAX_CHARS, 1) };
}

function resolveReentry(value: unknown): ResolvedOptions['reentry'] {
  const v = policyFields('reentry', value, 'maxWakes?, spacingMs?');
  return v && { maxWakes: integer('reentry.maxWakes', v.maxWakes, 20, 1), spacingMs: integer('reentry.spacingMs', v.spacingMs, 1_000, 0) };
}

function resolveBreaker(value: unknown): ResolvedOptions['breaker'] {
  const v = policyFields('breaker', value, 'failureThreshold?, cooldownMs?, openTimeoutMs?, store?, syncMs?');
  if (!v) return null;
  const store = v.store as Partial<BreakerStore> | undefined;
  if (store !== undefined && (typeof store !== 'object' || store === null || typeof store.read !== 'function' || typeof store.step !== 'function')) {
    throw new ConfigError(`Expected breaker.store to be a BreakerStore { read, step }, got ${show(store)}`);
  }
  return {
    failureThreshold: integer('breaker.failureThreshold', v.failureThreshold, 5, 1),
    cooldownMs: integer('breaker.cooldownMs', v.cooldownMs, 30_000, 1),
    openTimeoutMs: integer('breaker.openTimeoutMs', v.openTimeoutMs, 600_000, 1),
    share: store === undefined ? null : { store: store as BreakerStore, syncMs: integer('breaker.syncMs', v.syncMs, 1_000, 1) },
  };
}

function resolveFailurePatterns(value: unknown): ResolvedOptions['failurePatterns'] {
  const v = policyFields('failurePatterns', value, 'threshold?, windowMs?');
  return v && { threshold: integer('failurePatterns.threshold', v.threshold, 3, 2), windowMs: integer('failurePatterns.windowMs', v.windowMs, 600_000, 1) };
}

/** Images kept per session by default: recent screenshots stay, a long browsing session does not grow without bound. */
const DEFAULT_MAX_IMAGES = 20;
const DEFAULT_COMPACT_AT = 0.8;

function resolveSession(value: unknown, model: Model): ResolvedOptions['session'] {
  if (value !== undefined && (typeof value !== 'object' || value === null || Array.isArray(value))) {
    throw new ConfigError(`Expected session to be { maxImages?, compactAt? }, got ${show(value)}`);
  }
  const { maxImages, compactAt } = (value ?? {}) as { maxImages?: unknown; compactAt?: unknown };
  const share = positive('session.compactAt', compactAt, DEFAULT_COMPACT_AT);
  if (share > 1) throw new ConfigError(`Expected session.compactAt to be a share of the context window in (0, 1], got ${show(compactAt)}`);
  const window: unknown = model.contextWindow;
  if (window !== undefined && (typeof window !== 'number' || !Number.isInteger(window) || window <= 0)) {
    throw new ConfigError(`Expected model.contextWindow to be an integer > 0, got ${show(window)}`);
  }
  return {
    maxImages: maxImages === null ? null : integer('session.maxImages', maxImages, DEFAULT_MAX_IMAGES, 0),
    compactAt: share,
    contextWindow: (window as number | undefined) ?? null,
  };
}
