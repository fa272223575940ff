/**
 * Running a user tool: through the shared tool queue, with its timeout on the injected clock and
 * the agent's AbortSignal.
 * @module
 */
import type { Logger } from 'pino';
import type { Limiter } from '../limiter.js';
import type { Clock } from '../clock.js';
import { LazyAbort, type Cancellation } from '../cancel.js';
import { TroupeError } from '../errors.js';
import type { CompiledTool, ToolContext } from './defineTool.js';

/** Where user tools run: the shared tool queue, the injected clock, the default timeout. */
export interface ToolRunner {
  readonly queue: Limiter;
  readonly clock: Clock;
  readonly defaultTimeoutMs: number;
  readonly runId: string;
}

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';

/**
 * Run a user tool through the tool queue with its timeout and the agent's signal. The tool's own
 * AbortSignal and the timeout timer are created only when needed (the tool reads `signal`, or
 * returns a promise): a synchronous tool cannot be timed out and needs neither.
 */
export async function runUserTool(
  rt: ToolRunner,
  tool: CompiledTool,
  args: Record<string, unknown>,
  agent: { readonly id: string; readonly name: string; readonly logger: Logger },
  cancel: Cancellation,
  idempotencyKey: string,
): Promise<unknown> {
  const timeoutMs = tool.timeoutMs ?? rt.defaultTimeoutMs;
  // The tool's own scope: the agent's cancellation, and the timeout.
  let own: LazyAbort | undefined;
  const link = (): LazyAbort => (own ??= new LazyAbort(cancel.signal));
  let logger: Logger | undefined;
  const context: ToolContext = {
    agentId: agent.id,
    agentName: agent.name,
    runId: rt.runId,
    idempotencyKey,
    get signal() {
      return link().signal;
    },
    get logger() {
      return (logger ??= agent.logger.child({ tool: tool.name }));
    },
  };
  const execute = (): unknown => {
    const out = tool.execute(args, context);
    if (!isPromiseLike(out)) return out;
    const signal = cancel.signal;
    // A tool that ignores its signal is abandoned at the timeout, not awaited forever.
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        rt.clock.clearTimeout(timer);
        reject(signal.reason);
      };
      const timer = rt.clock.setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        const err = new TroupeError('TOOL_TIMEOUT', `${tool.name} did not finish within ${timeoutMs} ms`);
        link().abort(err);
        reject(err);
      }, timeoutMs);
      signal.addEventListener('abort', onAbort, { once: true });
      out.then(
        (value) => {
          rt.clock.clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (err: unknown) => {
          rt.clock.clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          reject(err);
        },
      );
    });
  };
  try {
    // The cancellation is checked when the task starts:
    // a tool queued for an agent that has since stopped never runs either way.
    return await rt.queue.add(() => {
      if (cancel.aborted) throw new TroupeError('TOOL_NOT_RUN', `${tool.name} was not started: the agent was stopped while it waited in the tool queue`);
      return execute();
    });
  } finally {
    own?.close();
  }
}
