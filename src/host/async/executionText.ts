/**
 * Auto-continuation (seeds/003–004): the system, not a human typing "continue", is the event loop
 * for asynchronous work. A tool result that says `execution <uuid> running|queued` links that
 * execution to the agent; when the host reports it finished, the agent is re-invoked with
 * `execution <id> completed|failed: <result>` added after its history for that call only (never
 * persisted as a fake user turn). continued-at is written before the re-invocation, so it can
 * never loop; after a restart, executions that finished while the process was down are continued
 * once.
 * @module
 */

const EXECUTION = /\bexecution\s+([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\s+(?:is\s+)?(?:running|queued)\b/gi;

const MENTIONS_EXECUTION = /execution/i;

/** The execution ids a tool result announces as started (`execution <uuid> running|queued`), de-duplicated. */
export function extractExecutionIds(text: string): string[] {
  // Every user tool result passes here: most say nothing about executions, so skip the scan.
  if (!MENTIONS_EXECUTION.test(text)) return [];
  const ids = new Set<string>();
  for (const match of text.matchAll(EXECUTION)) ids.add(match[1]!.toLowerCase());
  return [...ids];
}

/** The note the agent sees when one of its executions ends. */
export const continuationNote = (id: string, status: 'completed' | 'failed', result: string): string => `execution ${id} ${status}: ${result}`;
