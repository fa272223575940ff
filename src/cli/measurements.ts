/**
 * What `troupe help measurements` prints: the figures measured on this code, with the command that
 * measures each (`npm run bench`, test/bench; `npm run bench:against`; `npm run test:pg-failover`,
 * test/integration/pgFailover.test.ts). Unlike the other reference topics these are not generated:
 * they are one machine's runs, written down after them. The README quotes a few headline figures.
 * @module
 */

/** A section: a paragraph, then optional rows (what was measured, the figure). */
export interface MeasurementSection {
  readonly title: string;
  readonly text: string;
  readonly rows?: readonly (readonly [string, string])[];
  readonly after?: string;
}

export const MEASUREMENTS: readonly MeasurementSection[] = [
  {
    title: 'Benchmarks',
    text:
      "npm run bench: 2 cores, the compiled package, one bench file at a time. This VM's speed varies up to 4× between days and ~1.6× between " +
      'processes, so compare only against a baseline of the same run.',
    rows: [
      [
        'a turn in memory',
        'one agent, instant model, steady state after 100 runs of 1,000 turns, 13.4 µs median and 12.3 µs min: 4.8 bare XState ' +
          'actor.sends of the agent machine (2.76 µs each in that run); the first 25 runs (JIT warming up) 17.1 µs',
      ],
      [
        'a durable turn',
        'SQLite FULL, after a warm-up: 1.26–1.35× bare better-sqlite3 writes of the same rows in the same transactions (two runs; ' +
          'per iteration 1.20–1.36×); cold, before the warm-up, 1.70–2.05×',
      ],
      ['fan-out', '1,000 children × 5 turns, durable: 516 ms median (455 ms min), 1.66× the same team in memory'],
      ['resume', '10,000 parked agents in a fresh process: 0.16–0.17 s including opening and checking the file, 1.4 KB of heap each'],
      [
        'a team of 10,000',
        'a root and 10,000 children × 10 tool turns, model answering in 0.5–2 s (scale.bench.ts, one run each): memory 96.6 % of the ' +
          'ideal, event-loop delay p99 39 ms; SQLite FULL 94.9 %, p99 90 ms; FULL with commitThread 95.7 %, p99 36 ms (main thread ' +
          '0.78× busy per turn, process CPU 1.11×); NORMAL 95.6 %, p99 61 ms, with commitThread 95.5 %, 36 ms. Nothing set ' +
          "(commitThread 'auto': the commits moved to the thread 10-16 s in), on a slower machine, paired with commitThread " +
          'false: NORMAL 93.0 % and p99 55 ms against 86.2 % and 251 ms; FULL 90.9 % and 72 ms against 88.9 % and 206 ms. Later, nothing ' +
          "set (openaiModel thread 'auto': the model calls moved to the model thread 13-14 s in): memory 94.2 %, p99 44 ms; NORMAL " +
          '90.5 %, 43 ms; FULL 90.9 %, 46 ms, against 92.9-94.4 % and 64-109 ms, 89.3 % and 83 ms, 88.1-90.2 % and 75-90 ms with ' +
          'the calls on the main thread (CPU per turn 1.03-1.12×). On a faster machine (2026-12-07), nothing set: memory 98.3 %, ' +
          'p99 22 ms; NORMAL 97.6 %, 28 ms; FULL 97.5 %, 27 ms; FULL ÷ memory 1.01; CPU per turn, all threads, 594 / 799 / 877 µs. ' +
          'Live heap per agent, sessions aside (memory, nothing set, a slower machine, 2026-12-07): 27.1 KB, of which the main ' +
          "thread's 18.8 and the model thread's 8.3 (its whole heap: code, pool, calls in flight, last requests); at K = 1,000 " +
          "with the calls in the thread 43.8 (2.3 + 41.5: the worker's own base and an in-flight call's ~18 KB weigh more per " +
          "agent), with them on the main thread 52.1. CPU per turn against the ideal's per call, same run (memory, nothing set, " +
          '2026-12-07): 1,075 against 220 µs (4.9×; 933 µs in an earlier run); at K = 1,000, 1,287 against 332 µs (3.9×). The ideal sends one line ' +
          "per call where troupe's requests carry the conversation; node:http alone is 73 % of a 300 µs turn at K = 10,000. " +
          'By thread (Linux /proc, same run, another machine, 2026-12-07): K = 10,000, nothing set, 1,045 µs per turn = main thread 330, ' +
          "model thread 467 (93 % of the calls; the rest were on the main thread), V8's helper threads (GC, compiler) 249, against the " +
          "ideal's 169 per call, of which its main thread 143; K = 3,000, model thread on: 1,078 = 289 + 526 + 263 against 237, main 199. " +
          'A third machine (2026-12-07), memory, nothing set: 97.3 % of the ideal, p99 27 ms (21 once the spawns were done), 805 µs ' +
          "per turn = 243 + 374 + 188 against the ideal's 164, main 146",
      ],
      [
        'disk per SQLite turn',
        'bytes sent to the disk (Linux /proc/self/io): the team of 10,000, nothing set, 72.4 KB per turn on NORMAL and 71.6 on FULL ' +
          '(97.7 and 99.2 before schema 13, when the by-type index held every event and started tool calls had an index of their ' +
          'own); 120 agents × 10 tool turns, NORMAL, one commit per ~0.6 turn: 9.6 pages per commit against 13.9, the transaction ' +
          '0.90–0.94× (three alternating runs)',
      ],
      [
        'a model call',
        'openaiModel.complete against the fake server (modelCall.bench.ts; a slower machine, 2026-12-07), beside plain node:http ' +
          "with a pool like troupe's (every connection kept), two runs: 500 and 1,000 calls at once in rounds, 2.1-2.8× and " +
          "2.2-2.6× node:http's CPU (337-427 µs), 92-94 KB allocated per call (3.9-4.1×); steady, 1,000 agents × 10 calls in " +
          'turn answered one at a time (how a team calls), 649-698 against 359-367 µs, 1.83-1.90×: answers one at a time cost ' +
          'node:http itself about twice its rounds ' +
          "figure. The rest is the openai client's own work per call. Earlier figures (1.62-1.89×) were against a node:http " +
          "that kept Node's default 256 idle connections and reconnected the rest each round",
      ],
    ],
    after:
      'npm run bench:against -- <git ref> runs the same teams on this checkout and on an older commit (built in a worktree) in ' +
      'alternating fresh processes. Against 98f4912, the code before the commit pipeline, medians of 3 processes each: an in-memory ' +
      'turn 13.2 vs 31.0 µs (0.43×), a durable turn 516 vs 679 µs (0.76×; in the first run 665 vs 838 µs), a durable fan-out 580 vs ' +
      '5,122 ms (0.11×).',
  },
  {
    title: 'Live stream',
    text:
      'What recording the live stream costs (its rows ride the commits a run makes anyway), npm run bench:against -- e146a25 (the ' +
      'commit before it), medians of 3 alternating processes each, one run on 2 cores:',
    rows: [
      ['durable turn', 'SQLite FULL: 548.8 vs 518.0 µs (1.06×)'],
      ['durable fan-out', '1,000 children × 5 turns: 758.7 vs 750.6 ms (1.01×)'],
      ['in-memory turn', 'not recorded in memory unless asked: 19.7 vs 19.9 µs (0.99×)'],
      ['resume of that finished run', '117.3 vs 99.9 ms (1.17×): its stream rows are checked at open (columns, not their JSON)'],
    ],
    after:
      'From a piece leaving the model to a client of /api/stream (SQLite FULL, flushMs 100, the server reading every 100 ms), 200 ' +
      'pieces: median 63 ms, p90 104 ms, max 113 ms.',
  },
  {
    title: 'PostgreSQL',
    text:
      'npm run bench, one run: PostgreSQL 15 on loopback, 2 cores, at load 15–17 (five other test suites beside it, so absolute ' +
      'figures are low; ratios are to floors of the same run). A commit is one round trip: the lease fence and all its rows in one ' +
      'query, one transaction. One agent, 300 no-op tool turns:',
    rows: [
      [
        'per turn',
        '2 round trips (one per commit; 14 before), 12 statements (18 before), ~2.6 KB of WAL; schema 18 (the by-type index holds only ' +
          'rare types) wrote 0.87× the WAL of schema 17 per turn in an A/B on a quiet server',
      ],
      [
        'commit',
        'p50 1.50× and p99 1.30× a one-row durable write (2.43× and 2.30× before), which took 7.8 / 21.7 ms in that run. On a quiet ' +
          'server (2026-12-07), its statements prepared once per connection: p50 0.78 and 0.88 ms against 1.68 and 1.31 ms sent as ' +
          'text (the bench, builds alternating), 0.84 against 1.22 ms in three alternating runs of 1,100 commits of one agent; p99 ' +
          '4.1-6.0 ms either way (the flush). Turns/s of 1-3 workers unchanged (the workers, not the server, were busy). Where the ' +
          "tail waits (a faster machine, 2026-12-07, 1,950 commits of one agent: p50 0.72-0.88 ms, p99 3.4-4.5 ms): the server's " +
          'wait events, sampled every ~0.3 ms, were the WAL flush (WALSync) in 83 % of the samples inside commits over 2.5 ms and ' +
          '43 % inside commits under 1 ms; auto_explain found one statement over 1 ms in the run. Bare transactions with ~2 KB of ' +
          'WAL: p99 0.7-1.4 ms, 2.3 ms while another session dirtied pages. So the tail waits on the disk flush, which other dirty ' +
          'pages slow (likely, not proven; the server runs on its defaults, untuned). Another machine (2026-12-07), the bench at ' +
          '1,000 turns a run (~1,950 commits past the first 50, where 300 turns made the p99 the sixth slowest commit): p50 0.67 ms, ' +
          'p99 1.44-2.23 ms in its four runs; 16 runs of 1,000 turns in all, p99 1.44-4.62 ms, median 2.8, one over 4. Of the ' +
          "commits above a run's p99, a fifth to two-thirds found the client's event loop busy for half their time or more (GC, " +
          "building and writing the batch's own text); the rest waited on the socket",
      ],
      ['1 worker process', 'each hosting at most 4 runs of 16 turns: instant model 39 turns/s; 200 ms model latency 27 turns/s'],
      ['2 worker processes', 'instant model 49 turns/s (1.25×); 200 ms model 29 turns/s (1.10×)'],
      ['3 worker processes', 'instant model 32 turns/s (0.82×: the workers, not the server, want the 2 cores); 200 ms model 39 turns/s (1.49×)'],
      [
        'one server',
        'a one-off script (not in npm run bench), turn-sized commits from 8 runs at once: 343 commits/s, ~170 turns/s (1 run: 85; 32 runs: 269), 1.1 KB of WAL each',
      ],
    ],
    after:
      'Capacity on paper: a run touches only its own rows (its lease fences them), so runs spread over several databases by run: ' +
      'each database with its own workers, a run placed by a hash of its id or key, its commands pointed at its database with --db. ' +
      "A server's ceiling is its WAL flushes and CPU: ~1.1 KB and ~6 statements per commit, 2 commits per tool turn; the server " +
      "groups the flushes of concurrent commits. Endpoint quotas are a database's: split a provider's limit between databases. After " +
      'kill -9 of the worker hosting a run of 100 agents, another worker made its next model call 1.22 s later (median of 3, max ' +
      '1.29 s) with a lease TTL of 1 s: failover is the TTL plus a claim and a resume.',
  },
  {
    title: 'Failover under faults',
    text:
      "npm run test:pg-failover: 4 worker processes on 2 cores, lease TTL 600 ms, claim poll 200 ms; from the fault on the run's " +
      "host to the run's next sub-agent model call on another worker, median / p90 of the last run.",
    rows: [
      ['SIGKILL', '61 trials: 645 / 774 ms'],
      ['SIGSTOP', 'SIGCONT after the takeover; 48 trials: 630 / 780 ms'],
      ['network partition', 'healed after the takeover; 53 trials: 625 / 757 ms'],
      ['connection resets', 'every connection; 47 + 19 trials: no failover, the next call 12–25 / 143–502 ms later'],
      ['database restart', 'pg_ctl stop -m immediate, then start; 21 trials: no failover, 11 / 30 ms'],
    ],
    after:
      'That is the TTL plus at most one claim interval and a resume. Over those 240 trials: nothing acknowledged lost, no message ' +
      "queued or delivered twice, each child's end told once, every request sent from outside answered, and none of 13,081 model " +
      'and tool calls allowed on a host after another had claimed its run. The suite counts apart a call allowed before a takeover ' +
      'and made after it by a host stopped between the check and the call (at most one per SIGSTOP, 0 in that run; anywhere else ' +
      'such a call counts as made without a lease); one such call in 200 trials failed an earlier CI run that counted it as a call ' +
      'without a lease. With a 3 ms busy-wait put between the check and the call (SPIN_MS=3 in the worker of the suite), 27–30 of ' +
      '100 stops caught a call there.',
  },
];
