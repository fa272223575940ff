/**
 * The run's way to its model: the gateway with the endpoints' circuit breakers and the shared
 * quota, wired to the parts it reads (sessions, tools, views) and putting what happens at the
 * endpoint (a breaker moving, a 429's pause) on record and to subscribers.
 * @module
 */
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { Model } from '../../model/types.js';
import type { BreakerChange } from '../../providers/breaker.js';
import { Quota, type QuotaNotice } from '../../providers/quota.js';
import type { StorePort, WriteOp } from '../../store/port.js';
import type { ResolvedProfile } from '../profiles.js';
import type { ResolvedOptions } from '../options.js';
import type { TroupeEvent } from '../views/views.js';
import type { BudgetLedger } from './budget.js';
import { RunBreakers } from './breakers.js';
import type { CallLog } from './callLog.js';
import { Gateway, type GatewayDeps } from './gateway.js';

export interface ProviderPorts {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly model: Model;
  readonly options: Pick<ResolvedOptions, 'breaker' | 'concurrency' | 'rateLimit' | 'quota' | 'quotaStore' | 'interactive' | 'systemPrompt'>;
  readonly budget: BudgetLedger;
  readonly commit: { stage(op: WriteOp): void; after(effect: () => void): void };
  readonly views: { emit(event: TroupeEvent): void; readonly hasListeners: boolean };
  readonly port: Pick<StorePort, 'guard'>;
  readonly callLog: CallLog;
  /** False once the run stopped accepting work: nothing more goes on record. */
  usable(): boolean;
  profile(agentId: string): ResolvedProfile | null;
  session: GatewayDeps['session'];
  toolSpecs: GatewayDeps['toolSpecs'];
  parentName: GatewayDeps['parentName'];
  warned: GatewayDeps['warned'];
}

export function runProvider(p: ProviderPorts): { gateway: Gateway; breakers: RunBreakers } {
  const { runId, clock, logger, options, commit, views } = p;
  const record = (type: 'provider.breaker' | 'provider.quota', data: Record<string, unknown>, at: number, event: TroupeEvent) => {
    commit.stage({ op: 'appendEvent', row: { runId, agentId: null, type, data, at } });
    commit.after(() => views.emit(event));
  };
  // The endpoint's breaker changed (any run of the process may have moved it).
  const breakerChanged = (change: BreakerChange) => {
    if (!p.usable()) return;
    const { endpoint, state, failures, openSince } = change;
    logger[state === 'closed' ? 'info' : 'warn']({ endpoint, state, failures, openSince }, `the endpoint's circuit breaker is ${state}`);
    record('provider.breaker', { endpoint, state, failures, openSince }, change.at, { type: 'provider.breaker', ...change });
  };
  // The endpoint's quota is paused by a 429 (this run's, or another's it found).
  const quotaPaused = (notice: QuotaNotice) => {
    if (!p.usable()) return;
    const at = clock.now();
    logger.warn(notice, `the endpoint is paused by a 429 until ${new Date(notice.until).toISOString()}`);
    record('provider.quota', { ...notice }, at, { type: 'provider.quota', ...notice, at });
  };
  const breakers = new RunBreakers(options.breaker, clock, breakerChanged, (err) =>
    logger.warn({ err }, "the cluster's circuit breaker could not be read or written; this process's copy goes on alone"),
  );
  const gateway = new Gateway({
    model: p.model,
    clock,
    ledger: p.budget,
    concurrency: options.concurrency.model,
    rateLimit: options.rateLimit,
    quota: options.quota ? new Quota({ clock, store: options.quotaStore, limits: options.quota, notify: quotaPaused }) : null,
    interactive: options.interactive,
    systemPrompt: options.systemPrompt,
    profilePrompt: (agent) => p.profile(agent.id)?.systemPrompt,
    session: p.session,
    toolSpecs: p.toolSpecs,
    parentName: p.parentName,
    warned: p.warned,
    delta: (agent, delta) => views.emit({ type: 'agent.delta', agentId: agent.id, name: agent.name, delta, at: clock.now() }),
    hasListeners: () => views.hasListeners,
    fenced: () => p.port.guard?.check() ?? null,
    breaker: (model) => breakers.of(model),
    log: p.callLog,
  });
  return { gateway, breakers };
}
