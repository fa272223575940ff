import PQueue from 'p-queue';
import type { Logger } from 'pino';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/clock.js';
import { compileTool, defineTool, type ToolContext } from '../../../src/tools/defineTool.js';
import { runUserTool, type ToolRunner } from '../../../src/tools/runUserTool.js';

const runner: ToolRunner = { queue: new PQueue({ concurrency: 4 }), clock: systemClock, defaultTimeoutMs: 1_000, runId: 'run_1', fenced: () => null };

/** An agent whose logger counts how often it is read and which children it makes. */
function agent() {
  const seen = { reads: 0, children: [] as object[] };
  const child = { info: () => undefined } as unknown as Logger;
  const logger = { child: (bindings: object) => (seen.children.push(bindings), child) } as unknown as Logger;
  return {
    seen,
    ref: {
      id: 'a1',
      name: 'scout',
      get logger() {
        seen.reads++;
        return logger;
      },
    },
  };
}

describe('runUserTool: a tool call context', () => {
  it("carries the call's identity, and touches the agent's logger only when the tool reads its own", async () => {
    let context: ToolContext | undefined;
    const quiet = compileTool(
      defineTool({ name: 'quiet', description: 'd', parameters: { type: 'object' }, execute: (_args, ctx) => ((context = ctx), 'ok') }),
    );
    const a = agent();
    expect(await runUserTool(runner, quiet, {}, a.ref, new AbortController().signal, 'run_1:a1:3:c1')).toBe('ok');
    expect(context).toMatchObject({ agentId: 'a1', agentName: 'scout', runId: 'run_1', idempotencyKey: 'run_1:a1:3:c1' });
    // An agent's logger is a pino child made on first use: a tool that logs nothing must not make it.
    expect(a.seen.reads).toBe(0);

    const chatty = compileTool(
      defineTool({
        name: 'chatty',
        description: 'd',
        parameters: { type: 'object' },
        execute: (_args, ctx) => (ctx.logger.info('one'), ctx.logger.info('two'), 'ok'),
      }),
    );
    const b = agent();
    await runUserTool(runner, chatty, {}, b.ref, new AbortController().signal, 'k');
    expect(b.seen.reads).toBe(1);
    expect(b.seen.children).toEqual([{ tool: 'chatty' }]);
  });

  it('survives a spread: a copy carries the live signal and the logger; JSON gives the identifiers', async () => {
    const cancel = new AbortController();
    let copy: ToolContext | undefined;
    let json = '';
    const tool = compileTool(
      defineTool({
        name: 'wrap',
        description: 'd',
        parameters: { type: 'object' },
        execute: (_args, ctx) => {
          json = JSON.stringify(ctx);
          copy = { ...ctx };
          return new Promise((_resolve, reject) => copy!.signal.addEventListener('abort', () => reject(new Error('saw the abort'))));
        },
      }),
    );
    const a = agent();
    const running = runUserTool(runner, tool, {}, a.ref, cancel.signal, 'k1');
    await Promise.resolve();
    expect(copy!.signal).toBeInstanceOf(AbortSignal);
    copy!.logger.info('from the copy');
    expect(a.seen.children).toEqual([{ tool: 'wrap' }]);
    expect(JSON.parse(json)).toEqual({ agentId: 'a1', agentName: 'scout', runId: 'run_1', idempotencyKey: 'k1' });
    cancel.abort(new Error('stop'));
    await expect(running).rejects.toThrow(/stop|saw the abort/);
  });

  it("gives the tool a signal that follows the agent's cancellation while it runs", async () => {
    const cancel = new AbortController();
    let signal: AbortSignal | undefined;
    const tool = compileTool(
      defineTool({
        name: 'watch',
        description: 'd',
        parameters: { type: 'object' },
        execute: (_args, ctx) =>
          new Promise((_resolve, reject) => ((signal = ctx.signal), ctx.signal.addEventListener('abort', () => reject(new Error('saw the abort'))))),
      }),
    );
    const running = runUserTool(runner, tool, {}, agent().ref, cancel.signal, 'k');
    await Promise.resolve();
    expect(signal?.aborted).toBe(false);
    const reason = new Error('the agent was stopped');
    cancel.abort(reason);
    expect(signal?.aborted).toBe(true);
    await expect(running).rejects.toBe(reason);
    const stopped = AbortSignal.abort(new Error('stopped before'));
    await expect(runUserTool(runner, tool, {}, agent().ref, stopped, 'k')).rejects.toMatchObject({ code: 'TOOL_NOT_RUN' });
  });

  it('starts no tool once the lease may be lost, also one that queued while it was held', async () => {
    let lost: Error | null = null;
    const fencedRunner: ToolRunner = { ...runner, queue: new PQueue({ concurrency: 1 }), fenced: () => lost };
    let ran = 0;
    let release!: () => void;
    const slow = compileTool(
      defineTool({
        name: 'slow',
        description: 'd',
        parameters: { type: 'object' },
        execute: () => ((ran += 1), new Promise<string>((resolve) => (release = () => resolve('ok')))),
      }),
    );
    const first = runUserTool(fencedRunner, slow, {}, agent().ref, new AbortController().signal, 'k1');
    // Queued behind the first (one slot) while the lease still holds.
    const queued = runUserTool(fencedRunner, slow, {}, agent().ref, new AbortController().signal, 'k2');
    expect(ran).toBe(1);
    lost = new Error('lease epoch 2 may have expired');
    release();
    expect(await first).toBe('ok');
    await expect(queued).rejects.toBe(lost);
    expect(ran).toBe(1);
    await expect(runUserTool(fencedRunner, slow, {}, agent().ref, new AbortController().signal, 'k3')).rejects.toBe(lost);
    expect(ran).toBe(1);
  });
});
