import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { EventBus, type AuditEvent } from '../../../src/autonomy/eventBus.js';
import { Watchdog, type HealthCheck, type WatchdogOptions } from '../../../src/autonomy/watchdog.js';
import { ConfigError } from '../../../src/errors.js';

interface LogLine {
  level: number;
  msg: string;
  subsystem?: string;
  consecutiveFailures?: number;
  error?: string;
}

const LEVEL = { info: 30, warn: 40, error: 50 } as const;

/** Lets every pending promise chain run (setImmediate fires after the microtask queue drains). */
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

async function advance(clock: SimulatedClock, ms: number): Promise<void> {
  clock.increment(ms);
  await flush();
}

/** A SimulatedClock that also knows which timers are still armed. */
class CountingClock extends SimulatedClock {
  readonly live = new Set<number>();

  override setTimeout(fn: (...args: unknown[]) => void, ms: number): number {
    const id: number = super.setTimeout(() => {
      this.live.delete(id);
      fn();
    }, ms);
    this.live.add(id);
    return id;
  }

  override clearTimeout(id: number): void {
    this.live.delete(id);
    super.clearTimeout(id);
  }
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function setup(options: WatchdogOptions = {}) {
  const clock = new CountingClock();
  const logs: LogLine[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(JSON.parse(line) as LogLine);
      callback();
    },
  });
  const logger = pino({ level: 'trace' }, stream);
  const bus = new EventBus();
  const events: AuditEvent[] = [];
  bus.on((event) => events.push(event));
  const watchdog = new Watchdog({ clock, logger, bus, intervalMs: 1_000, ...options });
  const levels = () => logs.map((line) => line.level);
  return { clock, logs, levels, bus, events, watchdog };
}

/** A check that counts its calls and returns the next scripted result (the last one repeats). */
function scripted(...results: Array<boolean | Error>) {
  const state = { calls: 0 };
  const check: HealthCheck = () => {
    const result = results[Math.min(state.calls, results.length - 1)];
    state.calls += 1;
    if (result instanceof Error) throw result;
    return result ?? true;
  };
  return Object.assign(state, { check });
}

describe('Watchdog polling', () => {
  it('runs the first round after intervalMs and then every intervalMs, not before', async () => {
    const { clock, watchdog } = setup();
    const probe = scripted(true);
    watchdog.register('db', probe.check);
    await advance(clock, 5_000);
    expect(probe.calls).toBe(0); // nothing before start()

    watchdog.start(); // at t=5000
    await advance(clock, 999);
    expect(probe.calls).toBe(0);
    await advance(clock, 1);
    expect(probe.calls).toBe(1);
    expect(watchdog.getReport().db?.lastChecked).toBe(6_000);
    await advance(clock, 999);
    expect(probe.calls).toBe(1);
    await advance(clock, 1);
    expect(probe.calls).toBe(2);
    expect(watchdog.getReport().db?.lastChecked).toBe(7_000);
  });

  it('defaults to a 60 s interval', async () => {
    const clock = new SimulatedClock();
    const watchdog = new Watchdog({ clock });
    const probe = scripted(true);
    watchdog.register('db', probe.check);
    watchdog.start();
    await advance(clock, 59_999);
    expect(probe.calls).toBe(0);
    await advance(clock, 1);
    expect(probe.calls).toBe(1);
    watchdog.stop();
  });

  it('never overlaps rounds: a slow check delays the next round until it settles', async () => {
    const { clock, watchdog } = setup({ checkTimeoutMs: 100_000 });
    let calls = 0;
    let pending = deferred<boolean>();
    watchdog.register('slow', () => {
      calls += 1;
      return pending.promise;
    });
    watchdog.start();
    await advance(clock, 1_000);
    expect(calls).toBe(1);
    await advance(clock, 5_000); // five intervals pass while the check is still running
    expect(calls).toBe(1);

    pending.resolve(true); // round 1 completes at t=6000; the next round is armed from here
    pending = deferred<boolean>();
    await flush();
    await advance(clock, 999);
    expect(calls).toBe(1);
    await advance(clock, 1);
    expect(calls).toBe(2);
    expect(watchdog.getReport().slow).toMatchObject({ healthy: true, lastChecked: 6_000 });
    watchdog.stop();
  });

  it('stop() stops polling', async () => {
    const { clock, watchdog, events } = setup();
    const probe = scripted(true);
    watchdog.register('db', probe.check);
    watchdog.start();
    await advance(clock, 1_000);
    expect(probe.calls).toBe(1);
    expect(clock.live.size).toBe(1); // the next round's timer
    watchdog.stop();
    expect(watchdog.running).toBe(false);
    expect(clock.live.size).toBe(0); // stop() cleared it
    for (let i = 0; i < 10; i++) await advance(clock, 1_000);
    expect(probe.calls).toBe(1);
    expect(events).toHaveLength(1);
  });

  it('a round in progress when stop() is called still completes and reports, and no new round is armed', async () => {
    const { clock, watchdog, events } = setup();
    let calls = 0;
    const pending = deferred<boolean>();
    watchdog.register('slow', () => {
      calls += 1;
      return pending.promise;
    });
    watchdog.start();
    await advance(clock, 1_000);
    expect(calls).toBe(1);
    watchdog.stop();
    pending.reject(new Error('late failure'));
    await flush();
    expect(events).toHaveLength(1);
    expect(watchdog.getReport().slow).toMatchObject({ healthy: false, lastError: 'late failure' });
    expect(clock.live.size).toBe(0); // neither a polling timer nor the check's timeout timer is left
    for (let i = 0; i < 5; i++) await advance(clock, 1_000);
    expect(calls).toBe(1);
  });

  it('start() and stop() are idempotent', async () => {
    const { clock, watchdog } = setup();
    const probe = scripted(true);
    watchdog.register('db', probe.check);
    watchdog.stop(); // stop before start is a no-op
    watchdog.start();
    watchdog.start();
    expect(watchdog.running).toBe(true);
    await advance(clock, 1_000);
    expect(probe.calls).toBe(1); // one timer, not two
    await advance(clock, 1_000);
    expect(probe.calls).toBe(2);
    watchdog.stop();
    watchdog.stop();
    await advance(clock, 5_000);
    expect(probe.calls).toBe(2);
    watchdog.start(); // restartable: the first round is again intervalMs away
    await advance(clock, 999);
    expect(probe.calls).toBe(2);
    await advance(clock, 1);
    expect(probe.calls).toBe(3);
    watchdog.stop();
  });

  it('stop() then start() during a round in progress arms exactly one timer, after the round', async () => {
    const { clock, watchdog } = setup({ checkTimeoutMs: 100_000 });
    let calls = 0;
    let pending = deferred<boolean>();
    watchdog.register('slow', () => {
      calls += 1;
      return pending.promise;
    });
    watchdog.start();
    await advance(clock, 1_000);
    watchdog.stop();
    watchdog.start();
    await advance(clock, 3_000);
    expect(calls).toBe(1); // still no overlap

    pending.resolve(true);
    pending = deferred<boolean>();
    await flush();
    await advance(clock, 1_000);
    expect(calls).toBe(2);
    pending.resolve(true);
    await flush();
    await advance(clock, 1_000);
    expect(calls).toBe(3); // one timer per round, not two
    watchdog.stop();
  });
});

describe('Watchdog check outcomes', () => {
  it('a check returning true is healthy', async () => {
    const { clock, watchdog } = setup();
    clock.set(1_234);
    watchdog.register('db', () => true);
    watchdog.register('cache', () => Promise.resolve(true));
    const report = await watchdog.checkNow();
    expect(report).toEqual({
      db: { name: 'db', healthy: true, consecutiveFailures: 0, lastChecked: 1_234, lastError: null },
      cache: { name: 'cache', healthy: true, consecutiveFailures: 0, lastChecked: 1_234, lastError: null },
    });
  });

  it('false, a throw, a rejection and a non-Error throw are unhealthy with the right lastError', async () => {
    const { clock, watchdog } = setup();
    clock.set(500);
    watchdog.register('false', () => false);
    watchdog.register('asyncFalse', () => Promise.resolve(false));
    watchdog.register('throws', () => {
      throw new Error('boom');
    });
    watchdog.register('rejects', () => Promise.reject(new Error('nope')));
    watchdog.register('throwsString', () => {
      throw 'plain string';
    });
    const report = await watchdog.checkNow();
    const summary = Object.fromEntries(Object.values(report).map((h) => [h.name, [h.healthy, h.consecutiveFailures, h.lastError, h.lastChecked]]));
    expect(summary).toEqual({
      false: [false, 1, 'returned false', 500],
      asyncFalse: [false, 1, 'returned false', 500],
      throws: [false, 1, 'boom', 500],
      rejects: [false, 1, 'nope', 500],
      throwsString: [false, 1, 'plain string', 500],
    });
  });

  it('a check that does not settle within checkTimeoutMs fails with "timed out" (on the injected clock)', async () => {
    const { clock, watchdog, events } = setup({ checkTimeoutMs: 250 });
    const pending = deferred<boolean>();
    watchdog.register('hung', () => pending.promise);
    watchdog.register('quick', () => true);
    let report: Record<string, unknown> | undefined;
    void watchdog.checkNow().then((r) => (report = r));
    await flush();
    expect(report).toBeUndefined();
    expect(watchdog.getReport().quick?.lastChecked).toBe(0); // the others settle on their own
    await advance(clock, 249);
    expect(report).toBeUndefined();
    await advance(clock, 1);
    expect(report).toMatchObject({
      hung: { healthy: false, consecutiveFailures: 1, lastError: 'timed out', lastChecked: 250 },
      quick: { healthy: true },
    });

    pending.resolve(true); // settling late changes nothing
    await flush();
    expect(watchdog.getReport().hung).toMatchObject({ healthy: false, lastError: 'timed out' });
    expect(events.filter((e) => e.name === 'hung')).toHaveLength(1);
  });

  it('defaults to a 10 s check timeout', async () => {
    const clock = new SimulatedClock();
    const watchdog = new Watchdog({ clock });
    watchdog.register('hung', () => new Promise<boolean>(() => {}));
    let done = false;
    void watchdog.checkNow().then(() => (done = true));
    await advance(clock, 9_999);
    expect(done).toBe(false);
    await advance(clock, 1);
    expect(done).toBe(true);
    expect(watchdog.getReport().hung?.lastError).toBe('timed out');
  });

  it('runs the checks of a round concurrently', async () => {
    const { watchdog } = setup();
    const a = deferred<boolean>();
    const b = deferred<boolean>();
    const started: string[] = [];
    watchdog.register('a', () => (started.push('a'), a.promise));
    watchdog.register('b', () => (started.push('b'), b.promise));
    const round = watchdog.checkNow();
    await flush();
    expect(started).toEqual(['a', 'b']); // b started while a is still pending
    b.resolve(true);
    a.resolve(false);
    expect(await round).toMatchObject({ a: { healthy: false }, b: { healthy: true } });
  });

  it('counts consecutive failures and resets them on success', async () => {
    const { watchdog } = setup({ failureThreshold: 10 });
    const probe = scripted(false, new Error('down'), false, true, false, true);
    watchdog.register('db', probe.check);
    const seen: Array<[boolean, number, string | null]> = [];
    for (let i = 0; i < 6; i++) {
      const h = (await watchdog.checkNow()).db!;
      seen.push([h.healthy, h.consecutiveFailures, h.lastError]);
    }
    expect(seen).toEqual([
      [false, 1, 'returned false'],
      [false, 2, 'down'],
      [false, 3, 'returned false'],
      [true, 0, null],
      [false, 1, 'returned false'],
      [true, 0, null],
    ]);
  });
});

describe('Watchdog logging', () => {
  it('warns on failures, errors exactly once when the streak reaches the threshold, and logs recovery at info', async () => {
    const { watchdog, logs, levels } = setup(); // default threshold 3
    const probe = scripted(true, false, false, false, false, false, true, true, false, false, false);
    watchdog.register('db', probe.check);

    await watchdog.checkNow(); // healthy from the start: nothing to log
    expect(logs).toEqual([]);

    for (let i = 0; i < 5; i++) await watchdog.checkNow();
    expect(levels()).toEqual([LEVEL.warn, LEVEL.warn, LEVEL.error, LEVEL.warn, LEVEL.warn]);
    expect(logs[2]).toMatchObject({ subsystem: 'db', consecutiveFailures: 3, error: 'returned false' });

    await watchdog.checkNow(); // recovery
    await watchdog.checkNow(); // still healthy: nothing more
    expect(levels().slice(5)).toEqual([LEVEL.info]);
    expect(logs[5]).toMatchObject({ subsystem: 'db' });

    for (let i = 0; i < 3; i++) await watchdog.checkNow(); // a new streak errors again at its threshold
    expect(levels().slice(6)).toEqual([LEVEL.warn, LEVEL.warn, LEVEL.error]);
  });

  it('with failureThreshold 1 the first failure is logged at error', async () => {
    const { watchdog, levels } = setup({ failureThreshold: 1 });
    watchdog.register('db', () => false);
    await watchdog.checkNow();
    await watchdog.checkNow();
    expect(levels()).toEqual([LEVEL.error, LEVEL.warn]);
  });

  it('logs a timeout failure like any other failure', async () => {
    const { clock, watchdog, logs } = setup({ checkTimeoutMs: 10, failureThreshold: 5 });
    watchdog.register('hung', () => new Promise<boolean>(() => {}));
    const round = watchdog.checkNow();
    await advance(clock, 10);
    await round;
    expect(logs).toMatchObject([{ level: LEVEL.warn, subsystem: 'hung', error: 'timed out' }]);
  });
});

describe('Watchdog events', () => {
  it('emits one watchdog.health_check event per check per round, whatever the outcome', async () => {
    const { clock, watchdog, events } = setup();
    watchdog.register('ok', () => true);
    watchdog.register('bad', () => false);
    watchdog.register('throws', () => {
      throw new Error('boom');
    });
    watchdog.start();
    await advance(clock, 1_000);
    // Events are emitted as checks settle (a synchronous throw settles first): compare by name.
    const byName = (list: AuditEvent[]) => [...list].sort((x, y) => String(x.name).localeCompare(String(y.name)));
    expect(byName(events)).toEqual([
      { type: 'watchdog.health_check', at: 1_000, name: 'bad', healthy: false, consecutiveFailures: 1, error: 'returned false' },
      { type: 'watchdog.health_check', at: 1_000, name: 'ok', healthy: true, consecutiveFailures: 0, error: null },
      { type: 'watchdog.health_check', at: 1_000, name: 'throws', healthy: false, consecutiveFailures: 1, error: 'boom' },
    ]);
    await advance(clock, 1_000);
    expect(events).toHaveLength(6);
    expect(byName(events.slice(3)).map((e) => [e.name, e.at, e.consecutiveFailures])).toEqual([
      ['bad', 2_000, 2],
      ['ok', 2_000, 0],
      ['throws', 2_000, 2],
    ]);
    watchdog.stop();
  });

  it('works without a bus', async () => {
    const watchdog = new Watchdog({ clock: new SimulatedClock() });
    watchdog.register('db', () => false);
    expect((await watchdog.checkNow()).db?.healthy).toBe(false);
  });
});

describe('Watchdog registration', () => {
  it('a check registered while running joins the next round', async () => {
    const { clock, watchdog } = setup();
    const a = scripted(true);
    const b = scripted(false);
    watchdog.register('a', a.check);
    watchdog.start();
    await advance(clock, 1_000);
    watchdog.register('b', b.check);
    expect(watchdog.getReport().b).toEqual({ name: 'b', healthy: true, consecutiveFailures: 0, lastChecked: null, lastError: null });
    await advance(clock, 1_000);
    expect([a.calls, b.calls]).toEqual([2, 1]);
    expect(watchdog.getReport().b).toMatchObject({ healthy: false, consecutiveFailures: 1, lastChecked: 2_000 });
    watchdog.stop();
  });

  it('a check registered during a round in progress is not part of that round', async () => {
    const { watchdog } = setup();
    const pending = deferred<boolean>();
    watchdog.register('slow', () => pending.promise);
    const round = watchdog.checkNow();
    await flush();
    const late = scripted(true);
    watchdog.register('late', late.check);
    pending.resolve(true);
    const report = await round;
    expect(late.calls).toBe(0);
    expect(report.late?.lastChecked).toBeNull();
  });

  it('unregister removes the check and its health record', async () => {
    const { clock, watchdog, events } = setup();
    const a = scripted(true);
    const b = scripted(true);
    watchdog.register('a', a.check);
    watchdog.register('b', b.check);
    watchdog.start();
    await advance(clock, 1_000);
    expect(watchdog.unregister('a')).toBe(true);
    expect(watchdog.unregister('a')).toBe(false);
    expect(watchdog.unregister('never')).toBe(false);
    expect(Object.keys(watchdog.getReport())).toEqual(['b']);
    await advance(clock, 1_000);
    expect([a.calls, b.calls]).toEqual([1, 2]);
    expect(events.map((e) => e.name)).toEqual(['a', 'b', 'b']);
    watchdog.register('a', a.check); // the name is free again
    expect(watchdog.getReport().a?.lastChecked).toBeNull();
    watchdog.stop();
  });

  it('discards the result of a check unregistered (or replaced) while its round is in progress', async () => {
    const { watchdog, events, logs } = setup({ failureThreshold: 1 });
    const pending = deferred<boolean>();
    watchdog.register('x', () => pending.promise);
    watchdog.register('y', () => true);
    const round = watchdog.checkNow();
    await flush();
    expect(watchdog.unregister('x')).toBe(true);
    watchdog.register('x', () => true); // a new registration under the same name
    pending.resolve(false);
    const report = await round;
    expect(report.x).toEqual({ name: 'x', healthy: true, consecutiveFailures: 0, lastChecked: null, lastError: null });
    expect(events.map((e) => e.name)).toEqual(['y']);
    expect(logs).toEqual([]);
  });

  it('rejects duplicate and empty names and non-function checks with CONFIG_INVALID', () => {
    const { watchdog } = setup();
    watchdog.register('db', () => true);
    for (const register of [
      () => watchdog.register('db', () => false),
      () => watchdog.register('', () => true),
      () => watchdog.register('   ', () => true),
      () => watchdog.register(undefined as unknown as string, () => true),
      () => watchdog.register('fn', 'nope' as unknown as HealthCheck),
    ]) {
      expect(register).toThrow(ConfigError);
      expect(register).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    }
    expect(Object.keys(watchdog.getReport())).toEqual(['db']);
  });
});

describe('Watchdog reports', () => {
  it('checkNow runs one round immediately, without start(), and resolves with the report', async () => {
    const { clock, watchdog, events } = setup();
    const probe = scripted(false);
    watchdog.register('db', probe.check);
    clock.set(42);
    const report = await watchdog.checkNow();
    expect(probe.calls).toBe(1);
    expect(report).toEqual({
      db: { name: 'db', healthy: false, consecutiveFailures: 1, lastChecked: 42, lastError: 'returned false' },
    });
    expect(events).toHaveLength(1);
    expect(clock.live.size).toBe(0); // the check's timeout timer was cleared when it settled
    await advance(clock, 10_000);
    expect(probe.calls).toBe(1); // checkNow does not start polling
    expect(await new Watchdog({ clock }).checkNow()).toEqual({});
  });

  it('checkNow during a polling round runs after that round, never alongside it', async () => {
    const { clock, watchdog } = setup({ checkTimeoutMs: 100_000 });
    let active = 0;
    let maxActive = 0;
    const gates: Array<(ok: boolean) => void> = [];
    watchdog.register('slow', () => {
      active += 1;
      maxActive = Math.max(maxActive, active);
      return new Promise<boolean>((resolve) => gates.push((ok) => ((active -= 1), resolve(ok))));
    });
    watchdog.start();
    await advance(clock, 1_000);
    expect(gates).toHaveLength(1);
    const now = watchdog.checkNow();
    await flush();
    expect(gates).toHaveLength(1);
    gates[0]!(false);
    await flush();
    expect(gates).toHaveLength(2);
    gates[1]!(true);
    expect((await now).slow).toMatchObject({ healthy: true, consecutiveFailures: 0 });
    expect(maxActive).toBe(1);
    watchdog.stop();
  });

  it('getReport and checkNow return copies', async () => {
    const { watchdog } = setup();
    watchdog.register('db', () => false);
    const report = await watchdog.checkNow();
    report.db!.healthy = true;
    report.db!.consecutiveFailures = 99;
    delete report.db;
    const again = watchdog.getReport();
    again.db!.lastError = 'tampered';
    again.extra = { name: 'extra', healthy: true, consecutiveFailures: 0, lastChecked: null, lastError: null };
    expect(watchdog.getReport()).toEqual({
      db: { name: 'db', healthy: false, consecutiveFailures: 1, lastChecked: 0, lastError: 'returned false' },
    });
    expect(watchdog.getReport()).not.toBe(watchdog.getReport());
    expect(watchdog.getReport().db).not.toBe(watchdog.getReport().db);
  });
});

describe('Watchdog options', () => {
  it.each([
    ['intervalMs', 0],
    ['intervalMs', -1],
    ['intervalMs', 1.5],
    ['intervalMs', Number.NaN],
    ['intervalMs', Number.POSITIVE_INFINITY],
    ['intervalMs', 2 ** 31],
    ['intervalMs', '100'],
    ['failureThreshold', 0],
    ['failureThreshold', 2.5],
    ['failureThreshold', Number.NaN],
    ['failureThreshold', '3'],
    ['checkTimeoutMs', 0],
    ['checkTimeoutMs', -5],
    ['checkTimeoutMs', 0.5],
    ['checkTimeoutMs', 2 ** 31],
  ])('rejects %s = %s with CONFIG_INVALID', (option, value) => {
    const create = () => new Watchdog({ [option]: value } as WatchdogOptions);
    expect(create).toThrow(ConfigError);
    expect(create).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
  });

  it('accepts the defaults and the smallest valid values', () => {
    expect(() => new Watchdog()).not.toThrow();
    expect(() => new Watchdog({ intervalMs: 1, failureThreshold: 1, checkTimeoutMs: 1 })).not.toThrow();
    expect(() => new Watchdog({ intervalMs: 2 ** 31 - 1, checkTimeoutMs: 2 ** 31 - 1 })).not.toThrow();
  });
});
