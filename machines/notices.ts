/**
 * Texts the coordinator sends to parents. Each notice names the child (a report: through the mail
 * header its parent reads it under, turn/texts.ts messageToItem) and says plainly whether a
 * report is still coming, so a parent never waits on a child that will not answer.
 * @module
 */
import type { CompletionReport, SerializedError, StopReason } from './types.js';

/** Notice kinds, which are also the `type` of the mailbox message that carries them. */
export type NoticeKind = 'completion' | 'completed' | 'failed' | 'crashed' | 'stopped' | 'stalled' | 'budget_reserve_stop';

/** The notices that end a child's stint: its report, or the word that none is coming (a stall notice is not one). */
const REPORT_KINDS: ReadonlySet<string> = new Set<NoticeKind>(['completion', 'completed', 'failed', 'crashed', 'stopped']);

/**
 * A child's report: a terminal notice (keyed `notice:<child>:<stint>` by the coordinator, exactly
 * once per stint) of a kind that ends the stint. No other message carries such a key.
 */
export const isReport = (mail: { type: string; noticeKey: string | null }): boolean =>
  mail.noticeKey !== null && mail.noticeKey.startsWith('notice:') && REPORT_KINDS.has(mail.type);

export interface NoticeSubject {
  id: string;
  name: string;
  task: string;
}

/**
 * What a notice about a child says, as data (the message row's `data`): the same facts as its text,
 * for code that reads a parent's mailbox. `value` only when the child finished with one.
 */
export interface NoticeData {
  agentId: string;
  name: string;
  /** The child's status when the notice was sent (`stalled` for a stall notice). */
  status: 'completed' | 'failed' | 'crashed' | 'stopped' | 'stalled';
  /** The child's stint the notice is about (0: its first). */
  stint: number;
  /** From the completion report, when there is one. */
  success?: boolean;
  /** The value the child finished with (valid against its output schema), when it has one. */
  value?: unknown;
  stopReason: StopReason | null;
  /** The error code a failed or crashed child ended with. */
  errorCode: string | null;
}

const label = (s: NoticeSubject) => `${s.name} (${s.id})`;

const STOP_WHY: Record<StopReason, string> = {
  requested: 'an explicit stop',
  maxTurns: 'its turn limit',
  budget: 'the run budget being spent',
  reserve: 'the sub-agent budget reserve',
  reentry: 'its self-wake budget (it kept waking itself without a message from the user)',
  allowance: 'its budget allowance being spent',
};

/**
 * A completion report as its parent reads it. Who sent it and that it is a report are in the mail
 * header the parent reads above it (`[Message from <name> (<id>) | type=completion …]`) and its task
 * is in the parent's own spawn call, so the text carries the rest once: status, summary, findings
 * and open items when there are any, the value as compact JSON — a parent of thousands reads its
 * children's own words and a few dozen bytes each (test/integration/parentRequest.test.ts).
 */
export function completionReportText(report: CompletionReport): string {
  const bullets = (items: string[]) => items.map((i) => `- ${i}`).join('\n');
  const lines = [`Status: ${report.success ? 'SUCCESS' : 'FAILED'}`];
  lines.push(`Summary: ${report.summary || '(none)'}`);
  if (report.findings.length > 0) lines.push('Findings:', bullets(report.findings));
  if (report.openItems.length > 0) lines.push('Open items (unresolved, need follow-up):', bullets(report.openItems));
  if (report.value !== undefined) lines.push(`Value (JSON, matches the output schema you gave): ${JSON.stringify(report.value)}`);
  return lines.join('\n');
}

export function terminalNoticeText(
  child: NoticeSubject,
  status: 'completed' | 'failed' | 'crashed' | 'stopped',
  detail: { error: SerializedError | null; stopReason: StopReason | null },
): string {
  const why = detail.error ? ` Last error: ${detail.error.code}: ${detail.error.message}` : '';
  switch (status) {
    case 'completed':
      return `[Agent completed] ${label(child)} has finished and is no longer running, but sent no completion report. Stop waiting on it; ask it directly if you need its results.`;
    case 'failed':
      return `[Agent failed] ${label(child)} stopped with an error and will not send a report. Stop waiting on it unless you message it again.${why}`;
    case 'crashed':
      return `[Agent crashed] ${label(child)} terminated unexpectedly and will not send a report. Stop waiting on it unless you intend to message it again.${why}`;
    case 'stopped':
      return `[Agent stopped] ${label(child)} was stopped by ${STOP_WHY[detail.stopReason ?? 'requested']} before it finished. No report is coming; account for its unfinished subtask and move on.`;
  }
}

export function stallNoticeText(child: NoticeSubject, cause: 'plainText' | 'idle'): string {
  const what = cause === 'plainText' ? 'kept ending turns without a tool call' : 'kept waiting on other agents without hearing from any';
  return `[Agent stalled] ${label(child)} ${what} and is parked until it gets a message. It will not report by itself: either send it a concrete next step, or stop waiting and account for its subtask.`;
}

export const RESERVE_NOTICE_TEXT =
  '[Budget reserve reached] The run has spent its sub-agent share of the budget. Every sub-agent is being stopped as soon as its current turn ends, and none of them will send a report. Do not wait on or spawn sub-agents: wrap up with what you have and call finish now.';
