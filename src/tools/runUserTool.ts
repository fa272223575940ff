/**
 * Running a user tool: through the shared tool queue, with its timeout on the injected clock and
 * the agent's AbortSignal.
 * @module
 */
import type { Logger } from 'pino';
import type PQueue from 'p-queue';
import type { Clock } from '../clock.js';
import { TroupeError } from '../errors.js';
import type { CompiledTool, ToolContext } from './defineTool.js';

/** Where user tools run: the shared tool queue, the injected clock, the default timeout. */
export interface ToolRunner {
  readonly queue: PQueue;
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
  signal: AbortSignal,
  idempotencyKey: string,
): Promise<unknown> {
  const timeoutMs = tool.timeoutMs ?? rt.defaultTimeoutMs;
  let controller: AbortController | undefined;
  const forward = () => controller?.abort(signal.reason);
  const link = (): AbortController => {
    if (!controller) {
      controller = new AbortController();
      if (signal.aborted) controller.abort(signal.reason);
      else signal.addEventListener('abort', forward, { once: true });
    }
    return controller;
  };
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
    // The signal is checked when the task starts rather than handed to p-queue (~3 µs per add):
    // a tool queued for an agent that has since stopped never runs either way.
    return await rt.queue.add(() => {
      if (signal.aborted) throw new TroupeError('TOOL_NOT_RUN', `${tool.name} was not started: the agent was stopped while it waited in the tool queue`);
      return execute();
    });
  } finally {
    if (controller) signal.removeEventListener('abort', forward);
  }
}
