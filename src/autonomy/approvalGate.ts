/**
 * The approval gate: a human (or a policy function) approves risky steps before they run.
 *
 * - `read_only` steps never ask: approved with reason `read_only`, no audit event.
 * - `mutation` steps are approved without asking (reason `window`) while the agent's approval
 *   window is open, i.e. while an earlier approval of any step of that agent (mutation or
 *   destructive) is less than `windowMs` old on the injected clock. Otherwise the approver is
 *   asked, and approving opens (or refreshes) the window. A window approval does not refresh it.
 * - `destructive` steps always ask and never use the window, but approving one opens the window
 *   for the agent's later mutations.
 * - An unknown risk (a JavaScript caller) is treated as `destructive`.
 * - No approver configured → denied with reason `no approver`. An approver that throws, rejects or
 *   answers something other than `true` / `{ approved: true }` → denied; `request()` never throws.
 * - Audit events on the optional bus: `approval.requested` when a decision has to be made (the
 *   window does not cover the step), then `approval.granted` or `approval.denied`; a window
 *   approval emits only `approval.granted` (reason `window`). Each carries agentId, agentName,
 *   action, risk and reason.
 * - `closeWindow(agentId)` closes the window, and an approval still pending at that moment does
 *   not reopen it (it still approves its own step).
 * - `onWindowOpen(listener)`: told the agent id every time an explicit approval opens or refreshes
 *   a window (the coordinator continues that agent's finished executions then).
 * @module
 */
import { systemClock, type Clock } from '../clock.js';
import { ConfigError, errorMessage } from '../errors.js';
import type { EventBus } from './eventBus.js';
import { DEFAULT_APPROVAL_WINDOW_MS } from '../host/async/approvalRules.js';
import type { ToolRisk } from '../tools/defineTool.js';

export interface ApprovalRequest {
  agentId: string;
  agentName?: string;
  /** A tool name, or a proactive trigger name. */
  action: string;
  risk: ToolRisk;
  args?: unknown;
  /** Why the step is wanted, shown to the approver. */
  reason?: string;
}

export interface ApprovalDecision {
  approved: boolean;
  /** `approved`, `window`, `read_only`, `denied: …` or `no approver`. */
  reason: string;
}

type ApproverAnswer = boolean | { approved: boolean; reason?: string };

export type Approver = (request: ApprovalRequest) => ApproverAnswer | Promise<ApproverAnswer>;

export interface ApprovalGateOptions {
  /** Asked for every step the window does not cover. Without one, such steps are denied. */
  approver?: Approver;
  /** How long an approval covers the agent's later mutations; default 30 minutes. 0 disables the window. */
  windowMs?: number;
  clock?: Clock;
  bus?: EventBus;
}

export { DEFAULT_APPROVAL_WINDOW_MS };

export class ApprovalGate {
  readonly #approver: Approver | undefined;
  readonly #windowMs: number;
  readonly #clock: Clock;
  readonly #bus: EventBus | undefined;
  /** agentId → clock time of the agent's last explicit approval. */
  readonly #approvedAt = new Map<string, number>();
  /** agentId → bumped by closeWindow, so an approval pending across it does not reopen the window. */
  readonly #epochs = new Map<string, number>();
  readonly #windowListeners = new Set<(agentId: string) => void>();

  constructor(options: ApprovalGateOptions = {}) {
    const windowMs = options.windowMs ?? DEFAULT_APPROVAL_WINDOW_MS;
    if (typeof windowMs !== 'number' || !Number.isFinite(windowMs) || windowMs < 0) {
      throw new ConfigError(`approval gate windowMs must be a finite number >= 0, got ${String(windowMs)}`, {
        details: { option: 'windowMs', value: windowMs },
      });
    }
    if (options.approver !== undefined && typeof options.approver !== 'function') {
      throw new ConfigError('approval gate approver must be a function', { details: { option: 'approver' } });
    }
    this.#approver = options.approver;
    this.#windowMs = windowMs;
    this.#clock = options.clock ?? systemClock;
    this.#bus = options.bus;
  }

  /** Whether a mutation of this agent would be approved now without asking. */
  windowOpen(agentId: string): boolean {
    const at = this.#approvedAt.get(agentId);
    return at !== undefined && this.#clock.now() - at < this.#windowMs;
  }

  /** Listen for windows opening (an explicit approval); returns the unsubscribe function. A listener that throws is ignored. */
  onWindowOpen(listener: (agentId: string) => void): () => void {
    this.#windowListeners.add(listener);
    return () => void this.#windowListeners.delete(listener);
  }

  /** Close an agent's approval window (e.g. when its task ends). */
  closeWindow(agentId: string): void {
    this.#approvedAt.delete(agentId);
    this.#epochs.set(agentId, (this.#epochs.get(agentId) ?? 0) + 1);
  }

  async request(req: ApprovalRequest): Promise<ApprovalDecision> {
    const risk: ToolRisk = req.risk === 'read_only' || req.risk === 'mutation' || req.risk === 'destructive' ? req.risk : 'destructive';
    if (risk === 'read_only') return { approved: true, reason: 'read_only' };

    if (risk === 'mutation' && this.windowOpen(req.agentId)) {
      return this.#decide(req, risk, { approved: true, reason: 'window' });
    }

    this.#emit('approval.requested', req, risk, req.reason);
    const approver = this.#approver;
    if (!approver) return this.#decide(req, risk, { approved: false, reason: 'no approver' });

    const epoch = this.#epochs.get(req.agentId) ?? 0;
    let answer: ApproverAnswer;
    try {
      answer = await approver(req);
    } catch (err) {
      return this.#decide(req, risk, { approved: false, reason: `denied: approver failed: ${errorMessage(err)}` });
    }

    const approved = answer === true || (typeof answer === 'object' && answer !== null && answer.approved === true);
    if (!approved) {
      const given = typeof answer === 'object' && answer !== null ? answer.reason : undefined;
      const why = typeof given === 'string' && given.trim() !== '' ? given : 'rejected by approver';
      return this.#decide(req, risk, { approved: false, reason: `denied: ${why}` });
    }
    const opened = (this.#epochs.get(req.agentId) ?? 0) === epoch;
    if (opened) this.#approvedAt.set(req.agentId, this.#clock.now());
    const decision = this.#decide(req, risk, { approved: true, reason: 'approved' });
    if (opened) {
      for (const listener of [...this.#windowListeners]) {
        try {
          listener(req.agentId);
        } catch {
          // A listener's failure must not turn an approval into a denial.
        }
      }
    }
    return decision;
  }

  #decide(req: ApprovalRequest, risk: ToolRisk, decision: ApprovalDecision): ApprovalDecision {
    this.#emit(decision.approved ? 'approval.granted' : 'approval.denied', req, risk, decision.reason);
    return decision;
  }

  #emit(type: string, req: ApprovalRequest, risk: ToolRisk, reason: string | undefined): void {
    this.#bus?.emit({
      type,
      at: this.#clock.now(),
      agentId: req.agentId,
      agentName: req.agentName,
      action: req.action,
      risk,
      reason,
    });
  }
}
