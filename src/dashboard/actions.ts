/**
 * The dashboard's actions on a live run — message an agent, stop it (with its subtree or alone),
 * pause or resume the budget, answer an approval (host/async/approvals.ts) — posted to the database's inbox, the path `troupe send` and
 * `troupe stop` take: the process that owns the run applies each request through its coordinator
 * (the same rules, the same typed refusals) and writes the answer back, which is returned here.
 * @module
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { isErrorCode, TroupeError } from '../errors.js';
import { postToInbox, readInbox } from '../store/inbox.js';
import { rootActive } from '../stream/follow.js';
import type { InboxKind, InboxRequest, InboxResult } from '../store/types.js';
import type { StoreReads } from './readModel.js';
import type { ForkPoint, ForkResult } from '../fork/fork.js';

type Action =
  | { run: string; kind: 'send'; agent: string; content: string }
  | { run: string; kind: 'stop'; agent: string; cascade?: boolean }
  | { run: string; kind: 'pause' }
  | { run: string; kind: 'resume' }
  | { run: string; kind: 'approval'; approval: string; approve: true; args?: Record<string, unknown> }
  | { run: string; kind: 'approval'; approval: string; approve: false; reason: string }
  | { run: string; kind: 'fork'; agent: string; turn: number };

export interface ActionResult {
  ok: true;
  message: string;
  /** A fork's new run. */
  runId?: string;
}

const KINDS: readonly (InboxKind | 'fork')[] = ['send', 'stop', 'pause', 'resume', 'approval', 'fork'];

function invalid(message: string): TroupeError {
  return new TroupeError('CONFIG_INVALID', message);
}

/** The action a request body names (CONFIG_INVALID otherwise). */
function toAction(body: unknown): Action {
  if (typeof body !== 'object' || body === null) throw invalid('Expected an action object');
  const b = body as Record<string, unknown>;
  if (typeof b.run !== 'string' || b.run === '') throw invalid('Expected the action’s run id');
  if (!KINDS.includes(b.kind as InboxKind | 'fork')) throw invalid(`Expected an action of kind ${KINDS.join(', ')}, got ${JSON.stringify(b.kind)}`);
  if (b.kind === 'pause' || b.kind === 'resume') return { run: b.run, kind: b.kind };
  if (b.kind === 'approval') return toAnswer(b.run, b);
  if (typeof b.agent !== 'string' || b.agent === '') throw invalid('Expected the agent to act on');
  if (b.kind === 'fork') {
    if (typeof b.turn !== 'number' || !Number.isInteger(b.turn) || b.turn < 0) throw invalid('Expected the turn to fork at (an integer ≥ 0)');
    return { run: b.run, kind: 'fork', agent: b.agent, turn: b.turn };
  }
  if (b.kind === 'stop') return { run: b.run, kind: 'stop', agent: b.agent, cascade: b.cascade !== false };
  if (typeof b.content !== 'string' || b.content.trim() === '') throw invalid('Expected a message to send');
  return { run: b.run, kind: 'send', agent: b.agent, content: b.content };
}

/** An answer to an approval: the payload the run's host applies (ApprovalAnswer), nothing else. */
function toAnswer(run: string, b: Record<string, unknown>): Action {
  if (typeof b.approval !== 'string' || b.approval === '') throw invalid('Expected the id of the approval to answer');
  if (typeof b.approve !== 'boolean') throw invalid('Expected approve: true or false');
  if (b.approve) {
    if (b.args === undefined) return { run, kind: 'approval', approval: b.approval, approve: true };
    if (typeof b.args !== 'object' || b.args === null || Array.isArray(b.args)) throw invalid('Expected the approved arguments as a JSON object');
    return { run, kind: 'approval', approval: b.approval, approve: true, args: b.args as Record<string, unknown> };
  }
  if (b.args !== undefined) throw invalid('A denial takes no arguments');
  if (typeof b.reason !== 'string' || b.reason.trim() === '') throw invalid('Expected a reason for the denial (the agent is told)');
  return { run, kind: 'approval', approval: b.approval, approve: false, reason: b.reason.trim() };
}

/** Where a dashboard posts its actions: the run's inbox on any store (hosting/runStore.ts's `post` and `request`). */
interface ActionInbox {
  post(request: { runId: string; kind: InboxKind; payload: Record<string, unknown>; at: number }): Promise<number>;
  request(id: number): Promise<InboxRequest | undefined>;
}

/**
 * Claim a run nobody hosts, apply one request to it and let it go (hosting/applyHere.ts): how an
 * approval reaches a parked run (a worker lets a run go while its agent waits for the answer).
 * Null when a host claimed the run meanwhile: post to its inbox instead.
 */
export type AnswerHere = (runId: string, request: { kind: InboxKind; payload: Record<string, unknown> }) => Promise<InboxResult | null>;

/** The inbox of a SQLite file, written from any process. */
const fileInbox = (path: string): ActionInbox => ({
  post: (request) => Promise.resolve(postToInbox(path, request)),
  request: (id) => Promise.resolve(readInbox(path, id)),
});

function refusal(result: InboxResult): TroupeError {
  const code = result.code ?? /^([A-Z_]+):/.exec(result.message)?.[1];
  const message = code === undefined ? result.message : result.message.replace(new RegExp(`^${code}: `), '');
  return new TroupeError(code !== undefined && isErrorCode(code) ? code : 'INTERNAL', message);
}

/**
 * Whether run `runId` takes actions now: a process drives it (the source says so) and it has not
 * finished (its root agent is still active, or not registered yet).
 */
export async function isLive(source: { port: StoreReads; live(runId: string): boolean | Promise<boolean> }, runId: string): Promise<boolean> {
  return (await source.live(runId)) && rootActive(source.port, runId);
}

/** What actions read, post to and answer through (the dashboard's source, server.ts, extends it). */
export interface ActionSource {
  /** Reads (a read-only store, or the live run's own). */
  port: StoreReads;
  /** The database as the user named it (a path, or a URL without its password). */
  db: string;
  /** Where actions are posted and their answers read (default: the inbox of the file `db`). */
  inbox?: ActionInbox;
  /** Answer an approval of a run nobody hosts, here (as `troupe approve` does); null: someone hosts it now. */
  answerHere?: AnswerHere;
  /** Fork a run at an agent's turn (fork/fork.ts); absent: the page cannot fork. */
  fork?: (runId: string, at: ForkPoint) => Promise<ForkResult>;
  /**
   * Whether a process drives run `runId` now and applies its inbox (actions need one). The page
   * shows a run live only while this holds and the run has not finished (see `isLive`).
   */
  live(runId: string): boolean | Promise<boolean>;
}

/**
 * Post `body` to the live run and wait (up to `waitMs`) for its owner's answer. RUN_NOT_LIVE when
 * no process drives the database (nothing is written then); the owner's refusal as its typed error.
 */
export async function act(source: ActionSource, body: unknown, waitMs = 15_000, everyMs = 100): Promise<ActionResult> {
  const action = toAction(body);
  if (!(await source.port.getRun(action.run))) throw new TroupeError('RUN_NOT_FOUND', `The database holds no run ${action.run}`);
  // A fork only reads the run (live or not) and writes a new one: no inbox.
  if (action.kind === 'fork') return fork(source, action);
  const { run, kind, ...payload } = action;
  if (!(await isLive(source, action.run))) {
    // An approval of an unfinished run nobody hosts is answered here; its next host runs the tool.
    if (kind === 'approval' && source.answerHere && (await rootActive(source.port, run))) {
      const here = await source.answerHere(run, { kind, payload });
      // Null: a host claimed the run meanwhile, and its inbox answers.
      if (here === null) return postAndWait(source, run, kind, payload, waitMs, everyMs);
      if (!here.ok) throw refusal(here);
      return { ok: true, message: /nothing changed$/.test(here.message) ? here.message : `${here.message} once the run is next hosted` };
    }
    throw new TroupeError(
      'RUN_NOT_LIVE',
      'No process drives this run, or it has finished: resume it (troupe resume --ui) to send, stop, pause or answer approvals from here',
    );
  }
  return postAndWait(source, run, kind, payload, waitMs, everyMs);
}

async function fork(
  source: { fork?: (runId: string, at: ForkPoint) => Promise<ForkResult> },
  action: Extract<Action, { kind: 'fork' }>,
): Promise<ActionResult> {
  if (!source.fork) throw new TroupeError('CONFIG_INVALID', 'This dashboard cannot write the database: fork with troupe fork');
  const forked = await source.fork(action.run, { agent: action.agent, turn: action.turn });
  if (!forked.ok) throw forked.error;
  const { origin } = forked;
  return {
    ok: true,
    message: `forked at ${origin.agent}:${origin.turn} as ${forked.runId}: troupe resume --run ${forked.runId} continues it`,
    runId: forked.runId,
  };
}

async function postAndWait(
  source: { db: string; inbox?: ActionInbox },
  run: string,
  kind: InboxKind,
  payload: Record<string, unknown>,
  waitMs: number,
  everyMs: number,
): Promise<ActionResult> {
  const inbox = source.inbox ?? fileInbox(source.db);
  const id = await inbox.post({ runId: run, kind, payload, at: Date.now() });
  const deadline = Date.now() + waitMs;
  for (;;) {
    const result = (await inbox.request(id))?.result ?? null;
    if (result !== null) {
      if (!result.ok) throw refusal(result);
      return { ok: true, message: result.message };
    }
    if (Date.now() >= deadline) return { ok: true, message: `posted; the run has not answered within ${waitMs / 1000} s (it applies requests while it runs)` };
    await sleep(everyMs);
  }
}
