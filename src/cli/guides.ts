/**
 * The prose of the `troupe help` topics that explain a mechanism rather than list a table:
 * `providers` (retries, the silent-stream guard, the circuit breaker, the key quota) and
 * `profiles` (named agent definitions, the auxiliary model, prices, background review and its
 * notes). reference.ts prints each with the rows the code holds — the config keys' descriptions
 * (CONFIG_SCHEMA) and the typed outcomes (ERROR_CODES) — so those parts cannot drift.
 * @module
 */

export interface Guide {
  /** Paragraphs; a line starting with "- " is a list item. */
  readonly text: string;
  /** Config keys whose schema descriptions are printed (troupe help config has them all). */
  readonly keys: readonly string[];
  /** Error codes whose meaning is printed: what an agent, its parent and the command see. */
  readonly errors: readonly string[];
  /** Events (TroupeEvents and event rows of the run), with what each says. */
  readonly events: readonly (readonly [string, string])[];
}

export const PROVIDERS: Guide = {
  text: `A model endpoint is its base URL and API key (a digest of the key, never the key): every agent of every run in the process that calls it shares what is below, and on PostgreSQL (troupe worker, or run/resume with --db postgres://…) every worker of the cluster shares the breaker and the quota through the database.

Retries. A timeout, a dropped connection, 408, 409, 429 and 5xx are retried: at most retry.maxRetries times (5), waiting 2 s doubling or the server's retry-after, capped at 90 s; the live view says "rate limited (429), retrying in 8 s (2/5)". A context overflow compacts the session and is retried. Any other failure fails the agent with its PROVIDER_* code, and its parent is told once.

Silent streams. With streaming, no byte for idleTimeoutMs (120 s; never more than timeoutMs, 600 s), before the first chunk or between two, ends the attempt as PROVIDER_TIMEOUT, which is retried. In a program: openaiModel({ idleTimeoutMs, timeoutMs }).

Circuit breaker (config "breaker", option breaker; false: none). breaker.failureThreshold (5) outage failures in a row (no connection, a timeout, 5xx/408/409) open it. While it is open, calls park at no cost: no call, no retry attempt spent, nothing charged. After breaker.cooldownMs (30 s) exactly one call goes as the probe (state halfOpen): its success closes the breaker and every parked call goes; its failure opens it for another cooldown. Open for breaker.openTimeoutMs (10 min) since the outage began, the parked agents fail with PROVIDER_CIRCUIT_OPEN, one outcome per agent, each parent told once. The breaker guards agents' main calls; compaction and review calls are not held by it.

Key quota (config "quota", option quota). quota.requestsPerMinute and quota.tokensPerMinute are taken before a call starts, as the budget reserves money: 1 request and the call's estimated tokens from the current clock minute, settled to the real usage when it answers (unused room goes back to whoever waits). A call that does not fit waits, at no cost, for the next minute. A 429 with retry-after pauses the endpoint for every agent of the process (and the cluster) until then, not only the one that got it. A stop or shutdown ends a wait. In a program, quotaStore shares the counters (a worker on PostgreSQL uses the database's).`,
  keys: ['timeoutMs', 'idleTimeoutMs', 'breaker', 'quota', 'rateLimit'],
  errors: ['PROVIDER_TIMEOUT', 'PROVIDER_CONNECTION', 'PROVIDER_UNAVAILABLE', 'PROVIDER_RATE_LIMITED', 'PROVIDER_CIRCUIT_OPEN'],
  events: [
    [
      'provider.breaker',
      'the breaker of { endpoint } moved to state open, halfOpen or closed, with the failures in a row and openSince; the live view prints "… is down (5 failures in a row): circuit open, calls wait for a probe", "probing", "answers again: circuit closed, calls resume"; the dashboard timeline shows it across lanes',
    ],
    ['provider.quota', 'a 429 paused { endpoint } until { until } for every agent; the live view prints "… said 429: paused for every agent until …"'],
    ['agent.activity (retry)', 'an agent waits to retry: its cause (429, 5xx, timeout, connection), the delay and the attempt'],
  ],
};

export const PROFILES: Guide = {
  text: `Profiles (config "profiles", option profiles) are named agent definitions: { description, systemPrompt?, model?, tools?, limits: { maxTurns? } }. spawn_agent lists every profile's description and takes profile: "<name>", as does each entry of spawn_agents (up to 128 children in one call, all or none: one bad entry or a batch past maxChildren, maxAgents or the allowances left refuses the call, nothing spawned; it answers the ids in order; then wait_for_agents with until: "all" wakes the parent once, when its last active child reports, with every report — anything else, a question, a stall notice, the timeout, still wakes it at once); start({ profile }) names one for the root. An agent of a profile gets the run's system prompt with the profile's appended, its main calls go to the profile's model (on the same server, priced as that model: it needs a price when the run has a budget), its user tools are narrowed to the profile's tools (built-in tools stay; its descendants are narrowed too), and limits.maxTurns is its own. The name is saved with the agent: at resume a profile no longer configured fails the agent with PROFILE_UNKNOWN; a spawn naming an unknown one is refused with it, nothing spawned.

The auxiliary model (config "auxiliaryModel", option auxiliaryModel) answers troupe's own calls on an agent's behalf, set once for the run: compaction (before a call passes session.compactAt of contextWindow, and after an overflow) and background review. It is priced through budget.prices like any model, and the usage ledger keeps each call's purpose (main, compaction, review); an agent's spend is kept by purpose too (coordinator.get(id).spentByPurpose).

Background review (config "review": { everyTurns, maxSteps, subAgents }) forks a leaf reviewer from an agent's session after every everyTurns productive turns; it may propose one note, which is quarantined: it changes nothing. Root agents only, unless subAgents. The count of turns is saved, so a resumed run reviews where it would have. troupe notes lists the proposals; troupe notes promote <id> makes the root of every run started afterwards read the note in its first input (newest first, whole notes, up to notes.maxChars: 4,000 characters; option notes: false reads none); troupe notes reject <id> --reason keeps it out. From a program: sqliteNotes(path) or postgresNotes(store).`,
  keys: ['profiles', 'auxiliaryModel', 'budget', 'review', 'notes'],
  errors: ['PROFILE_UNKNOWN', 'NOTE_NOT_FOUND', 'NOTE_ALREADY_DECIDED'],
  events: [
    ['review.note', 'a background review proposed a note: { id, title, content } (troupe notes promote <id> promotes it)'],
    ['budget.tripped', 'the budget (all purposes together) reached the reserve line or the limit'],
  ],
};
