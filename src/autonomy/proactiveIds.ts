/**
 * How proactive runs are named: what the CLI's reading commands need of the router without loading
 * what the router hosts runs with (the hosting loop, pg): a leaf module.
 * @module
 */
export { PROACTIVE_MESSAGE_TYPE } from '../host/mail/messaging.js';

/** Every proactive run id starts with this (`proactive-<trigger name>`). */
export const PROACTIVE_RUN_PREFIX = 'proactive-';

/** Whether a run id names a run started by a proactive trigger. */
export const isProactiveRunId = (runId: string): boolean => runId.startsWith(PROACTIVE_RUN_PREFIX);
