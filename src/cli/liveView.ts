/**
 * The live view of a run: on a TTY a frame redrawn in place — the budget bar, the tree, one line
 * per agent saying what it does now (a tool call, a retry and its wait, a nudge, why it failed,
 * streamed text), why the budget tripped, and in an interactive run the lines you typed and a
 * prompt that survives redraws; the root's replies are printed whole above the frame (wrapped at
 * word boundaries), where they scroll like a conversation. Ctrl-C at the prompt is an interrupt
 * (as a signal would be); Ctrl-D ends input and says what happens to the run. Every line is cut to the terminal's width (string-width counts
 * wide and combining characters), so a frame is exactly as many rows as lines and the redraw never
 * leaves old frames behind; a resize redraws at once. Piped, one line per event; `--json`, every
 * event as a JSON line.
 * @module
 */
import { createInterface, type Interface } from 'node:readline';
import stringWidth from 'string-width';
import type { Coordinator } from '../host/createCoordinator.js';

/** What the view reads of a coordinator (never its store: a hosted run's is a port). */
type Viewed = Omit<Coordinator, 'store'>;
import type { TroupeEvent } from '../host/runtime.js';
import { forTerminal, jsonLine } from './terminal.js';
import { activityText, budgetBar, endReason, eventLine, lookupIn, pendingAsks, treeLines, type Lookup, type Output, type ViewMode } from './view.js';

const segmenter = new Intl.Segmenter();

/**
 * `line` cut to fit `columns` (one column is left free: some terminals wrap when the last one is
 * written), with `…` where it was cut.
 */
export function fit(line: string, columns: number): string {
  const max = Math.max(2, columns - 1);
  if (stringWidth(line) <= max) return line;
  let out = '';
  let width = 0;
  for (const { segment } of segmenter.segment(line)) {
    const w = stringWidth(segment);
    if (width + w > max - 1) break;
    out += segment;
    width += w;
  }
  return `${out}…`;
}

/** Rows `lines` take on a terminal `columns` wide that wraps long lines (after a resize). */
export function rowsAt(lines: readonly string[], columns: number): number {
  return lines.reduce((rows, line) => rows + Math.max(1, Math.ceil(stringWidth(line) / Math.max(1, columns))), 0);
}

/** A prompt below the frame: lines typed go to `onLine` (the root). */
interface PromptOptions {
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream;
  rootId: string;
  onLine(line: string): void;
  /** Ctrl-C at the prompt (the terminal is raw: no SIGINT is raised for it). */
  onInterrupt(): void;
  /** Ctrl-D: input ended; the line that says what happens now (shown under the frame). */
  onInputEnd(): string;
}

/**
 * `text` wrapped to `columns` (one left free, as `fit`) at word boundaries, its own line breaks
 * kept, each row indented by `indent`; a word wider than a row is cut where the row ends.
 */
export function wrapWords(text: string, columns: number, indent = ''): string[] {
  const max = Math.max(2, columns - 1 - stringWidth(indent));
  const rows: string[] = [];
  for (const paragraph of text.split('\n')) {
    let row = '';
    let width = 0;
    const push = () => {
      rows.push(indent + row);
      row = '';
      width = 0;
    };
    for (const word of paragraph.split(/\s+/).filter((w) => w !== '')) {
      const w = stringWidth(word);
      if (width > 0 && width + 1 + w > max) push();
      if (w > max) {
        // Longer than a row: cut by grapheme where each row ends.
        for (const { segment } of segmenter.segment(word)) {
          const sw = stringWidth(segment);
          if (width + sw > max) push();
          row += segment;
          width += sw;
        }
        continue;
      }
      if (width > 0) {
        row += ' ';
        width += 1;
      }
      row += word;
      width += w;
    }
    push();
  }
  return rows;
}

export interface ViewOptions {
  /** The TTY view redraws at most this often. Default 100 ms. */
  intervalMs?: number;
  /** The terminal's width (lines are cut to it); default 80. */
  columns?: () => number;
  /** Subscribe a redraw to terminal resizes. */
  onResize?: (redraw: () => void) => () => void;
  /** Interactive runs on a terminal: a prompt line that survives redraws. */
  prompt?: PromptOptions;
}

const TAIL = 200;

class LiveView {
  readonly #c: Viewed;
  readonly #out: Output;
  readonly #lookup: Lookup;
  readonly #columns: () => number;
  readonly #intervalMs: number;
  readonly #unsubscribe: (() => void)[] = [];
  /** Per agent name, what it does now (insertion order is the frame's order). */
  readonly #news = new Map<string, string>();
  /** Streamed text per agent since its last answer. */
  readonly #streaming = new Map<string, string>();
  readonly #typed: string[] = [];
  /** Text not yet printed above the frame (the root's replies, the end of input), as unwrapped paragraphs. */
  readonly #above: { head: string | null; text: string }[] = [];
  #budgetNote: string | null = null;
  #rl: Interface | undefined;
  #rootId: string | undefined;
  /** Rows between the top of the frame and the cursor. */
  #rows = 0;
  #last: string[] = [];
  #timer: ReturnType<typeof setTimeout> | null = null;
  #stopped = false;

  constructor(c: Viewed, out: Output, options: ViewOptions = {}) {
    this.#c = c;
    this.#out = out;
    this.#lookup = lookupIn(c);
    this.#columns = options.columns ?? (() => 80);
    this.#intervalMs = options.intervalMs ?? 100;
    this.#unsubscribe.push(c.subscribe((event) => this.#onEvent(event)));
    const registry = c.registry.subscribe(() => this.#schedule());
    this.#unsubscribe.push(() => registry.unsubscribe());
    if (options.onResize) this.#unsubscribe.push(options.onResize(() => this.#resized()));
    if (options.prompt) this.#attachPrompt(options.prompt);
    this.#draw();
  }

  #attachPrompt(prompt: PromptOptions): void {
    this.#rootId = prompt.rootId;
    const rl = createInterface({ input: prompt.input, output: prompt.output, terminal: true });
    this.#rl = rl;
    // Without a listener readline pauses the input on Ctrl-C, and the prompt would stay, dead.
    rl.on('SIGINT', () => prompt.onInterrupt());
    rl.on('close', () => {
      if (this.#rl !== rl) return; // closed by stop()
      // Ctrl-D: the cursor is still on the prompt's row, which the next frame erases with the frame.
      this.#rl = undefined;
      this.#above.push({ head: null, text: prompt.onInputEnd() });
      this.#draw();
    });
    rl.on('line', (line) => {
      // Enter moved the cursor below the prompt's row: that row is part of the frame now.
      this.#rows += 1;
      if (line.trim() !== '') {
        this.#typed.push(`you → ${this.#rootName()}: ${line.replace(/\s+/g, ' ')}`);
        if (this.#typed.length > 3) this.#typed.shift();
        prompt.onLine(line);
      }
      this.#draw();
    });
  }

  #rootName(): string {
    return this.#rootId === undefined ? 'root' : forTerminal(this.#lookup(this.#rootId)?.name ?? 'root');
  }

  #onEvent(event: TroupeEvent): void {
    switch (event.type) {
      case 'agent.activity':
        this.#streaming.delete(event.name);
        this.#news.set(event.name, activityText(event.activity));
        break;
      case 'agent.delta':
        if (event.delta.kind === 'text') {
          const text = ((this.#streaming.get(event.name) ?? '') + event.delta.text).slice(-TAIL);
          this.#streaming.set(event.name, text);
          this.#news.set(event.name, `writes: …${text.replace(/\s+/g, ' ')}`);
        }
        break;
      case 'agent.said':
        this.#streaming.delete(event.name);
        // The root answers you: its whole reply goes above the frame (a line would cut it).
        if (event.agentId === this.#rootId) {
          this.#above.push({ head: `${forTerminal(event.name)}:`, text: forTerminal(event.text, true) });
          this.#news.delete(event.name);
        } else this.#news.set(event.name, `says: ${event.text.replace(/\s+/g, ' ')}`);
        break;
      case 'agent.status': {
        const info = this.#lookup(event.agentId);
        const why = endReason(info);
        if (why) this.#news.set(event.name, `${event.to}: ${why}`);
        else if (event.to === 'completed' && info?.report) this.#news.set(event.name, `reported: ${info.report.summary.replace(/\s+/g, ' ')}`);
        break;
      }
      case 'budget.tripped':
      case 'team.failure_pattern':
      case 'run.deadlock':
      case 'provider.breaker':
      case 'provider.quota':
      case 'coordinator.failed':
        this.#budgetNote = eventLine(event, this.#lookup);
        break;
      default:
        break;
    }
    this.#schedule();
  }

  #schedule(): void {
    if (this.#timer === null && !this.#stopped) this.#timer = setTimeout(() => this.#draw(), this.#intervalMs);
  }

  /** The frame's lines, each safe for a terminal and cut to the width. */
  frame(): string[] {
    const columns = this.#columns();
    const lines = [budgetBar(this.#c.budget()), ...treeLines(this.#c.tree(), '', pendingAsks(this.#c.approvals.list()))];
    for (const [name, text] of this.#news) lines.push(`  ${forTerminal(name)}: ${forTerminal(text)}`);
    if (this.#budgetNote) lines.push(this.#budgetNote);
    for (const typed of this.#typed) lines.push(`  ${forTerminal(typed)}`);
    return lines.map((l) => fit(l, columns));
  }

  #promptText(): string {
    const root = this.#rootId === undefined ? undefined : this.#lookup(this.#rootId);
    const waits = root?.status === 'waiting' && root.waitKind === 'user';
    return fit(waits ? `${this.#rootName()} waits for you › ` : `to ${this.#rootName()} › `, this.#columns());
  }

  /** Move to the top of what was drawn and clear it. */
  #erase(): string {
    if (this.#rows > 0) return `\x1b[${this.#rows}F\x1b[0J`;
    return this.#rl ? '\r\x1b[0J' : '';
  }

  #draw(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#stopped) return;
    const frame = this.frame();
    // Printed once, above the frame, wrapped whole: the terminal keeps them as the frame moves down.
    const above = this.#above
      .splice(0)
      .flatMap(({ head, text }) => (head === null ? wrapWords(text, this.#columns()) : [head, ...wrapWords(text, this.#columns(), '  ')]));
    // With a prompt, the cursor sits on its row: start from column 0 of it.
    this.#out.write(`${this.#erase()}${above.map((l) => `${l}\n`).join('')}${frame.join('\n')}\n`);
    this.#last = frame;
    this.#rows = frame.length;
    if (this.#rl) {
      this.#rl.setPrompt(this.#promptText());
      this.#rl.prompt(true);
    }
  }

  /** A terminal that reflows wrapped the last frame's lines at the new width: erase that many rows. */
  #resized(): void {
    this.#rows = this.#rows - this.#last.length + rowsAt(this.#last, this.#columns());
    this.#draw();
  }

  /** Print `line` above the frame (wrapped), where the terminal keeps it. */
  say(line: string): boolean {
    if (this.#stopped) return false;
    this.#above.push({ head: null, text: line });
    this.#schedule();
    return true;
  }

  /** Detach, and draw the final frame once, without the prompt: it stays on the screen. */
  stop(): void {
    if (this.#stopped) return;
    for (const u of this.#unsubscribe.splice(0)) u();
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#rl?.close();
    this.#rl = undefined;
    // The run's end prints why the budget tripped in full; the final frame is the team.
    this.#budgetNote = null;
    this.#draw();
    this.#rows = 0;
    this.#stopped = true;
  }
}

/** A view attached to a run: `stop()` detaches (the TTY view draws its final frame). */
export interface View {
  stop(): void;
  /** A line for the user printed above the live frame (TTY only; false elsewhere: say it yourself). */
  say(line: string): boolean;
}

/** Attach a live view to a coordinator. */
export function attachView(coordinator: Viewed, mode: ViewMode, out: Output, options: ViewOptions = {}): View {
  if (mode === 'json') return { stop: coordinator.subscribe((event) => out.write(`${jsonLine(event)}\n`)), say: () => false };
  if (mode === 'lines') {
    const lookup = lookupIn(coordinator);
    return {
      stop: coordinator.subscribe((event) => {
        const line = eventLine(event, lookup);
        if (line !== null) out.write(`  ${line}\n`);
      }),
      say: () => false,
    };
  }
  const live = new LiveView(coordinator, out, options);
  return { stop: () => live.stop(), say: (line) => live.say(line) };
}
