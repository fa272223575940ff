/**
 * Applying an inbox request (DESIGN §13): every input from outside the run — a message, a stop, a
 * budget pause or resume, an execution's or a delegation's end, an approval's answer — arrives as a request with an id,
 * and its host applies it here. The answer is staged in the same commit as the effect (one
 * transaction writes the message and marks its request answered), so a request is never left
 * applied but open, nor answered but not applied.
 *
 * A stop is the exception: its answer waits until the agents it stops are terminal, and is a commit
 * of its own; a host that dies in between leaves it open, and the next host applies it again,
 * which stops nothing more.
 *
 * A request applied twice anyway (it cannot be, once answered: this guards the hosts' races)
 * changes nothing more: the message a send queues is keyed by the request (`request:<id>`), so a
 * second apply queues nothing and answers with the same message id; a pause, resume or end of
 * what already is so is a no-op by its nature.
 * @module
 */
import { TERMINAL_STATUSES } from '../../machines/types.js';
import { errorMessage, isTroupeError } from '../errors.js';
import type { InboxKind, InboxRequest, InboxResult } from '../store/types.js';
import type { Clock } from '../clock.js';
import type { Agents } from './agents/agents.js';
import type { DurableApprovals } from './async/approvals.js';
import type { Delegations } from './async/delegations.js';
import type { AsyncExecutions } from './async/executions.js';
import type { CallLog } from './calls/callLog.js';
import type { GroupCommitter } from './commit.js';
import { requestStop, type budgetControls } from './control.js';
import type { Messaging } from './mail/messaging.js';
import type { Views } from './views/views.js';

/** What applying a request reaches of the run: the parts its kinds act on, and the commit. */
export interface InboxParts {
  readonly clock: Clock;
  readonly agents: Agents;
  readonly callLog: Pick<CallLog, 'input'>;
  readonly committer: Pick<GroupCommitter, 'stage' | 'durable'>;
  readonly controls: Pick<ReturnType<typeof budgetControls>, 'pause' | 'resume'>;
  readonly messaging: Pick<Messaging, 'sendExternal'>;
  readonly executions: Pick<AsyncExecutions, 'finish' | 'get'>;
  readonly delegations: Pick<Delegations, 'list' | 'complete' | 'fail'>;
  readonly approvals: Pick<DurableApprovals, 'answer'>;
  readonly views: Pick<Views, 'info' | 'waiters'>;
  assertUsable(): void;
}

type Applied = { result: InboxResult; done?: Promise<unknown> };

/** Apply `request` and commit its answer with its effect; resolves with the answer once durable. */
export async function applyInboxRequest(run: InboxParts, request: Pick<InboxRequest, 'id' | 'kind' | 'payload'>): Promise<InboxResult> {
  let applied: Applied;
  try {
    run.assertUsable();
    const { kind } = request;
    // A send is recorded where every message from outside is queued (mail/messaging.ts).
    if (kind !== 'send') recordInput(run, kind, request.payload);
    applied = kind === 'stop' ? { result: await stop(run, request.payload) } : effect(run, { ...request, kind });
  } catch (err) {
    // Nothing was applied: the refusal is the answer, with its code.
    applied = {
      result: isTroupeError(err) ? { ok: false, code: err.code, message: `${err.code}: ${err.message}` } : { ok: false, message: errorMessage(err) },
    };
  }
  // Staged in the same tick as the effect's writes: one commit carries both.
  run.committer.stage({ op: 'answerRequest', id: request.id, result: applied.result, at: run.clock.now() });
  await Promise.all([applied.done, run.committer.durable()]);
  return applied.result;
}

/** An input from outside, recorded for replay (calls/callLog.ts) in the commit of its effect. */
export function recordInput(run: Pick<InboxParts, 'agents' | 'callLog'>, kind: Exclude<InboxKind, 'send'>, payload: Record<string, unknown>): void {
  const agent = typeof payload.agent === 'string' ? run.agents.find(payload.agent) : undefined;
  run.callLog.input({ kind, payload }, agent?.id ?? null);
}

/** The effect of every kind but stop, staged at once (a refusal throws before anything is staged). */
function effect(run: InboxParts, request: Pick<InboxRequest, 'id' | 'payload'> & { kind: Exclude<InboxKind, 'stop'> }): Applied {
  const { payload } = request;
  switch (request.kind) {
    case 'pause':
      return { result: { ok: true, message: 'budget paused: agents park before their next paid call' }, done: run.controls.pause() };
    case 'resume': {
      const parked = [...run.agents.values()].filter((h) => run.agents.status(h) === 'budgetPaused').length;
      return { result: { ok: true, message: `budget resumed (${parked} agent(s) woken)` }, done: run.controls.resume() };
    }
    case 'execution':
      return { result: finishExecution(run, payload) };
    case 'delegation':
      return { result: finishDelegation(run, payload) };
    case 'approval':
      return { result: run.approvals.answer(payload) };
    case 'send': {
      const agent = run.agents.resolve(String(payload.agent));
      const type = typeof payload.type === 'string' ? { type: payload.type } : {};
      const mail = run.messaging.sendExternal(agent.id, { content: String(payload.content), ...type, key: `request:${request.id}` });
      return { result: { ok: true, message: `queued for ${agent.name} (${agent.id})`, messageId: mail.id } };
    }
  }
}

/** Stop the agent (its subtree unless `cascade: false`) and wait until the stopped are terminal. */
async function stop(run: InboxParts, payload: Record<string, unknown>): Promise<InboxResult> {
  const target = run.agents.resolve(String(payload.agent));
  const ids = requestStop(run.agents, target, payload.cascade !== false);
  await Promise.all(
    ids.map((id) => {
      const h = run.agents.get(id);
      return run.views.waiters.waitFor({ id, name: h.name, status: run.agents.status(h) }, [...TERMINAL_STATUSES]);
    }),
  );
  return { ok: true, message: `stopped ${ids.map((id) => run.agents.get(id).name).join(', ') || '(already terminal)'}` };
}

/**
 * An execution's end, reported from outside: finished once (a second report changes nothing and
 * says so), and the agent that started it continues.
 */
function finishExecution(run: InboxParts, payload: Record<string, unknown>): InboxResult {
  const id = String(payload.execution);
  const status = payload.status;
  if (status !== 'completed' && status !== 'failed') {
    return { ok: false, code: 'CONFIG_INVALID', message: `CONFIG_INVALID: Expected status to be "completed" or "failed", got ${JSON.stringify(status)}` };
  }
  const finished = run.executions.finish(id, { status, result: typeof payload.result === 'string' ? payload.result : '' });
  const row = run.executions.get(id)!;
  const agent = run.views.info(row.agentId);
  return finished
    ? { ok: true, message: `execution ${id} ${status}: ${agent.name} (${agent.id}) continues with its result` }
    : { ok: true, message: `execution ${id} had already ${row.status}; nothing changed` };
}

/**
 * A delegation's end, reported from outside: recorded once and its agent messaged the result (a
 * second report changes nothing and says so). A delegation lives as long as its host: one the
 * run's next host found running was interrupted, and says so.
 */
function finishDelegation(run: InboxParts, payload: Record<string, unknown>): InboxResult {
  const status = payload.status;
  if (status !== 'completed' && status !== 'failed') {
    return { ok: false, code: 'CONFIG_INVALID', message: `CONFIG_INVALID: Expected status to be "completed" or "failed", got ${JSON.stringify(status)}` };
  }
  const agent = run.agents.resolve(String(payload.agent));
  const id = String(payload.delegation);
  const row = run.delegations.list(agent.id).find((d) => d.delegationId === id);
  if (!row) return { ok: false, code: 'AGENT_NOT_FOUND', message: `AGENT_NOT_FOUND: ${agent.name} (${agent.id}) has no delegation ${id}` };
  if (row.status !== 'running') return { ok: true, message: `delegation ${id} of ${agent.name} had already ${row.status}; nothing changed` };
  const text = typeof payload.result === 'string' ? payload.result : '';
  if (status === 'completed') run.delegations.complete(agent.id, id, text);
  else run.delegations.fail(agent.id, id, text);
  return { ok: true, message: `delegation ${id} ${status}: ${agent.name} (${agent.id}) is messaged its result` };
}
