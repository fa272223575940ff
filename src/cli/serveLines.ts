/**
 * What `troupe serve` prints: one line per trigger fired, routed, dropped, denied or failed, per
 * health change and per event of a hosted run — text, or JSON lines with `--json`.
 * @module
 */
import type { AuditEvent, EventBus } from '../autonomy/eventBus.js';
import type { ProactiveTrigger } from '../autonomy/proactiveTrigger.js';
import { HEALTH_CHECK_EVENT } from '../autonomy/watchdog.js';
import type { ProactiveFire } from '../autonomy/proactivePipeline.js';
import type { RouteResult } from '../autonomy/proactiveRouter.js';
import type { Coordinator } from '../host/createCoordinator.js';
import type { FireRoute } from '../autonomy/fires.js';
import { forTerminal, jsonLine } from './terminal.js';
import { eventLine, lookupIn, type Output } from './view.js';

/** Writes one line per event: text, or JSON lines with `--json`. */
export interface Printer {
  line(text: string, json: Record<string, unknown>): void;
}

/** Lines carry trigger names, paths, errors and agents' words: every one goes out terminal-safe. */
export const printerFor = (out: Output, json: boolean): Printer => ({
  line: (text, value) => out.write(json ? `${jsonLine(value)}\n` : `${forTerminal(text, true)}\n`),
});

export const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

function describeTarget(fire: Pick<ProactiveFire, 'sessionId' | 'target'>): string {
  return 'agent' in fire.target ? `agent ${fire.target.agent} of the main run` : `the root of run ${fire.sessionId}`;
}

export function describeRoute(r: RouteResult | FireRoute): string {
  switch (r.kind) {
    case 'posted':
      return `message to ${r.agentId} in run ${r.runId} posted (inbox request ${r.requestId}: the run's host delivers it)`;
    case 'started':
      return `started run ${r.runId} (root ${r.agentId})`;
    case 'resumed':
      return `resumed run ${r.runId} and messaged its root (${r.agentId})`;
    case 'sent':
      return `message to ${r.agentId} in run ${r.runId}`;
    case 'taken':
      return `tick ${r.tick} for run ${r.runId} fired by another process`;
  }
}

/** One line for an audit event worth showing; null for the rest. */
function auditLine(event: AuditEvent): string | null {
  const trigger = String(event.trigger ?? '');
  switch (event.type) {
    case 'proactive.trigger_fired':
      return `proactive  ${trigger} fired → ${describeTarget(event as unknown as ProactiveFire)}`;
    case 'proactive.trigger_dropped':
      return `proactive  ${trigger} dropped (${String(event.reason)}, ${seconds(Number(event.remainingMs ?? 0))} left)`;
    case 'proactive.trigger_denied':
      return `proactive  ${trigger} denied (${String(event.reason)})`;
    case 'proactive.fire_failed':
      return `proactive  ${trigger} failed: ${String(event.error)}`;
    case 'proactive.watch_failed':
      return `proactive  ${trigger} stopped watching ${String(event.path)}: ${String(event.error)}`;
    case 'proactive.probe_failed':
      return `proactive  ${trigger} probe failed: ${String(event.error)}`;
    default:
      return null;
  }
}

/**
 * A schedule faster than its cooldown drops an event at every tick. On a terminal only the first
 * drop after each fire (per trigger) is shown: returns null for an event to hide, else a suffix
 * for its line. (`--json` prints every event.)
 */
export function dropFilter(): (event: AuditEvent) => string | null {
  const quiet = new Set<string>();
  return (event) => {
    const trigger = String(event.trigger ?? '');
    if (event.type === 'proactive.trigger_fired') quiet.delete(trigger);
    if (event.type !== 'proactive.trigger_dropped') return '';
    if (quiet.has(trigger)) return null;
    quiet.add(trigger);
    return ' — later drops are not shown until it fires again';
  };
}

/** Prints a hosted run's status changes and answers, prefixed `[label]` (token deltas are left out). */
export function runEventLine(label: string, c: Pick<Coordinator, 'runId' | 'subscribe' | 'get'>, printer: Printer): () => void {
  const lookup = lookupIn(c);
  return c.subscribe((event) => {
    if (event.type === 'agent.delta') return;
    const text = eventLine(event, lookup);
    if (text === null) return;
    printer.line(`[${label}] ${text}`, { ...event, runId: c.runId });
  });
}

/**
 * Prints what the bus carries: a line per trigger fired, dropped, denied or failed (drops filtered
 * on a terminal, see {@link dropFilter}) and per health change of a watchdog check. Returns the
 * unsubscribe.
 */
export function busLines(bus: EventBus, printer: Printer, json: boolean): () => void {
  const shown = json ? () => '' : dropFilter();
  const known = new Map<string, boolean>();
  return bus.on((event) => {
    if (event.type === HEALTH_CHECK_EVENT) {
      const name = String(event.name);
      const healthy = event.healthy === true;
      if (known.get(name) === healthy) return;
      known.set(name, healthy);
      printer.line(healthy ? `watchdog   ${name} healthy` : `watchdog   ${name} unhealthy: ${String(event.error)}`, event);
      return;
    }
    const suffix = shown(event);
    const text = auditLine(event);
    if (suffix !== null && text !== null) printer.line(text + suffix, event);
  });
}

/** A warning line per trigger that targets an agent when there is no main run to find it in. */
export function warnAgentTargets(triggers: readonly ProactiveTrigger[], hasMain: boolean, printer: Printer): void {
  if (hasMain) return;
  for (const t of triggers) {
    if (!t.target || !('agent' in t.target)) continue;
    printer.line(`proactive  ${t.name} targets agent ${t.target.agent}, but there is no main run: its fires will fail`, {
      type: 'serve.warning',
      at: Date.now(),
      trigger: t.name,
      message: 'no main run for an agent target',
    });
  }
}
