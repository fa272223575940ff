/**
 * Driving a started (or resumed) run to the end of its root with the live view, as `troupe demo`,
 * `run` and `resume` do: the inbox for `send`/`stop` from other shells, typed lines to the root,
 * Ctrl-C (stop cleanly, exit 130, say how to resume), and the end of the run printed once — the
 * team, the budget and why it tripped, the report (or the children's when the root has none).
 * With `--inspect` the inspector keeps serving after the run until Ctrl-C.
 * @module
 */
import { createInterface } from 'node:readline';
import type { Coordinator } from '../host/createCoordinator.js';
import type { AgentInfo, TroupeEvent } from '../host/runtime.js';
import { errorMessage } from '../errors.js';
import type { StorePort } from '../store/port.js';
import type { Io } from './args.js';
import { EXIT, exitCodeFor } from './exitCodes.js';
import { attachView, type View } from './liveView.js';
import { offlineDashboard, type Inspection } from './setup.js';
import { forTerminal, jsonLine } from './terminal.js';
import { budgetBar, mcpLine, treeLines, type ViewMode } from './view.js';
import type { McpServerStatus } from '../mcp/connection.js';

const TERMINAL = ['completed', 'stopped', 'failed', 'crashed'] as const;

/** Exit code 130: the conventional "ended by SIGINT". */
const EXIT_INTERRUPTED = EXIT.INTERRUPTED;

export interface DriveOptions {
  mode: ViewMode;
  io: Io;
  /** The flags that address this run's database and run (` --db …`, or none), for the commands printed: resume after Ctrl-C, send after Ctrl-D. */
  address: string;
  killAfterTurns?: number | undefined;
  interactive: boolean;
  inspection?: Inspection;
  /** Whether this is a resume (the `run.started` event says so). */
  resumed?: boolean;
}

/**
 * Resolves with the signal's name at the first SIGINT/SIGTERM; a second one exits at once with
 * `again.code` (the command's own words in `again.words`). Shared by a hosted run and serve.
 */
export function stopSignals(
  io: Io,
  again: { words: string; code: number },
): { promise: Promise<string>; dispose: () => void; raise: (name: NodeJS.Signals) => void } {
  let seen = false;
  let resolve!: (name: string) => void;
  const promise = new Promise<string>((r) => (resolve = r));
  const handler = (name: NodeJS.Signals) => {
    if (seen) {
      io.err.write(`${again.words}: ${name} again; exiting now\n`);
      process.exit(again.code);
    }
    seen = true;
    resolve(name);
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return {
    promise,
    // Ctrl-C on a raw terminal (a prompt) raises no signal: the prompt reports it here.
    raise: handler,
    dispose: () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    },
  };
}

/** The exit code of a run whose root ended so: 0 completed, 6 a provider refused (PROVIDER_*), else 1. */
export function runExitCode(root: Pick<AgentInfo, 'status' | 'error'>): number {
  if (root.status === 'completed') return EXIT.OK;
  if (root.status === 'failed' && root.error && exitCodeFor(root.error.code) === EXIT.PROVIDER) return EXIT.PROVIDER;
  return EXIT.RUN_NOT_COMPLETED;
}

/** The reports of the root's descendants, depth first (what the team found when the root did not say). */
function childReports(c: Driven, rootId: string): string[] {
  const out: string[] = [];
  const walk = (id: string, indent: string) => {
    for (const child of c.list().filter((a) => a.parentId === id)) {
      const info = c.get(child.id);
      const body =
        info.report?.summary ??
        (info.error ? `${info.error.code}: ${info.error.message}` : `(no report: ${info.status}${info.stopReason ? `, ${info.stopReason}` : ''})`);
      out.push(`${indent}${forTerminal(info.name)}: ${forTerminal(body, true)}`);
      walk(child.id, `${indent}  `);
    }
  };
  walk(rootId, '  ');
  return out;
}

function printEnd(c: Driven, root: AgentInfo, rootId: string, trips: string[], io: Io, mode: ViewMode): void {
  if (mode === 'json') {
    io.out.write(
      `${jsonLine({ type: 'run.finished', runId: c.runId, status: root.status, report: root.report, error: root.error, budget: c.budget(), budgetTrips: trips, tree: c.tree() })}\n`,
    );
    return;
  }
  // The live view's final frame already shows the team on a terminal.
  const lines = mode === 'tty' ? [] : ['', 'Team:', ...treeLines(c.tree()), budgetBar(c.budget())];
  for (const trip of trips) lines.push(`  ${forTerminal(trip)}`);
  lines.push('', `Report (${root.status}):`);
  if (root.report) lines.push(forTerminal(root.report.summary, true));
  else {
    if (root.error) lines.push(forTerminal(`${root.error.code}: ${root.error.message}`, true));
    else lines.push(`(${forTerminal(root.name)} wrote none${root.stopReason ? `: ${forTerminal(root.stopReason)}` : ''})`);
    const children = childReports(c, rootId);
    if (children.length > 0) lines.push('What the team reported:', ...children);
  }
  io.out.write(`${lines.join('\n')}\n`);
}

/** Watch the budget trips of the run (their reasons go into the summary). */
function tripWatcher(c: Driven): { trips: string[]; stop: () => void } {
  const trips: string[] = [];
  const stop = c.subscribe((event: TroupeEvent) => {
    if (event.type === 'budget.tripped') trips.push(`${event.kind === 'stop' ? 'budget stopped the run' : 'reserve tripped'}: ${event.reason}`);
  });
  return { trips, stop };
}

/**
 * MCP servers down or back, told to the user: above the live frame on a terminal, else on stderr.
 * A resume starts its servers before the view listens: those already down are told first.
 */
function tellMcp(c: Driven, io: Io, view: () => View | undefined): () => void {
  const tell = (status: McpServerStatus) => {
    const line = mcpLine(status);
    if (!view()?.say(line)) io.err.write(`troupe: ${line}\n`);
  };
  for (const status of c.mcpServers()) if (status.state === 'failed' || status.state === 'lost') tell(status);
  return c.subscribe((event) => {
    if (event.type === 'mcp.server') tell(event);
  });
}

/** A hosted run's coordinator (the hosting loop hosts every run through a store port). */
type Driven = Coordinator<StorePort>;

/**
 * Drive a run to the end of its root; returns the exit code. `host` hosts the run and calls
 * `onHosted` with its coordinator as soon as it exists, before any turn of it: the view listens
 * from there, so none of the run's events is missed.
 */
export async function drive(host: (onHosted: (c: Driven) => void) => Promise<{ c: Driven; rootId: string }>, options: DriveOptions): Promise<number> {
  const { mode, io } = options;
  let trips: { trips: string[]; stop: () => void } | undefined;
  const signals = stopSignals(io, { words: 'troupe', code: EXIT_INTERRUPTED });
  let view: View | undefined;
  let stopKill: (() => void) | undefined;
  let stopMcp: (() => void) | undefined;
  let input: ReturnType<typeof createInterface> | undefined;
  // The inspector's "cannot reach" line, if it comes during the run: above the live frame on a terminal.
  options.inspection?.tellWith?.((line) => {
    if (!view?.say(line)) io.err.write(`troupe: ${line}\n`);
  });
  try {
    const promptTerminal = options.interactive && mode === 'tty' && io.stdin?.isTTY ? io.stdin : undefined;
    // The view listens from the moment the run is hosted, before any of its turns.
    const { c, rootId } = await host((hosted) => {
      trips = tripWatcher(hosted);
      if (mode === 'json') io.out.write(`${jsonLine({ type: 'run.started', runId: hosted.runId, resumed: options.resumed ?? false, at: Date.now() })}\n`);
      if (mode !== 'tty' || !promptTerminal) view = attachView(hosted, mode, io.out, { ...viewTerminal(io) });
      stopMcp = tellMcp(hosted, io, () => view);
    });
    const send = (line: string) => void c.send(rootId, { content: line }).catch((err: unknown) => io.err.write(`${forTerminal(errorMessage(err))}\n`));
    if (mode === 'lines' && options.resumed) {
      const root = c.get(rootId);
      io.out.write(`  ${forTerminal(root.name).padEnd(10)} resumed (${root.status})\n`);
    }
    // Ctrl-D ends input, not the run: say what happens now and how to reach the root.
    const rootName = forTerminal(c.get(rootId).name);
    const inputEnd = () =>
      `input closed (Ctrl-D): the run goes on without you; troupe send ${rootName} "…"${options.address} from another shell reaches ${rootName}, Ctrl-C saves and exits`;
    if (promptTerminal) {
      const prompt = { input: promptTerminal, output: process.stdout, rootId, onLine: send, onInterrupt: () => signals.raise('SIGINT'), onInputEnd: inputEnd };
      view = attachView(c, mode, io.out, { ...viewTerminal(io), prompt });
    } else if (options.interactive && mode !== 'json' && io.stdin?.isTTY) {
      input = createInterface({ input: io.stdin });
      input.on('line', (line) => line.trim() !== '' && send(line));
      input.on('SIGINT', () => signals.raise('SIGINT'));
      input.on('close', () => void (input && io.err.write(`troupe: ${inputEnd()}\n`)));
    }
    if (options.killAfterTurns !== undefined) {
      const limit = options.killAfterTurns;
      // Abrupt, like a crash: no shutdown, no flush beyond what each commit already made durable.
      const sub = c.registry.subscribe(({ context }) => {
        let turns = 0;
        for (const v of context.agents.values()) turns += v.turns;
        if (turns < limit) return;
        // Said first (stderr is synchronous on Linux), so the kill is not mistaken for a crash.
        io.err.write(
          `\ntroupe: --kill-after ${limit}: killing this process (SIGKILL) after ${turns} turns, as a crash would. Carry on with: troupe resume${options.address}\n`,
        );
        process.kill(process.pid, 'SIGKILL');
      });
      stopKill = () => sub.unsubscribe();
    }
    const ended = await Promise.race([c.waitFor(rootId, TERMINAL).then((root) => ({ root })), signals.promise.then((signal) => ({ signal }))]);
    if ('signal' in ended) {
      view?.stop();
      io.err.write(`\ntroupe: interrupted (${ended.signal}); every agent's state is saved. Carry on with: troupe resume${options.address}\n`);
      return EXIT_INTERRUPTED;
    }
    await c.whenIdle();
    // Background reviews (config `review`) are bounded: let the ones running propose their note.
    await c.reviews.settled();
    view?.stop();
    view = undefined;
    const root = c.get(rootId);
    printEnd(c, root, rootId, trips?.trips ?? [], io, mode);
    if (options.inspection?.url) {
      const unreachable = options.inspection.unreachable?.();
      const offline =
        unreachable === undefined
          ? ''
          : ` This machine could not reach the Stately inspector its page loads (${forTerminal(unreachable)}); ${offlineDashboard(options.address)}.`;
      io.err.write(`The run ended; the inspector keeps serving ${options.inspection.url} until Ctrl-C.${offline}\n`);
      await signals.promise;
    }
    return runExitCode(root);
  } finally {
    trips?.stop();
    signals.dispose();
    // Closed here, not by Ctrl-D: no line about it.
    const closing = input;
    input = undefined;
    closing?.close();
    stopKill?.();
    stopMcp?.();
    view?.stop();
  }
}

/** The terminal's width and resizes, when stdout is one. */
function viewTerminal(io: Io): { columns?: () => number; onResize?: (redraw: () => void) => () => void } {
  return { ...(io.columns ? { columns: io.columns } : {}), ...(io.onResize ? { onResize: io.onResize } : {}) };
}
