/**
 * `troupe serve` on a terminal: the lines typed, the approvals asked, and the signals that stop it.
 * @module
 */
import { stopSignals } from './drive.js';
import { createInterface, type Interface } from 'node:readline';
import type { Approver, ApprovalRequest } from '../autonomy/approvalGate.js';
import { errorMessage } from '../errors.js';
import type { Io } from './args.js';
import { EXIT } from './exitCodes.js';
import { forTerminal } from './terminal.js';
import type { Output } from './view.js';

export interface ServeOptions {
  /** Stop when this aborts. Default: the process's SIGINT / SIGTERM (a second one exits at once). */
  signal?: AbortSignal;
}

/**
 * The terminal: lines typed go to the main run's root, except that while a proactive trigger asks
 * for confirmation the next line answers it (`y` / `yes` approves; anything else denies).
 */
export class Terminal {
  readonly #rl: Interface;
  readonly #out: Output;
  readonly #err: Output;
  readonly #questions: { text: string; resolve: (approved: boolean) => void }[] = [];
  /** Sends a line typed to the main run's root (undefined: no main run). */
  toMain: ((content: string) => Promise<unknown>) | undefined;

  constructor(io: Io) {
    this.#out = io.out;
    this.#err = io.err;
    this.#rl = createInterface({ input: process.stdin });
    this.#rl.on('line', (line) => this.#onLine(line));
  }

  readonly approver: Approver = (request: ApprovalRequest) =>
    new Promise<boolean>((resolve) => {
      const prompt = typeof request.reason === 'string' ? request.reason.replace(/\s+/g, ' ') : '';
      const shown = prompt.length > 200 ? `${prompt.slice(0, 197)}...` : prompt;
      const target = request.agentName === undefined || request.agentName === 'root' ? `the root of run ${request.agentId}` : `agent ${request.agentName}`;
      const text = `approve proactive trigger "${forTerminal(request.action)}" (→ ${forTerminal(target)}): ${forTerminal(shown)}\n  [y/N] `;
      this.#questions.push({ text, resolve });
      if (this.#questions.length === 1) this.#out.write(text);
    });

  #onLine(line: string): void {
    const question = this.#questions.shift();
    if (question) {
      question.resolve(/^\s*y(es)?\s*$/i.test(line));
      const next = this.#questions[0];
      if (next) this.#out.write(next.text);
      return;
    }
    if (line.trim() === '') return;
    if (!this.toMain) {
      this.#err.write('no main run: start troupe serve with a task (or --resume) to talk to one\n');
      return;
    }
    this.toMain(line).catch((err: unknown) => this.#err.write(`${forTerminal(errorMessage(err))}\n`));
  }

  close(): void {
    this.#rl.close();
    for (const q of this.#questions.splice(0)) q.resolve(false);
  }
}

/** Resolves with the signal's name when serve should stop. */
export function stopRequested(options: ServeOptions, io: Io): { promise: Promise<string>; dispose: () => void } {
  if (options.signal) {
    const signal = options.signal;
    let onAbort = () => {};
    const promise = new Promise<string>((resolve) => {
      onAbort = () => resolve('abort');
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    return { promise, dispose: () => signal.removeEventListener('abort', onAbort) };
  }
  return stopSignals(io, { words: 'troupe serve', code: EXIT.INTERNAL });
}
