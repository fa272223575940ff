/**
 * What `troupe <command> --help` prints after the flags: the per-command usage detail that the
 * README leaves out (it lists the commands by name). Plain text, wrapped at 100
 * columns. Keyed by command name (spec.ts); a command without an entry prints its flags only.
 * Also the reference topics of `troupe help <topic>` (HELP_TOPICS; reference.ts prints them).
 * @module
 */

/**
 * The reference the README links to instead of holding it: `troupe help <topic>` prints each,
 * generated from the code it describes (reference.ts). Here, in the module every command loads,
 * only their names and what each holds.
 */
export const HELP_TOPICS = {
  options: 'createCoordinator options: their defaults and meanings',
  config: 'the configuration file: every key and what it means',
  'exit-codes': 'the exit codes of the troupe command, with the error codes behind each',
  errors: 'every error code: whether it is retryable, and what it means',
  measurements: 'benchmarks, PostgreSQL throughput and failover times, and how to reproduce them',
  providers: 'retries, silent streams, the circuit breaker and the key quota: settings, events, outcomes',
  profiles: 'profiles, the auxiliary model, background review and its notes (troupe notes)',
} as const;

export type HelpTopic = keyof typeof HELP_TOPICS;

const HELP = `Topics:
${Object.entries(HELP_TOPICS)
  .map(([topic, what]) => `  ${topic.padEnd(14)}${what}`)
  .join('\n')}

A command's name prints its --help: troupe help run is troupe run --help.`;

const MODEL = `A run needs a model: --model (and --base-url for anything but OpenAI), or "model" /
"baseURL" in the config file; without one it exits 2. --budget needs a price: troupe knows
OpenAI's list prices; for any other model (every local one) give --price in,out (USD per 1M
tokens) or config budget.prices, or the run is refused rather than counting $0.

The database defaults to .troupe/troupe.db. What the run was started with (never its API key)
is saved there, so troupe resume needs no flags; flags given to resume override them.`;

const DEMO_ONLY = `The demo needs no key and no network: a lead splits a review among a small team, and a fake
OpenAI-compatible server on 127.0.0.1 answers the real openai client from a script (no money is
spent). It writes .troupe/demo.db; troupe status, tree, ui and resume read it while no
.troupe/troupe.db exists (else name it: --db .troupe/demo.db).

--kill-after <turns> kills the process with SIGKILL once the team has taken that many turns, as
a crash would (a line on stderr says so first): troupe resume then carries on from what was
committed.`;

const VIEW = `On a terminal the view is redrawn in place, each line cut to the terminal's width: the budget
bar, the tree, and a line per agent (its tool call, "rate limited (429), retrying in 8 s
(2/5)", a nudge, why it failed or stopped, what it said), then the final frame once, why the
budget tripped and the report (or, when the root wrote none, its children's).`;

const INTERACTIVE = `With --interactive a prompt line stays below the frame ("lead waits for you ›" when the root
waits on you) and what you type goes to the root; its replies are printed whole above the frame.
Ctrl-D ends your input: the run goes on (troupe send reaches the root from another shell).`;

const OUTPUT = `Piped: one line per event. --json: every event as a JSON line, run.started to run.finished.
Control characters from the model are shown escaped, never sent to your terminal.

Ctrl-C (or SIGTERM) saves every agent, exits 130 and prints the resume command; a second
Ctrl-C exits at once. Resuming a run whose root failed does not replay it: troupe send
<root> "…" revives it, then troupe resume.

--inspect[=port] serves the Stately inspector on http://127.0.0.1:<port>/?token=<token> (the
token is printed on stderr; the page embeds stately.ai, so the browser needs internet; from
another machine use ssh -L). Context is sanitised: ids, states, counters, no text or secrets.
A parked agent has no actor: agent:<id> shows stopped in its parked state, and a new actor of
that name appears when the agent wakes.
Like --ui, it keeps serving after the run until Ctrl-C. A busy port exits 2.

--otel (or config "otel": true, kept on resume) exports spans and metrics over OTLP/HTTP to
OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318; other OTEL_* variables honoured),
never message content. It needs the optional packages @opentelemetry/sdk-trace-base@2,
sdk-metrics@2, resources@2, exporter-trace-otlp-http@0.223 and exporter-metrics-otlp-http@0.223
(troupe names them when missing, exit 2). With no collector answering, one line says so and the
spans are dropped; at exit a collector gets at most 3 s to take what is buffered.

Logs: .troupe/troupe.log (JSON lines; -v also prints them). The log, the database and its lock
are 0600. The API key's value is replaced by [redacted] in everything troupe writes; prefer
OPENAI_API_KEY or the config file to --api-key, which ps shows.`;

const RUN = [MODEL, `${VIEW} --stream shows the text of each answer as it is written.\n${INTERACTIVE}`, OUTPUT].join('\n\n');
const DEMO = [DEMO_ONLY, VIEW, OUTPUT].join('\n\n');

const SERVE = `troupe serve stays up until SIGINT / SIGTERM. It builds the model as troupe run does, then:

- a main run, optionally: "troupe serve <task>" starts an interactive run with root "lead";
  --resume takes back the latest run no trigger started. It stays hosted when its root
  finishes; troupe send / stop from another shell reach it; lines typed go to its root.
- proactive triggers (config "proactive": { enabled?, triggers: [...] }). Each trigger takes
  snake_case or camelCase keys: name (≤ 64 characters), trigger_type / type (file_change,
  disk_threshold, load_threshold, schedule), prompt_template (\${trigger_name},
  \${trigger_type}, \${timestamp}, \${path}, \${value}), cooldown_seconds (default 300),
  requires_confirmation, agent, and by type watch_path + watch_patterns (non-recursive),
  disk_path + disk_threshold_pct, load_threshold_per_core, or one of interval_seconds and
  cron (+ timezone). Thresholds are polled every 15 s. Interval schedules tick at the
  multiples of interval_seconds; a schedule's tick fires once however many serve processes
  share the database.
  A fire goes to the run proactive-<name> (created by the first fire, messaged by later ones,
  resumed after a restart), or with "agent" to that agent of the main run (AGENT_NOT_FOUND if
  none). requires_confirmation asks on the terminal (y approves that trigger for 30 minutes);
  without a terminal such fires are denied. Every run uses the config's model, budget (per
  run), limits and rate limit.
- a watchdog (config "watchdog": { intervalMs: 30000, failureThreshold: 3 }): the database is
  readable; GET <baseURL>/models answers below 500 within 5 s; every hosted run accepts work
  and no queue is stuck. Failures are logged at warn, at error after failureThreshold in a row.

It prints "ready", then a line per trigger fired, routed, dropped by its cooldown, denied or
failed, per health change, and the hosted runs' events prefixed [main] or [proactive-<name>]
(--json: serve.ready, proactive.*, watchdog.health_check, agent.*, serve.stopped).
A bad trigger or watchdog setting is a configuration error naming the field, exit 2.

On SIGINT / SIGTERM it stops the triggers, lets a fire in progress finish, shuts every run down
(statuses saved) and exits 0; a second signal exits at once. --run proactive-<name> reaches a
proactive run from status, tree, send, stop and resume.

With --db postgres://… serve is also a worker of that database (it hosts the runs it claims, as
troupe worker does) and runs the same triggers and watchdog:
- it hosts its main run itself until it stops, parked or not. With --resume, if another worker
  took the run over while serve was down, serve prints which one (serve.main_elsewhere), starts
  anyway and takes the run as soon as that worker lets it go; meanwhile lines typed, fires and
  troupe send reach the run through its inbox. If serve dies, any worker resumes the run once
  its lease runs out.
- a fire becomes rows: run proactive-<name> is submitted for whichever worker claims it (its
  settings, never the key, saved with it); a fire for an existing run or an agent of the main
  run is posted to that run's inbox, so it arrives wherever the run is hosted, also after its
  host died ("message to … posted (inbox request N)").
- the watchdog checks the database, serve's model endpoint, and the runs this process hosts.
Triggers fire in every serve process that has them: give each trigger to one serve. On SIGINT /
SIGTERM its runs are released to the other workers.`;

const UI = `Serves a local page of a run, live or finished, on 127.0.0.1 until Ctrl-C (--port, default 7070;
0 picks a free one). --ui[=port] on demo, run, resume and serve does the same beside the run.
The URL, http://127.0.0.1:<port>/?token=<token>, is printed on stderr: the token is random per
process (set TROUPE_UI_TOKEN, 16+ letters, digits, _ or -, to keep one across restarts) and
required by the page, its API and its event stream; other hosts and origins are refused. The
page ships with troupe and needs no internet.

- Team: the agent tree with status, turns, spend, last tool and what each waiting agent waits
  on; the budget (spent, reserve line, limit, flags); a select for the database's runs.
- Timeline: a lane per agent with status spans, model calls, retries, compactions, messages,
  notices and errors; budget trips and deadlocks across lanes. Zoom with + / - / fit or
  Ctrl + wheel, drag to pan, click a lane to open its agent.
- An agent: its transcript, spend by purpose, its state on the lifecycle, children, mailbox.
- Actions on a live run: send a message, stop an agent, pause and resume the budget, with the
  same rules as troupe send / stop (a refusal shows its code). With no process driving the
  run they are refused (RUN_NOT_LIVE).

The database is opened read-only; a file that is not troupe's, a newer schema or an unknown
--run stops it with a one-line error.`;

const SEND = `A live run gets the message through the database's inbox ("delivered to …" once it is in the
agent's session, "queued for …" while it waits in the mailbox); otherwise it waits for troupe
resume. Refusals have their own exit codes: 7 too large, 8 nobody will read it, 9 mailbox full,
10 the parent has limits.maxChildren active children.`;

const STATUS = `Says whether a process hosts the run now ("no process hosts it: its agents stand still until
troupe resume"), and with a PostgreSQL --db which worker does.

status, tree and ui never write: they open the database read-only and never migrate it, so on an
empty PostgreSQL schema they say there is no troupe run there (RUN_NOT_FOUND, exit 4, as a missing
file does) and leave it empty.`;

const WORKER = `Hosts runs of a shared PostgreSQL database until Ctrl-C, which releases them to the other
workers. Point it at the server, not a transaction-mode PgBouncer (its commits would then go as
plain statements, slower, after one warning in the log).

A run carries the settings it was submitted with (model, base URL, budget, limits; never an API
key): this worker's config file and environment are defaults, the run's settings override them,
and --model / --base-url override both. API keys come only from each worker, so whoever can
write the database is trusted to choose where a worker sends its key.

It prints a line each time it hosts a run ("hosting   run <id> (lease epoch 3)") and lets one
go: done, parked … until its next timer or a message, released (another worker takes it), lost
(another worker hosts it now) or failed (another worker resumes it from what was committed).`;

const REPLAY = `Every model answer (with its usage), every tool result and every input from outside (messages,
stops, budget pauses and resumes, execution and delegation ends, approval answers) is recorded
with the commit it belongs to. troupe replay re-runs the run offline, in memory, through this
troupe and the run's saved settings: the recorded answers stand in for the models (the
agents', a profile's, the auxiliary one; each priced as it was), the recorded results for the
tools, inputs arrive where they did, ids and the clock follow the recording. No model is called
and nothing is written.

MCP servers are not started. Their names and overrides come from the config file again (--config;
they are not saved with a run, as for resume), and each offers the tools the recording's requests
carried from a server of that name — name, description, schema and the server's risk hints — each
call answered with its recorded result or failure. What the config now changes shows: a server
left out or a tool name now taken (offered as <server>__<tool>) is a different tool list, an
override's risk a different approval. A server whose tools changed during the run (list_changed)
is offered with every tool it listed from the start: a divergence, not the change.

It prints "identical", or the first place the code now asks something the recording did not:
the agent, its turn, the kind (request, tool call or notice) and the difference, recorded and
now. Exit 0 when identical, 1 when it diverged: replay yesterday's runs after an upgrade or a
settings change as a regression check. From a program or vitest: replayRun(store, runId,
{ coordinator: { tools, … } }) from troupe/testing, which also takes liveFrom: { agent, turn,
model } to continue against a live model from that turn on.

--live-from <agent>:<turn> does that here: the recording is checked up to that agent's turn (its
name or id), then the live model answers — --model, --base-url and --api-key over the
environment over the run's saved settings (a demo run needs --model) — and MCP servers start.
It prints "identical up to …, then live" (exit 0), or where it diverged before. Nothing is
written: what the live model said is not kept.

The replay applies answers and inputs in the order the owner applied them, down to the commit
window each came in (answers of one timer phase, a stop that came before the commit before it
was done), and a burst of answers in its recorded order. Answers a millisecond apart from
separate timers once came out in another order now and then (one 1,000-call run in twelve at
1 ms a call; none of 60 since): that would show as a divergence the code did not cause. A run
that was shut down and resumed replays as one run: a call cut short is asked again, a retry's backoff is waited out across the
restart (the resumed run waited for the rest of it too).`;

const FORK = `troupe fork <run> --at <agent>:<turn> makes a new run from a committed point of <run>: every
agent, session, message and its delivery, notice claim, usage entry, delegation, execution and
approval as they were right after that agent's turn committed (turn 0: right after it was
spawned; troupe tree shows turns). Everything other agents committed with that turn is in it
too. The original is only read. It prints the new run's id; troupe resume --run <id> continues
it like a run resumed after a crash, with the saved settings or the flags you give (another
model, another prompt). troupe ui shows a run's forks and where a fork came from.

Ids are new in the fork (agents, messages, executions), renamed everywhere in its history. Runs
recorded by a troupe before forks, or in memory, have no commit journal to fork from
(FORK_POINT_NOT_FOUND, exit 4). A run in flight can be forked from what it has committed; on a
SQLite file the fork waits for no host but needs the file: it is refused (exit 3) while a
process hosts a run of it. On PostgreSQL the fork stays parked until troupe resume hosts it.`;

const NOTES = `Background review (config "review") proposes notes: lessons from a run, quarantined (they change
nothing). troupe notes lists every note of the database, quarantined first: its id, state, title,
the agent whose work was reviewed, its run and when. promote <note> decides it once: the root of
every run started afterwards reads the promoted notes in its first input (newest first, whole
notes, up to config notes.maxChars: 4000 characters); a run already started is not changed.
reject <note> --reason keeps it out, with why. A second decision is NOTE_ALREADY_DECIDED (exit 2),
an unknown id NOTE_NOT_FOUND (exit 4). It works while a run is live, from any process or machine.
From a program: sqliteNotes(path) or postgresNotes(store): list(), promote(id), reject(id).`;

export const COMMAND_HELP: Readonly<Record<string, string>> = {
  notes: NOTES,
  replay: REPLAY,
  run: RUN,
  resume: RUN,
  demo: DEMO,
  serve: SERVE,
  ui: UI,
  send: SEND,
  fork: FORK,
  status: STATUS,
  worker: WORKER,
  help: HELP,
};
