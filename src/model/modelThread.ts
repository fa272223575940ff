/**
 * The model thread's entry (`openaiModel({ thread: true })`, threadedModel.ts starts it): the real
 * in-thread `openaiModel` — the `openai` client, boundedFetch, the timeouts on the system clock,
 * the classification of every failure — run here, so that building, sending and parsing requests
 * costs the main thread nothing but the messages.
 *
 * Each (model, purpose, agent)'s last request is kept: a call names how many of its messages open
 * the next one and sends only the rest (modelThreadWire.ts `CallMessage`). Messages are handled in
 * the order the main thread posted them, so both sides' copies move in step. A request is kept
 * while the main thread holds the session it came from, a model's while the model lives
 * (`forget`, `drop`: threadedModel.ts posts them as those are collected).
 * @module
 */
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { parentPort } from 'node:worker_threads';
import { openaiModel } from './openaiModel.js';
import { threadCpuMs, toWire, type CallMessage, type FromWorker, type ModelThreadStats, type ToWorker } from './modelThreadWire.js';
import type { Model, ModelDelta, SessionItem, ToolSpec, UsagePurpose } from './types.js';

interface Last {
  messages: SessionItem[];
  system: string;
  tools: readonly ToolSpec[];
}

const port = parentPort;
if (port === null) throw new Error('modelThread.js runs as a worker thread (openaiModel thread: true)');

const models = new Map<number, { model: Model; last: Record<UsagePurpose, Map<string, Last>> }>();
const calls = new Map<number, AbortController>();
/** The tool lists met, by number (modelThreadWire.ts `CallMessage`). */
const toolSets = new Map<number, readonly ToolSpec[]>();

const post = (message: FromWorker): void => {
  try {
    port.postMessage(message);
  } catch {
    // Something in it cannot be cloned (a provider's odd `details`): sent again as JSON data.
    port.postMessage(JSON.parse(JSON.stringify(message)) as FromWorker);
  }
};

/** The request a call names: its kept messages from the last one, then what it adds. */
function request(msg: CallMessage, last: Map<string, Last>): Last {
  const prev = last.get(msg.agent);
  if (msg.tools !== undefined && msg.toolSet !== undefined) toolSets.set(msg.toolSet, msg.tools);
  const tools = msg.toolSet === undefined ? prev?.tools : toolSets.get(msg.toolSet);
  const system = msg.system ?? prev?.system;
  if (msg.keep > (prev?.messages.length ?? 0) || system === undefined || tools === undefined) {
    throw new Error(`model thread: the call of ${msg.agent} (${msg.purpose}) names a request, or a tool list, it does not have`);
  }
  const kept = prev === undefined ? [] : msg.keep === prev.messages.length ? prev.messages : prev.messages.slice(0, msg.keep);
  const next: Last = { messages: kept.concat(msg.add), system, tools };
  last.set(msg.agent, next);
  return next;
}

function call(msg: CallMessage): void {
  const entry = models.get(msg.model);
  if (entry === undefined) throw new Error(`model thread: no model ${msg.model}`);
  // Taken before anything can fail: the main thread counts this request as sent.
  const { messages, system, tools } = request(msg, entry.last[msg.purpose]);
  const controller = new AbortController();
  calls.set(msg.id, controller);
  const onDelta = msg.deltas ? (delta: ModelDelta) => post({ t: 'delta', id: msg.id, delta }) : undefined;
  // The in-thread model reads only the system prompt, the messages and the tools.
  entry.model
    .complete(
      { agent: { id: msg.agent, name: msg.agent, parentId: null, depth: 0 }, system, messages, tools, turn: 0, purpose: msg.purpose },
      { signal: controller.signal, ...(onDelta ? { onDelta } : {}) },
    )
    .then(
      (turn) => {
        if (!controller.signal.aborted) post({ t: 'ok', id: msg.id, turn });
      },
      (err: unknown) => {
        // An aborted call was settled on the main thread already.
        if (!controller.signal.aborted) post({ t: 'err', id: msg.id, error: toWire(err) });
      },
    )
    .finally(() => calls.delete(msg.id));
}

/** The worker's major GCs since the last `stats` ask, and its largest heap right after one; watched from the first ask on. */
const majors = { watch: null as PerformanceObserver | null, n: 0, heap: 0 };

function stats(): ModelThreadStats {
  majors.watch ??= observeMajors();
  let requests = 0;
  for (const { last } of models.values()) for (const map of Object.values(last)) requests += map.size;
  const out = {
    requests,
    heapUsed: process.memoryUsage().heapUsed,
    heapAfterMajorGc: majors.n > 0 ? majors.heap : null,
    majorGcs: majors.n,
    cpuMs: threadCpuMs(),
  };
  majors.n = majors.heap = 0;
  return out;
}

function observeMajors(): PerformanceObserver {
  const watch = new PerformanceObserver((list) => {
    const n = list.getEntries().filter((e) => (e as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR).length;
    if (n === 0) return;
    majors.n += n;
    majors.heap = Math.max(majors.heap, process.memoryUsage().heapUsed);
  });
  watch.observe({ entryTypes: ['gc'] });
  return watch;
}

port.on('message', (msg: ToWorker) => {
  if (msg.t === 'call') {
    try {
      call(msg);
    } catch (err) {
      post({ t: 'err', id: msg.id, error: toWire(err) });
    }
  } else if (msg.t === 'abort') calls.get(msg.id)?.abort();
  else if (msg.t === 'forget') models.get(msg.model)?.last[msg.purpose].delete(msg.agent);
  else if (msg.t === 'drop') models.delete(msg.model);
  else if (msg.t === 'stats') post({ t: 'stats', id: msg.id, ...stats() });
  else {
    models.set(msg.model, {
      // Never routed again from here: under 'auto' a busy thread would start a thread of its own
      // (measured: 10,000 agents took 4× the time, with 10 GB more RSS).
      model: openaiModel({ ...msg.options, thread: false }),
      last: { main: new Map(), compaction: new Map(), review: new Map(), summary: new Map() },
    });
  }
});
