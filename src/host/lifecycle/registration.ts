/**
 * How agents enter a run: the root, children spawned by agents, and — after a restart — every
 * agent of the run respawned in its persisted state. Registration and the first input are staged
 * together (an agent never exists without its identity; a run never exists without its root).
 * @module
 */
import type { StreamRecorder } from '../views/streamRecorder.js';
import type { Logger } from 'pino';
import type { Actor } from 'xstate';
import { getAgentRecord, spawnRejection, type coordinatorMachine } from '../../../machines/coordinatorMachine.js';
import type { AgentStatus, SerializedError } from '../../../machines/types.js';
import type { Clock } from '../../clock.js';
import { TroupeError } from '../../errors.js';
import type { UsagePurpose } from '../../model/types.js';
import type { StorePort, WriteOp } from '../../store/port.js';
import { newAgentRow } from '../../store/rows.js';
import type { RunTrace } from '../../trace/tracer.js';
import type { AgentRow, AgentTerms } from '../../store/types.js';
import { notesText } from '../../notes/notes.js';
import type { SpawnRequest } from '../../tools/ports.js';
import { atEntry } from '../../tools/builtinSpawn.js';
import { childFirstInput, inheritedContext, rootFirstInput } from '../../turn/texts.js';
import { lifecycleOf, type AgentHandle, type Agents } from '../agents/agents.js';
import type { Lifecycle } from './lifecycle.js';
import { isValidAgentName, runExistsError, type IdSource, type ResolvedOptions } from '../options.js';
import type { Sessions } from '../mail/sessions.js';
import { profileOf } from '../profiles.js';
import type { Views } from '../views/views.js';

export interface RegistrarHost {
  readonly runId: string;
  readonly ids: IdSource;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly options: Pick<ResolvedOptions, 'interactive' | 'limits' | 'profiles' | 'notes'>;
  readonly port: StorePort;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  readonly agents: Agents;
  readonly sessions: Sessions;
  readonly views: Views;
  readonly lifecycle: Lifecycle;
  readonly trace: Pick<RunTrace, 'stintStarted'>;
  /** The live stream's writer, if on: told once the run's row is staged (its rows must follow it). */
  readonly stream: Pick<StreamRecorder, 'runStarted'> | null;
  /** Allowances (calls/budget.ts): whether one fits its parent's account, and opening it. */
  readonly budget: {
    spawnBlocked(parentId: string): string | null;
    allowanceRefusal(parentId: string, usd: number): string | null;
    openAllowance(childId: string, usd: number): void;
  };
  stage(op: WriteOp): void;
  assertUsable(): void;
  checkQuiescence(): void;
}

export class Registrar {
  readonly #host: RegistrarHost;
  /** Whether this coordinator checked that its run id is new (a networked store is asked once, at start). */
  #checkedRunId: boolean;

  constructor(host: RegistrarHost, checkedRunId: boolean) {
    this.#host = host;
    this.#checkedRunId = checkedRunId;
  }

  /** `notes`: what the root reads of the promoted notes instead of the store's (a replay's: what the recorded root read). */
  async startRoot(req: { name: string; task: string; skills?: string[]; terms?: AgentTerms | null; notes?: string | null }): Promise<AgentHandle> {
    const host = this.#host;
    host.assertUsable();
    const { name, task, skills } = this.#check(req);
    // The promoted notes as they stand now (read before the checks below, which nothing may
    // separate from the registration but the run-id check): the first input commits what was read.
    const notes =
      req.notes !== undefined
        ? req.notes
        : host.options.notes && host.port.promotedNotes
          ? notesText(await host.port.promotedNotes(), host.options.notes.maxChars)
          : null;
    host.assertUsable();
    const rejection = spawnRejection(host.coordinator.getSnapshot().context, null);
    if (rejection) throw new TroupeError(rejection.code, rejection.reason);
    if (!this.#checkedRunId) {
      if (await host.port.getRun(host.runId)) {
        throw runExistsError(host.runId);
      }
      this.#checkedRunId = true;
      host.assertUsable();
    }
    const id = host.ids.agent();
    const terms = notes === null ? (req.terms ?? null) : { ...req.terms, notes };
    const first = rootFirstInput({ id, name, parentId: null, parentName: null }, task, skills, terms?.output ?? null, notes);
    return this.#register({ id, name, parentId: null, depth: 0, task, skills, terms }, first);
  }

  /**
   * Register and start children of `parent`, in order, all or none: every request, then the limits
   * and the budget for the whole batch (maxAgents and maxChildren counting all of them, their
   * allowances together) are checked before the first is registered. Throws a TroupeError when
   * refused (a batch's entry named as `agents[i] (name)`), nothing registered.
   */
  spawnChildren(parent: AgentHandle, reqs: readonly SpawnRequest[]): AgentHandle[] {
    const host = this.#host;
    const one = reqs.length === 1;
    const checked = reqs.map((req, i) => {
      try {
        return this.#check(req);
      } catch (e) {
        throw one ? e : atEntry(e, i, req.name);
      }
    });
    const rejection = spawnRejection(host.coordinator.getSnapshot().context, parent.id, reqs.length);
    if (rejection) throw new TroupeError(rejection.code, rejection.reason);
    const blocked = host.budget.spawnBlocked(parent.id);
    if (blocked !== null) throw new TroupeError('BUDGET_RESERVE_REACHED', blocked);
    let allowancesUsd = 0;
    for (const req of reqs) allowancesUsd += req.terms?.allowanceUsd ?? 0;
    if (allowancesUsd > 0) {
      // Set aside from the parent's account (and every one above), all together, or refused: nothing spawned.
      const refused = host.budget.allowanceRefusal(parent.id, allowancesUsd);
      const whom = one ? checked[0]!.name : `these ${reqs.length} agents`;
      if (refused !== null) throw new TroupeError('BUDGET_ALLOWANCE_EXCEEDED', `${parent.name} cannot spawn ${whom}: ${refused}`);
    }
    // The parent is running this turn, so its session is in memory (read once for the batch).
    let background: string | undefined;
    return reqs.map((req, i) => {
      const { name, task, skills } = checked[i]!;
      const id = host.ids.agent();
      const identity = { id, name, parentId: parent.id, parentName: parent.name };
      const context = req.inheritContext ? (background ??= inheritedContext(host.sessions.items(parent))) : null;
      const first = childFirstInput(identity, task, skills, context, req.terms?.output ?? null);
      const child = this.#register({ id, name, parentId: parent.id, depth: parent.depth + 1, task, skills, terms: req.terms ?? null }, first);
      parent.children.push(child.id);
      if (req.terms?.allowanceUsd !== undefined) host.budget.openAllowance(child.id, req.terms.allowanceUsd);
      return child;
    });
  }

  #check(req: { name: string; task: string; skills?: string[]; terms?: AgentTerms | null }) {
    const { name, task, skills = [] } = req as { name: unknown; task: unknown; skills?: unknown };
    // A profile the run does not configure is refused before anything is registered (PROFILE_UNKNOWN).
    profileOf(this.#host.options.profiles, req.terms?.profile);
    if (!isValidAgentName(name)) {
      throw new TroupeError('CONFIG_INVALID', `Expected name to be a one-line string of 1..64 characters, got ${JSON.stringify(name)}`);
    }
    if (typeof task !== 'string' || task.trim() === '') {
      throw new TroupeError('CONFIG_INVALID', `Expected task to be a non-empty string, got ${JSON.stringify(task)}`);
    }
    const { maxMessageBytes } = this.#host.options.limits;
    if (Buffer.byteLength(task) > maxMessageBytes) {
      throw new TroupeError('MESSAGE_TOO_LARGE', `The task is ${Buffer.byteLength(task)} bytes; maxMessageBytes is ${maxMessageBytes}`);
    }
    if (!Array.isArray(skills) || skills.length > 5 || skills.some((s) => typeof s !== 'string')) {
      throw new TroupeError('CONFIG_INVALID', `Expected skills to be at most 5 strings, got ${JSON.stringify(skills)}`);
    }
    return { name: name.trim(), task, skills: skills as string[] };
  }

  #register(
    reg: { id: string; name: string; parentId: string | null; depth: number; task: string; skills: string[]; terms: AgentTerms | null },
    firstInput: ReturnType<typeof rootFirstInput>,
  ): AgentHandle {
    const host = this.#host;
    const at = host.clock.now();
    const row = newAgentRow(
      { id: reg.id, runId: host.runId, name: reg.name, parentId: reg.parentId, depth: reg.depth, task: reg.task, skills: reg.skills, terms: reg.terms },
      at,
    );
    host.coordinator.send({ type: 'agent.register', id: reg.id, name: reg.name, parentId: reg.parentId });
    if (!getAgentRecord(host.coordinator.getSnapshot().context, reg.id)) throw new TroupeError('INTERNAL', `the coordinator did not register ${reg.id}`);
    if (reg.parentId === null) {
      host.stage({
        op: 'insertRun',
        run: { id: host.runId, createdAt: at, interactive: host.options.interactive, rootId: reg.id, budget: host.coordinator.getSnapshot().context.budget },
      });
      host.stream?.runStarted();
    }
    host.stage({ op: 'registerAgent', agent: row, firstInput: [firstInput] });
    host.stage({
      op: 'appendEvent',
      row: { runId: host.runId, agentId: reg.id, type: 'agent.registered', data: { parentId: reg.parentId, name: reg.name }, at },
    });
    host.sessions.seed(reg.id, [firstInput]);
    const h = host.agents.add(row, false);
    host.trace.stintStarted(h);
    host.views.added(h, at);
    if (host.logger.isLevelEnabled('info')) h.logger.info({ name: reg.name, parentId: reg.parentId, depth: reg.depth }, 'agent registered');
    return h;
  }

  /**
   * Recreate the agents of a restored run, parents first, each in its persisted state: running
   * agents run again from their session, parked ones stay parked (dormant, their idle timers armed
   * from `waitingSince`), and mail that arrived before the crash wakes whoever it would have woken.
   * An agent that cannot be respawned (`failed`: its session could not be read) is marked crashed
   * through its machine, and its parent is told.
   */
  respawn(rows: readonly AgentRow[], spent: ReadonlyMap<string, Partial<Record<UsagePurpose, number>>>, failed: ReadonlyMap<string, unknown>): void {
    const host = this.#host;
    const handles: AgentHandle[] = [];
    host.views.batch(() => {
      for (const row of rows) {
        const h = host.agents.add(row, true);
        // Most parked agents have spent nothing: their handle's zero spend stands (no copies made).
        const spend = spent.get(row.id);
        if (spend) {
          h.spentByPurpose = { ...spend };
          h.spentUsd = Object.values(spend).reduce((sum, usd) => sum + usd, 0);
        }
        if (row.parentId !== null) host.agents.find(row.parentId)?.children.push(row.id);
        host.views.added(h, row.createdAt);
        handles.push(h);
      }
    });
    for (const h of handles) {
      const err = failed.get(h.id);
      if (err !== undefined) {
        host.logger.error({ err, agentId: h.id }, 'respawn failed; the agent is marked crashed');
        this.crash(h, { code: (err as { code?: string }).code ?? 'INTERNAL', message: `respawn failed: ${(err as Error).message}`, retryable: false });
        continue;
      }
      const status = host.agents.status(h);
      if (status === 'running') host.trace.stintStarted(h);
      host.lifecycle.rewakeRestored(h, status, host.agents.lifecycle(h));
    }
    if (host.logger.isLevelEnabled('info')) host.logger.info({ agents: rows.length }, 'agents respawned');
    // A run that stopped between going quiescent and reporting its dead waits reports them now.
    host.checkQuiescence();
  }

  /** Put an agent in `crashed` through its machine (a new actor booting there); the lifecycle records it. */
  crash(h: AgentHandle, error: SerializedError): void {
    const state = { ...lifecycleOf(h.dormant ?? h.applied), error };
    this.#host.agents.restart(h, 'crashed' satisfies AgentStatus, state);
  }
}
