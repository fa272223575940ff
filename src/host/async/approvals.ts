/**
 * Durable approvals (issue 33 items 1–3): a step the run's approval rules hold for a person is a
 * row, not a callback. Its life is four `approval` event rows of the run, each committed with its
 * effect, so any host (after a crash, on another worker) knows where it stands:
 * - `asked`: the tool, its arguments, its risk. The call answers the model at once that it waits
 *   for approval (nothing ran); the agent parks on it with wait_for_agents at no cost, as on an
 *   execution, and cannot finish while it is pending.
 * - `answered`: approved (with the arguments to run, edited or not) or denied with a reason. It
 *   arrives as an inbox request (`kind: 'approval'`) from the CLI, the dashboard or the API, and is
 *   applied once: a second answer changes nothing and says so.
 * - `started`: committed before an approved tool runs, so a crash while it runs is known to be in
 *   doubt (the agent is told so; the tool is not run again).
 * - `done`: the outcome, committed with the message that tells the agent (a notice, told once).
 *   A denial is done when answered: its message says the reason.
 * An approval opens the agent's window (`windowMs`): its later mutations run without asking, and
 * its finished executions continue it. The window is the last approval's time, so it survives a
 * restart with the rows. A host that runs no turns (the CLI applying a request to a run nobody
 * hosts) records the answer; the run's next host runs the tool.
 * @module
 */
import type { Logger } from 'pino';
import { matchesName, rulesFor, type ResolvedApprovalRules, type ResolvedRuleSet } from './approvalRules.js';
import { serializeError, TroupeError } from '../../errors.js';
import type { WriteOp } from '../../store/port.js';
import type { EventRow, InboxResult } from '../../store/types.js';
import type { CompiledTool } from '../../tools/defineTool.js';
import { isToolOutput } from '../../tools/toolOutput.js';
import type { AgentHandle } from '../agents/agents.js';

import type { ApprovalRisk } from './approvalRules.js';

export type { ApprovalRisk } from './approvalRules.js';

/** One approval as views and the API show it. */
export interface ApprovalView {
  id: string;
  agentId: string;
  agentName: string;
  tool: string;
  risk: ApprovalRisk;
  args: unknown;
  askedAt: number;
  state: 'pending' | 'approved' | 'denied' | 'ran' | 'failed' | 'in_doubt';
  /** The arguments approved (when edited), or the denial's reason. */
  answer?: { approved: boolean; args?: unknown; reason?: string; at: number };
  result?: string;
}

/** An answer to an approval (the payload of an inbox request of kind `approval`). */
export type ApprovalAnswer = { approval: string; approve: true; args?: Record<string, unknown> } | { approval: string; approve: false; reason: string };

export interface ApprovalsHost {
  readonly runId: string;
  readonly interactive: boolean;
  /** The host runs no turns: an approved tool is left to the next host. */
  readonly holdTurns: boolean;
  readonly logger: Logger;
  now(): number;
  stage(op: WriteOp): void;
  durable(): Promise<void>;
  find(id: string): AgentHandle | undefined;
  /** Whether the agent can still act on an answer (not terminal). */
  live(h: AgentHandle): boolean;
  userTool(h: AgentHandle, name: string): CompiledTool | undefined;
  runTool(h: AgentHandle, tool: CompiledTool, args: Record<string, unknown>, signal: AbortSignal, key: string): Promise<unknown>;
  /** A tool result may announce async executions: link them to the agent (as a turn does). */
  linkExecutions(h: AgentHandle, text: string): void;
  /** Tell the agent (a notice: queued once per key, wakes it once committed). */
  tell(agentId: string, content: string, noticeKey: string): void;
  /** After the answer is applied: views hear it. */
  emit(view: ApprovalView): void;
}

interface Row {
  id: string;
  agentId: string;
  tool: string;
  callId: string;
  risk: ApprovalRisk;
  args: unknown;
  askedAt: number;
  answer: { approved: boolean; args?: Record<string, unknown>; reason?: string; edited: boolean; at: number } | null;
  started: boolean;
  done: { state: 'ran' | 'failed' | 'in_doubt' | 'denied'; result: string } | null;
}

export const APPROVAL_EVENT = 'approval';

const RISKS: readonly ApprovalRisk[] = ['read_only', 'mutation', 'destructive'];

export class DurableApprovals {
  readonly #host: ApprovalsHost;
  readonly #rules: ResolvedApprovalRules | null;
  readonly #rows = new Map<string, Row>();
  /** agentId → the time of its last approval (its window). */
  readonly #approvedAt = new Map<string, number>();
  readonly #windowListeners = new Set<(agentId: string) => void>();
  /** Approved tools running on this host now. */
  readonly #running = new Set<Promise<void>>();
  /** Aborts approved tools still running at shutdown. */
  readonly #cancel = new AbortController();

  constructor(host: ApprovalsHost, rules: ResolvedApprovalRules | null) {
    this.#host = host;
    this.#rules = rules;
  }

  /** After a restart: the run's approval rows, in commit order. */
  restore(events: readonly EventRow[]): void {
    // An assent in chat opened the window as an approval does.
    for (const e of events) if (e.data.phase === 'assent' && e.agentId) this.#approvedAt.set(e.agentId, Math.max(e.at, this.#approvedAt.get(e.agentId) ?? 0));
    for (const row of fold(events).values()) {
      this.#rows.set(row.id, row);
      if (row.answer?.approved) this.#approvedAt.set(row.agentId, Math.max(row.answer.at, this.#approvedAt.get(row.agentId) ?? 0));
    }
  }

  /** After the agents are respawned: run what was approved while no host ran turns; report what a crash cut. */
  resume(): void {
    if (this.#host.holdTurns) return;
    for (const row of this.#rows.values()) {
      if (!row.answer?.approved || row.done) continue;
      if (row.started) {
        this.#finish(
          row,
          'in_doubt',
          `${row.tool} was started after its approval, but its host stopped before its result was recorded: whether it took effect is unknown. Check before calling it again.`,
        );
      } else this.#track(this.#run(row));
    }
  }

  /** The approval asked for a step (ApprovalAsker): approved at once, refused, or pending as a row. */
  request(req: { agentId: string; agentName?: string; action: string; risk: ApprovalRisk; args?: unknown; callId?: string }): Promise<{
    approved: boolean;
    reason: string;
    pending?: string;
  }> {
    const rules = this.#rulesOf(req.agentId);
    const risk = RISKS.includes(req.risk) ? req.risk : 'destructive';
    if (!rules || risk === 'read_only' || !rules.ask.has(risk)) return Promise.resolve({ approved: true, reason: 'policy' });
    if (matchesName(rules.allow, req.action)) return Promise.resolve({ approved: true, reason: 'allowed' });
    if (risk === 'mutation' && this.windowOpen(req.agentId)) return Promise.resolve({ approved: true, reason: 'window' });
    if (!this.#host.interactive && rules.unattended === 'refuse') {
      return Promise.resolve({
        approved: false,
        reason: `this run has no user to ask, and ${req.action} (${risk}) is not in approvals.allow`,
      });
    }
    const host = this.#host;
    const id = `ap-${this.#rows.size + 1}`;
    const row: Row = {
      id,
      agentId: req.agentId,
      tool: req.action,
      callId: req.callId ?? '',
      risk,
      args: req.args,
      askedAt: host.now(),
      answer: null,
      started: false,
      done: null,
    };
    this.#rows.set(id, row);
    this.#stage(row, { phase: 'asked', tool: row.tool, callId: row.callId, risk, args: row.args ?? {} });
    host.logger.info({ approval: id, tool: row.tool, agentId: row.agentId }, 'approval asked');
    host.emit(this.#view(row));
    return Promise.resolve({ approved: false, reason: 'pending', pending: id });
  }

  /**
   * The user assented in chat to the agent's stated plan (`record_assent`, quoting them): an
   * approval by another route, so it opens the agent's window, persisted like any answer.
   */
  assent(agentId: string, quote: string): { windowMs: number } {
    const host = this.#host;
    const rules = this.#rulesOf(agentId);
    if (!rules) throw new TroupeError('TOOL_NOT_ALLOWED', 'This run has no approval rules: nothing waits for an assent.');
    const at = host.now();
    host.stage({ op: 'appendEvent', row: { runId: host.runId, agentId, type: APPROVAL_EVENT, data: { phase: 'assent', quote }, at } });
    this.#open(agentId, at);
    return { windowMs: rules.windowMs };
  }

  windowOpen(agentId: string): boolean {
    const at = this.#approvedAt.get(agentId);
    const rules = this.#rulesOf(agentId);
    return at !== undefined && rules !== null && this.#host.now() - at < rules.windowMs;
  }

  /**
   * Whether the agent's finished executions continue it now: always when its rules let its
   * mutations run without asking (an execution is a mutation's effect), else inside its window.
   */
  continues(agentId: string): boolean {
    const rules = this.#rulesOf(agentId);
    return !rules?.ask.has('mutation') || this.windowOpen(agentId);
  }

  /** The rules that apply to the agent (its own under `agents`, else the run's; null: no rules). */
  #rulesOf(agentId: string): ResolvedRuleSet | null {
    if (!this.#rules) return null;
    const h = this.#host.find(agentId);
    return rulesFor(this.#rules, h ? { name: h.name, profile: h.terms?.profile } : undefined);
  }

  onWindowOpen(listener: (agentId: string) => void): () => void {
    this.#windowListeners.add(listener);
    return () => void this.#windowListeners.delete(listener);
  }

  /** The agent's approvals still waiting for an answer (what its wait parks on). */
  pendingFor(agentId: string): string[] {
    const out: string[] = [];
    for (const row of this.#rows.values()) if (row.agentId === agentId && row.answer === null) out.push(`approval ${row.id}`);
    return out;
  }

  get anyPending(): boolean {
    for (const row of this.#rows.values()) if (row.answer === null || (row.answer.approved && !row.done)) return true;
    return false;
  }

  list(): ApprovalView[] {
    return [...this.#rows.values()].map((row) => this.#view(row));
  }

  /** Apply an answer (an inbox request): staged with its effect; the caller commits. */
  answer(payload: Record<string, unknown>): InboxResult {
    const host = this.#host;
    const id = String(payload.approval);
    const row = this.#rows.get(id);
    if (!row) return { ok: false, code: 'APPROVAL_NOT_FOUND', message: `APPROVAL_NOT_FOUND: run ${host.runId} has no approval ${JSON.stringify(id)}` };
    if (row.answer) {
      return { ok: true, message: `approval ${id} was already ${row.answer.approved ? 'approved' : 'denied'}; nothing changed` };
    }
    const h = host.find(row.agentId);
    const name = h ? `${h.name} (${row.agentId})` : row.agentId;
    if (payload.approve !== true) {
      const reason = typeof payload.reason === 'string' && payload.reason.trim() !== '' ? payload.reason.trim() : 'denied';
      row.answer = { approved: false, reason, edited: false, at: host.now() };
      this.#stage(row, { phase: 'answered', approved: false, reason });
      this.#finish(row, 'denied', `${row.tool} was not approved: ${reason}. It did not run.`);
      return { ok: true, message: `approval ${id} denied: ${name} is told why` };
    }
    const edited = payload.args !== undefined;
    if (edited && (typeof payload.args !== 'object' || payload.args === null || Array.isArray(payload.args))) {
      return { ok: false, code: 'TOOL_INPUT_INVALID', message: 'TOOL_INPUT_INVALID: the approved arguments must be a JSON object' };
    }
    const args = (edited ? payload.args : row.args) as Record<string, unknown>;
    // Checked here when this host has the tool (a host that runs no turns may have no MCP servers).
    const tool = h ? host.userTool(h, row.tool) : undefined;
    const invalid = edited ? tool?.validate(args) : null;
    if (invalid) return { ok: false, code: 'TOOL_INPUT_INVALID', message: `TOOL_INPUT_INVALID: ${invalid.message}` };
    const at = host.now();
    row.answer = { approved: true, edited, at, ...(edited ? { args } : {}) };
    this.#stage(row, { phase: 'answered', approved: true, edited, ...(edited ? { args } : {}) });
    this.#open(row.agentId, at);
    if (!host.holdTurns) this.#track(this.#run(row));
    return { ok: true, message: `approval ${id} approved${edited ? ' with edited arguments' : ''}: ${row.tool} runs for ${name}` };
  }

  get busy(): boolean {
    return this.#running.size > 0;
  }

  /** Resolves once no approved tool is running here (a host lets its run go only then). */
  async settled(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
  }

  #track(run: Promise<void>): void {
    this.#running.add(run);
    const done = () => void this.#running.delete(run);
    run.then(done, done);
  }

  #open(agentId: string, at: number): void {
    this.#approvedAt.set(agentId, at);
    for (const listener of [...this.#windowListeners]) listener(agentId);
  }

  close(): void {
    this.#cancel.abort(new Error('shut down'));
  }

  /** Run an approved tool: `started` durable first, then the outcome and the agent's notice in one commit. */
  async #run(row: Row): Promise<void> {
    const host = this.#host;
    const h = host.find(row.agentId);
    if (!h || !host.live(h)) return this.#finish(row, 'failed', `${row.tool} did not run: the agent had ended before its approval.`);
    const tool = host.userTool(h, row.tool);
    if (!tool) return this.#finish(row, 'failed', `${row.tool} did not run: the tool is no longer offered to this agent.`);
    const args = (row.answer?.args ?? row.args ?? {}) as Record<string, unknown>;
    row.started = true;
    this.#stage(row, { phase: 'started' });
    try {
      await host.durable();
      const out = await host.runTool(h, tool, args, this.#cancel.signal, `${host.runId}:approval:${row.id}`);
      const value = isToolOutput(out) ? out.value : out;
      const text = typeof value === 'string' ? value : JSON.stringify(value ?? null);
      host.linkExecutions(h, text);
      this.#finish(row, 'ran', `${row.tool} was approved${row.answer?.edited ? ' with edited arguments' : ''} and ran. Its result: ${text}`);
    } catch (err) {
      if (this.#cancel.signal.aborted) return;
      this.#finish(row, 'failed', `${row.tool} was approved but failed: ${serializeError(err).code}: ${serializeError(err).message}`);
    }
  }

  #finish(row: Row, state: NonNullable<Row['done']>['state'], text: string): void {
    row.done = { state, result: text };
    if (row.answer?.approved) this.#stage(row, { phase: 'done', state, result: text });
    this.#host.tell(row.agentId, `Approval ${row.id}: ${text}`, `approval:${this.#host.runId}:${row.id}`);
    this.#host.emit(this.#view(row));
  }

  #stage(row: Row, data: Record<string, unknown>): void {
    const host = this.#host;
    host.stage({ op: 'appendEvent', row: { runId: host.runId, agentId: row.agentId, type: APPROVAL_EVENT, data: { id: row.id, ...data }, at: host.now() } });
  }

  #view(row: Row): ApprovalView {
    return viewOf(row, this.#host.find(row.agentId)?.name ?? row.agentId);
  }
}

/** The rows the `approval` events of a run describe (the last word on each wins), in ask order. */
function fold(events: readonly EventRow[]): Map<string, Row> {
  const rows = new Map<string, Row>();
  for (const e of events) {
    const d = e.data;
    const id = String(d.id);
    if (d.phase === 'asked') {
      rows.set(id, {
        id,
        agentId: e.agentId ?? '',
        tool: String(d.tool),
        callId: String(d.callId),
        risk: RISKS.includes(d.risk as ApprovalRisk) ? (d.risk as ApprovalRisk) : 'destructive',
        args: d.args,
        askedAt: e.at,
        answer: null,
        started: false,
        done: null,
      });
      continue;
    }
    const row = rows.get(id);
    if (!row) continue;
    if (d.phase === 'answered') {
      row.answer = {
        approved: d.approved === true,
        edited: d.edited === true,
        at: e.at,
        ...(d.args !== undefined ? { args: d.args as Record<string, unknown> } : {}),
        ...(typeof d.reason === 'string' ? { reason: d.reason } : {}),
      };
      if (!row.answer.approved) row.done = { state: 'denied', result: row.answer.reason ?? '' };
    } else if (d.phase === 'started') row.started = true;
    else if (d.phase === 'done') {
      const state = d.state === 'ran' || d.state === 'in_doubt' ? d.state : 'failed';
      row.done = { state, result: String(d.result ?? '') };
    }
  }
  return rows;
}

function viewOf(row: Row, agentName: string): ApprovalView {
  const answer = row.answer;
  return {
    id: row.id,
    agentId: row.agentId,
    agentName,
    tool: row.tool,
    risk: row.risk,
    args: row.args,
    askedAt: row.askedAt,
    state: !answer ? 'pending' : (row.done?.state ?? 'approved'),
    ...(answer
      ? {
          answer: {
            approved: answer.approved,
            at: answer.at,
            ...(answer.args ? { args: answer.args } : {}),
            ...(answer.reason ? { reason: answer.reason } : {}),
          },
        }
      : {}),
    ...(row.done && row.done.state !== 'denied' ? { result: row.done.result } : {}),
  };
}

/** Views of a run's approvals read back from its rows (`troupe approvals`, the dashboard). */
export function approvalsFromEvents(events: readonly EventRow[], names: (agentId: string) => string): ApprovalView[] {
  return [...fold(events).values()].map((row) => viewOf(row, names(row.agentId)));
}
