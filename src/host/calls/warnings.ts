/**
 * The budget warnings (DESIGN §3): bands of the share spent — of the run's limit, or in an
 * allowance's subtree of that allowance — each given once per agent and journalled; the text goes
 * into one call's input only.
 * @module
 */
import type { Clock } from '../../clock.js';
import type { WriteOp } from '../../store/port.js';

/** What the warnings need of the ledger's host. */
interface WarningHost {
  readonly runId: string;
  readonly clock: Clock;
  readonly budget: { readonly reserveFraction: number };
  stage(op: WriteOp): void;
}

/** Warning bands (share of the limit) and what each tells the agent to do. */
const ROOT_BANDS = [0.7, 0.85, 0.95] as const;
const CHILD_BANDS = [0.75, 0.8, 0.85] as const;
const ROOT_DIRECTIVES = [
  'Start planning the wind-down of this run.',
  'Stop opening new lines of work and move toward finish.',
  'Stop everything else and call finish now.',
];
const CHILD_DIRECTIVES = [
  'Plan your wind-down and turn what you have into something reportable.',
  'Report what you have confirmed and prepare agent_finish.',
  'Report now and call agent_finish before you are cut off.',
];

export class BudgetWarnings {
  readonly #host: WarningHost;
  /** The highest warning band each agent was given (journalled once per band and agent). */
  readonly #warned = new Map<string, number>();

  constructor(host: WarningHost) {
    this.#host = host;
  }

  /** The warning for `spentUsd` of `limitUsd`, or null under the first band; `owner`: the agent owns the allowance. */
  warn(agent: { readonly id: string; readonly parentId: string | null }, spentUsd: number, limitUsd: number, runWide: boolean, owner = false): string | null {
    const share = spentUsd / limitUsd;
    const root = agent.parentId === null;
    const bands = root ? ROOT_BANDS : CHILD_BANDS;
    let stage = -1;
    for (let i = 0; i < bands.length; i++) if (share >= bands[i]!) stage = i;
    if (stage < 0) return null;
    const label = ['NOTICE', 'URGENT', 'CRITICAL'][stage];
    const pct = Math.floor(share * 100);
    if (stage > (this.#warned.get(agent.id) ?? -1)) {
      // The text stays out of the session; that it was given, and when, is journalled (the dashboard's timeline).
      this.#warned.set(agent.id, stage);
      const data = { level: label, pct, spentUsd, limitUsd };
      this.#host.stage({ op: 'appendEvent', row: { runId: this.#host.runId, agentId: agent.id, type: 'budget.warning', data, at: this.#host.clock.now() } });
    }
    const reserve = Math.round(this.#host.budget.reserveFraction * 100);
    const effect = root
      ? `At ${reserve}% every sub-agent is stopped to leave room for your final report; at 100% the whole run stops.`
      : runWide || !owner
        ? `At ${reserve}% every sub-agent, you included, is stopped.`
        : `At ${reserve}% the agents under you are stopped; at 100% you are stopped too.`;
    const directive = (root ? ROOT_DIRECTIVES : CHILD_DIRECTIVES)[stage];
    const shared = runWide ? 'The budget is shared by every agent in this run.' : 'This is the allowance of your subtree.';
    return `[BUDGET ${label}] $${spentUsd.toFixed(2)} of $${limitUsd.toFixed(2)} spent (${pct}%). ${shared} ${effect} ${directive}`;
  }
}
