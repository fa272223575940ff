/** What a harness run counts: coverage (where kills landed, what was exercised) and violations. */

export interface CrashCounts {
  /** The trial mode (see harness.ts). */
  mode: string;
  trials: number;
  /** Steady-state events (the mode's kill line) in one uncrashed run, measured first: the range steady-state kills are drawn from. */
  calibrationTicks: number;
  /** First children killed (at start-up or in steady state), second children killed while resuming, recovery loops killed inside recovery. */
  killsDuringStart: number;
  killsDuringResume: number;
  killsDuringRecovery: number;
  /**
   * Where each child of a trial was when the kill landed, as `<child>:<phase>` — the last progress
   * line the parent had seen: `start:boot` (opening the file), `start:open` (creating the run),
   * `start:steady`, `resume:boot`, `resume:recovering` (recovery and respawn), `resume:resumed`,
   * `recovery:recovering`; `<child>:finished` when it ended before its kill. The new modes name
   * where the child died (the last line it printed): `tool-running` (a tool's ledger row
   * committed, its side effect not yet made), `tool-effected` (effect made, result not yet
   * seen committed), `in-commit` (inside a commit of several agents' writes), `after-commit`
   * (that commit returned; its effects — acknowledgements, wakes — may not have run).
   */
  phases: Record<string, number>;
  acked: number;
  lostAcks: number;
  duplicateDeliveries: number;
  duplicateNotices: number;
  missingNotices: number;
  integrityFailures: number;
  checksumFailures: number;
  recoveryNotIdempotent: number;
  runsNotCompleted: number;
  /** Delegations seen: dispatched in total, and acknowledged complete by the child. */
  delegations: number;
  delegationsInterrupted: number;
  delegationsAckedDone: number;
  delegationsLeftRunning: number;
  delegationsDowngraded: number;
  delegationMessagesWrong: number;
  /** In-doubt mode, coverage: side-effect lines, calls found started without a result after a kill (by tool, with or without their effect made), idempotent re-runs, TOOL_NOT_RUN answers. */
  effects: number;
  inDoubtCalls: number;
  inDoubtWithEffect: number;
  inDoubtWithoutEffect: number;
  inDoubtIdempotent: number;
  idempotentReruns: number;
  notRunCalls: number;
  /** In-doubt mode, violations. */
  nonIdempotentRanTwice: number;
  opRanTwice: number;
  idempotencyKeyChanged: number;
  effectWithoutLedgerRow: number;
  resultsNotOnce: number;
  inDoubtNotSurfaced: number;
  inDoubtSpurious: number;
  idempotentNotRerun: number;
  notRunButRan: number;
  successWithoutEffect: number;
  ledgerLeftStarted: number;
  /** Group mode: commits carrying several agents' writes in an uncrashed run, and agents per such commit at the kills that landed in one. */
  groupsPerRun: number;
  agentsInKilledGroups: number;
  /** Group mode: kills inside a commit whose messages (two or more) were checked all-or-none, and those found torn. */
  groupsCheckedAtomic: number;
  tornGroups: number;
  childErrors: number;
  /** The first few child failures, for the log. */
  errors: string[];
  trialsWithViolation: number;
  failingSeeds: number[];
  seconds: number;
}

/** Every count that must stay zero on the real code. */
export const VIOLATIONS = [
  'lostAcks',
  'duplicateDeliveries',
  'duplicateNotices',
  'missingNotices',
  'integrityFailures',
  'checksumFailures',
  'recoveryNotIdempotent',
  'runsNotCompleted',
  'delegationsLeftRunning',
  'delegationsDowngraded',
  'delegationMessagesWrong',
  'nonIdempotentRanTwice',
  'opRanTwice',
  'idempotencyKeyChanged',
  'effectWithoutLedgerRow',
  'resultsNotOnce',
  'inDoubtNotSurfaced',
  'inDoubtSpurious',
  'idempotentNotRerun',
  'notRunButRan',
  'successWithoutEffect',
  'ledgerLeftStarted',
  'tornGroups',
  'childErrors',
] as const;
export type Violation = Exclude<(typeof VIOLATIONS)[number], 'childErrors'>;

export function emptyCounts(mode: string, calibrationTicks: number): CrashCounts {
  const zero = Object.fromEntries(VIOLATIONS.map((v) => [v, 0])) as Record<(typeof VIOLATIONS)[number], number>;
  return {
    ...zero,
    mode,
    trials: 0,
    calibrationTicks,
    killsDuringStart: 0,
    killsDuringResume: 0,
    killsDuringRecovery: 0,
    phases: {},
    acked: 0,
    delegations: 0,
    delegationsInterrupted: 0,
    delegationsAckedDone: 0,
    effects: 0,
    inDoubtCalls: 0,
    inDoubtWithEffect: 0,
    inDoubtWithoutEffect: 0,
    inDoubtIdempotent: 0,
    idempotentReruns: 0,
    notRunCalls: 0,
    groupsPerRun: 0,
    agentsInKilledGroups: 0,
    groupsCheckedAtomic: 0,
    errors: [],
    trialsWithViolation: 0,
    failingSeeds: [],
    seconds: 0,
  };
}
