/**
 * `troupe follow [--db …] [--run <id>] [--after <seq>] [--json]`: a run's live stream on the
 * terminal from any process, whichever process hosts the run (a worker on PostgreSQL, another
 * shell's `troupe run` on SQLite): status changes, what agents say, their tools and retries, and
 * each answer's streamed text, until the run is over (or Ctrl-C). With `--json`, every event of the
 * stream as a JSON line with its `seq`; `--after <seq>` picks up where an earlier follow stopped.
 * @module
 */
import type { AgentRow } from '../store/types.js';
import { followRun, rootActive } from '../stream/follow.js';
import { number, type Io } from './args.js';
import type { Values } from './flags.js';
import { findRun, openRuns } from './runs.js';
import { forTerminal, jsonLine } from './terminal.js';
import { eventLine } from './view.js';

/** Aborts on the first SIGINT or SIGTERM; returns the way to stop listening. */
function onInterrupt(abort: AbortController): () => void {
  const stop = () => abort.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return () => {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  };
}

export async function follow(_args: string[], values: Values, io: Io, signal?: AbortSignal): Promise<number> {
  const after = number('after', values.after, true, true) ?? 0;
  const runs = await openRuns(values, io, { readOnly: true });
  const abort = new AbortController();
  const unlisten = onInterrupt(abort);
  signal?.addEventListener('abort', () => abort.abort(), { once: true });
  try {
    const run = await findRun(runs, values.run);
    // Over once nobody hosts it and its root ended: its host committed its last events before letting go.
    const live = async (id: string) => (await runs.hostOf(id)).hosted || (await rootActive(runs.reads, id));
    if (!values.json) io.err.write(`following run ${forTerminal(run.id)} of ${forTerminal(runs.label)} after event ${after} — Ctrl-C to stop\n`);
    let agents = new Map<string, AgentRow>();
    /** Each agent's answer text streamed since its last other event, printed as one line. */
    const thinking = new Map<string, { name: string; text: string }>();
    const said = (agentId: string) => {
      const open = thinking.get(agentId);
      thinking.delete(agentId);
      if (open && open.text.trim() !== '') io.out.write(`${forTerminal(open.name).padEnd(10)} writes: ${forTerminal(open.text.trim(), true)}\n`);
    };
    let last = after;
    for await (const event of followRun(runs.reads, run.id, { after, live, signal: abort.signal })) {
      last = event.seq;
      if (values.json) {
        io.out.write(`${jsonLine(event)}\n`);
        continue;
      }
      if (event.type === 'agent.delta') {
        if (event.delta.kind !== 'text') continue;
        const open = thinking.get(event.agentId) ?? { name: event.name, text: '' };
        open.text += event.delta.text;
        thinking.set(event.agentId, open);
        continue;
      }
      if ('agentId' in event) said(event.agentId);
      if (event.type === 'agent.status' && event.to !== 'running') agents = new Map((await runs.reads.listAgents(run.id)).map((a) => [a.id, a]));
      const text = eventLine(event, (id) => agents.get(id));
      if (text !== null) io.out.write(`${text}\n`);
    }
    for (const id of [...thinking.keys()]) said(id);
    if (abort.signal.aborted) {
      if (!values.json) io.err.write(`stopped following after event ${last}: troupe follow --after ${last} goes on from there\n`);
      return 130;
    }
    if (!values.json) io.err.write(`run ${forTerminal(run.id)} is over (last event ${last})\n`);
    return 0;
  } finally {
    unlisten();
    await runs.close();
  }
}
