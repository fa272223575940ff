/**
 * `troupe send` and `troupe stop`, and the inbox through which they reach a live run. A run no
 * process drives is changed directly (this process owns the database meanwhile); a live one gets
 * a request in its database's inbox, which the owning process applies and answers. A message
 * passes the same rules either way (`messageRefusal`), and each refusal has its own exit code.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { isActive } from '../../machines/types.js';
import type { Coordinator } from '../host/createCoordinator.js';
import { messageRefusal } from '../host/messageRules.js';
import { resolveLimits } from '../host/options.js';
import { resumeCoordinator } from '../host/resumeCoordinator.js';
import { ConfigError, isTroupeError, toError, TroupeError } from '../errors.js';
import type { Model } from '../model/types.js';
import { postToInbox, readDelivery, readInbox, type InboxKind, type InboxResult } from '../store/inbox.js';
import { openStore, type SqliteStore } from '../store/sqliteStore.js';
import type { RunRow } from '../store/types.js';
import type { Io } from './args.js';
import { EXIT, exitCodeFor } from './exitCodes.js';
import { defaultReadDb, latestRun, readRun, requireDatabase, savedConfig } from './runs.js';
import type { Values } from './spec.js';
import { forTerminal } from './terminal.js';
import { applyRequest } from '../worker/requests.js';

/** Statuses in which a live agent does not take up a message until something else happens. */
const PARKED_FOR_MAIL = new Set(['budgetPaused']);

/** Apply what `troupe send` / `troupe stop` in other processes posted to this live run. */
export function serveInbox(c: Coordinator, store: SqliteStore, everyMs = 200): () => void {
  let busy = false;
  const poll = async () => {
    if (busy) return;
    busy = true;
    try {
      for (const request of store.openInbox(c.runId)) {
        const result = await applyRequest(c, request);
        store.answerInbox(request.id, result, Date.now());
      }
    } finally {
      busy = false;
    }
  };
  // Not unref'd: while a run is driven (even with every agent parked on a human), the process lives.
  const timer = setInterval(() => void poll().catch(() => undefined), everyMs);
  return () => clearInterval(timer);
}

const pause = () => new Promise((resolve) => setTimeout(resolve, 100));

/** The exit code of a refusal the live run answered (older answers carry the code only as a prefix). */
const refusalExit = (result: InboxResult) => exitCodeFor(result.code ?? /^([A-Z_]+):/.exec(result.message)?.[1]);

/**
 * Post a request to the live run that owns `db` and wait (up to `waitMs`) for its answer. For a
 * message, also wait until it is in the agent's session ("delivered"), unless the agent is parked
 * where a message does not wake it: then, or at the deadline, it is "queued".
 */
async function postAndWait(db: string, runId: string, kind: InboxKind, payload: Record<string, unknown>, io: Io, waitMs = 15_000): Promise<number> {
  const id = postToInbox(db, { runId, kind, payload, at: Date.now() });
  const deadline = Date.now() + waitMs;
  let result: InboxResult | null = null;
  while (result === null && Date.now() < deadline) {
    result = readInbox(db, id)?.result ?? null;
    if (result === null) await pause();
  }
  if (result === null) {
    io.out.write(`posted to the live run; it has not answered within ${waitMs / 1000} s (it applies requests while it runs)\n`);
    return EXIT.OK;
  }
  if (!result.ok) {
    io.err.write(`troupe: ${forTerminal(result.message)}\n`);
    return refusalExit(result);
  }
  if (result.messageId === undefined) {
    io.out.write(`${forTerminal(result.message)}\n`);
    return EXIT.OK;
  }
  for (;;) {
    const delivery = readDelivery(db, result.messageId);
    if (delivery?.deliveredAt != null) {
      io.out.write(`${forTerminal(result.message.replace(/^queued for/, 'delivered to'))}\n`);
      return EXIT.OK;
    }
    if (delivery === undefined || PARKED_FOR_MAIL.has(delivery.agentStatus) || Date.now() >= deadline) {
      const why = delivery ? ` (${forTerminal(delivery.agentStatus)})` : '';
      io.out.write(`${forTerminal(result.message)}: it waits in the agent's mailbox${why} and is read at its next turn\n`);
      return EXIT.OK;
    }
    await pause();
  }
}

/**
 * Run `idle` on a run no process is driving (this process owns the database meanwhile; the file
 * was verified before anything is written), or `live` with the run's id when another process
 * owns it (RUN_LOCKED): that process applies the request.
 */
async function onRun(
  db: string,
  runId: string | undefined,
  io: Io,
  idle: (store: SqliteStore, run: RunRow) => Promise<number>,
  live: (runId: string) => Promise<number>,
): Promise<number> {
  requireDatabase(db);
  let store: SqliteStore;
  try {
    store = openStore({ path: db, ...(io.redactor ? { redactor: io.redactor } : {}) });
  } catch (err) {
    if (!(isTroupeError(err) && err.code === 'RUN_LOCKED')) throw err;
    // Posting writes to the file too: decode it all first, as an owner's open does.
    const { store: reader, run } = readRun(db, runId, true);
    reader.close();
    return live(run.id);
  }
  try {
    const run = latestRun(store, runId);
    if (!run) throw new TroupeError('RUN_NOT_FOUND', `${db} holds no run`);
    return await idle(store, run);
  } finally {
    store.close();
  }
}

function findAgent(store: SqliteStore, run: RunRow, agent: string) {
  const target = store.listAgents(run.id).find((a) => a.id === agent || a.name === agent);
  if (!target) throw new TroupeError('AGENT_NOT_FOUND', `No agent "${agent}" in run ${run.id}`);
  return target;
}

export async function send(args: string[], values: Values, io: Io): Promise<number> {
  const [agent, text] = args;
  if (!agent || !text) throw new ConfigError('Usage: troupe send <agent> "<text>"');
  const db = defaultReadDb(values.db);
  return onRun(
    db,
    values.run,
    io,
    (store, run) => {
      const target = findAgent(store, run, agent);
      // The rules a live coordinator applies, with the limits the run was started with.
      const refusal = messageRefusal(target, text, {
        interactive: run.interactive,
        limits: resolveLimits(savedConfig(store, run).limits),
        fromUser: true,
        pending: () => store.pendingCount(target.id),
        parentActiveChildren: () => store.listAgents(run.id).filter((a) => a.parentId === target.parentId && isActive(a.status)).length,
      });
      if (refusal) throw refusal;
      store.enqueueMessage({
        id: `msg_cli_${randomUUID()}`,
        runId: run.id,
        to: target.id,
        from: 'user',
        fromName: 'user',
        type: 'instruction',
        priority: 'normal',
        content: text,
        interrupt: true,
        createdAt: Date.now(),
      });
      io.out.write(
        `queued for ${forTerminal(target.name)} (${forTerminal(target.id)}): no process is running this run; it is delivered when the run resumes (troupe resume)\n`,
      );
      return Promise.resolve(EXIT.OK);
    },
    (runId) => postAndWait(db, runId, 'send', { agent, content: text }, io),
  );
}

export async function stop(args: string[], values: Values, io: Io): Promise<number> {
  const [agent] = args;
  if (!agent) throw new ConfigError('Usage: troupe stop <agent>');
  const db = defaultReadDb(values.db);
  return onRun(
    db,
    values.run,
    io,
    async (store, run) => {
      const target = findAgent(store, run, agent);
      // Stopping goes through the coordinator (notices, cascade) without running anyone's turn:
      // this model never answers, so resumed agents do no work before the shutdown.
      const idle: Model = {
        name: 'troupe-stop',
        complete: (_request, { signal }) =>
          new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(toError(signal.reason)), { once: true })),
      };
      const c = await resumeCoordinator({ store, model: idle, runId: run.id, interactive: run.interactive });
      try {
        const stopped = await c.stop(target.id);
        io.out.write(`stopped ${stopped.length} agent(s): ${stopped.map((id) => forTerminal(c.get(id).name)).join(', ') || '(already terminal)'}\n`);
      } finally {
        await c.shutdown();
      }
      return EXIT.OK;
    },
    (runId) => postAndWait(db, runId, 'stop', { agent }, io),
  );
}
