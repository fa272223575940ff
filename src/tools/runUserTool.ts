/**
 * Running a user tool: through the shared tool queue, with its timeout on the injected clock and
 * the agent's AbortSignal.
 * @module
 */
import type { Logger } from 'pino';
import type PQueue from 'p-queue';
import type { Clock } from '../clock.js';
import { TroupeError } from '../errors.js';
import { ownGetter } from '../ownGetter.js';
import type { CompiledTool, ToolContext } from './defineTool.js';

/** Where user tools run: the shared tool queue, the injected clock, the default timeout. */
export interface ToolRunner {
  readonly queue: PQueue;
  readonly clock: Clock;
  readonly defaultTimeoutMs: number;
  readonly runId: string;
  /** Null while this host may start a tool; else why not (its lease may be lost: store/port.ts LeaseGuard). */
  readonly fenced: () => Error | null;
}

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';

/** `signal` and `logger` are lazy own getters (ownGetter.ts): a tool that spreads its context to pass it on keeps them. */
const SIGNAL = ownGetter((context: CallContext) => context.scope().signal);
const LOGGER = ownGetter((context: CallContext) => context.ownLogger());

/**
 * One call's context and scope. The tool's own AbortSignal (the agent's signal, and the timeout)
 * is made only when the tool reads `signal` (an AbortSignal costs ~10 µs on Node 20: src/cancel.ts),
 * linked to the agent's signal until the call settles; the agent's logger is read only when the tool
 * reads its own (an agent's pino child is made on first use).
 */
class CallContext implements ToolContext {
  readonly agentId: string;
  readonly agentName: string;
  readonly runId: string;
  readonly idempotencyKey: string;
  declare readonly signal: AbortSignal;
  declare readonly logger: Logger;
  readonly #agent: { readonly logger: Logger };
  readonly #tool: string;
  readonly #cancel: AbortSignal;
  #own: AbortController | undefined = undefined;
  #unlink: (() => void) | undefined = undefined;
  #logger: Logger | undefined = undefined;

  constructor(
    runId: string,
    agent: { readonly id: string; readonly name: string; readonly logger: Logger },
    tool: string,
    cancel: AbortSignal,
    idempotencyKey: string,
  ) {
    this.agentId = agent.id;
    this.agentName = agent.name;
    this.runId = runId;
    this.idempotencyKey = idempotencyKey;
    Object.defineProperty(this, 'signal', SIGNAL);
    Object.defineProperty(this, 'logger', LOGGER);
    this.#agent = agent;
    this.#tool = tool;
    this.#cancel = cancel;
  }

  ownLogger(): Logger {
    return (this.#logger ??= this.#agent.logger.child({ tool: this.#tool }));
  }

  /** A logged or serialised context carries its identifiers (not a live signal or logger). */
  toJSON(): { agentId: string; agentName: string; runId: string; idempotencyKey: string } {
    return { agentId: this.agentId, agentName: this.agentName, runId: this.runId, idempotencyKey: this.idempotencyKey };
  }

  /**
   * The tool's own controller under the agent's signal (made on first use): the first abort wins
   * and fixes the reason (the agent's, if it came first).
   */
  scope(): AbortController {
    if (this.#own === undefined) {
      const own = new AbortController();
      this.#own = own;
      const parent = this.#cancel;
      if (parent.aborted) own.abort(parent.reason);
      else {
        const forward = () => own.abort(parent.reason);
        parent.addEventListener('abort', forward, { once: true });
        this.#unlink = () => parent.removeEventListener('abort', forward);
      }
    }
    return this.#own;
  }

  /** The call settled: its signal stops following the agent's. */
  close(): void {
    this.#unlink?.();
    this.#unlink = undefined;
  }
}

/**
 * Run a user tool through the tool queue with its timeout and the agent's signal. The tool's own
 * AbortSignal and the timeout timer are created only when needed (the tool reads `signal`, or
 * returns a promise): a synchronous tool cannot be timed out and needs neither. The call starts at
 * once when the queue has a free slot (p-queue runs a task inside `add`); a throw is a rejected
 * promise. Not an async function: the call's scope is closed where the call settles.
 * @returns a promise of the tool's value
 */
export function runUserTool(
  runner: ToolRunner,
  tool: CompiledTool,
  args: Record<string, unknown>,
  agent: { readonly id: string; readonly name: string; readonly logger: Logger },
  cancel: AbortSignal,
  idempotencyKey: string,
): Promise<unknown> {
  const context = new CallContext(runner.runId, agent, tool.name, cancel, idempotencyKey);
  // The cancellation and the lease are checked when the task starts, synchronously before the
  // tool: a tool queued for an agent that has since stopped, or on a host whose lease may have run
  // out meanwhile, never runs.
  return runner.queue.add<unknown>(() => {
    if (cancel.aborted) throw new TroupeError('TOOL_NOT_RUN', `${tool.name} was not started: the agent was stopped while it waited in the tool queue`);
    const fenced = runner.fenced();
    if (fenced) throw fenced;
    let out: unknown;
    try {
      out = tool.execute(args, context);
    } catch (err) {
      context.close();
      throw err;
    }
    if (isPromiseLike(out)) return settleInTime(runner, tool, out, cancel, context);
    context.close();
    return out;
  });
}

/**
 * An async tool's result, or its timeout, or the agent's cancellation (a tool that ignores its
 * signal is abandoned at the timeout, not awaited forever). The call's scope closes when it settles.
 */
function settleInTime(runner: ToolRunner, tool: CompiledTool, out: PromiseLike<unknown>, signal: AbortSignal, context: CallContext): Promise<unknown> {
  const timeoutMs = tool.timeoutMs ?? runner.defaultTimeoutMs;
  return new Promise((resolve, reject) => {
    const settle = (how: 'resolve' | 'reject', value: unknown) => {
      runner.clock.clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      context.close();
      if (how === 'resolve') resolve(value);
      else reject(value);
    };
    const onAbort = () => settle('reject', signal.reason);
    const timer = runner.clock.setTimeout(() => {
      const err = new TroupeError('TOOL_TIMEOUT', `${tool.name} did not finish within ${timeoutMs} ms`);
      context.scope().abort(err);
      settle('reject', err);
    }, timeoutMs);
    signal.addEventListener('abort', onAbort, { once: true });
    out.then(
      (value) => settle('resolve', value),
      (err: unknown) => settle('reject', err),
    );
  });
}
