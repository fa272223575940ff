/**
 * The notice an allowance's owner gets, once, when its subtree's reserve trips (issue 35): the
 * per-allowance counterpart of the run's reserve notice.
 * @module
 */

export function allowanceReserveText(allowanceUsd: number): string {
  return `[Allowance reserve reached] Your subtree has spent its sub-agent share of your $${allowanceUsd.toFixed(2)} allowance. Every agent under you is being stopped as soon as its current turn ends, and none of them will send a report. Do not wait on or spawn sub-agents: wrap up with what you have and call agent_finish now.`;
}
