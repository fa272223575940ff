import type { FSWatcher } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fc, test } from '@fast-check/vitest';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SimulatedClock } from 'xstate';
import { ApprovalGate } from '../../../src/autonomy/approvalGate.js';
import { EventBus, type AuditEvent } from '../../../src/autonomy/eventBus.js';
import { ProactiveManager, type ProactiveOptions } from '../../../src/autonomy/proactive.js';
import { parseProactiveConfig } from '../../../src/autonomy/proactiveConfig.js';
import type { ProactiveFire } from '../../../src/autonomy/proactivePipeline.js';
import { defaultDiskProbe, defaultLoadProbe } from '../../../src/autonomy/proactiveProbes.js';
import { globToRegExp, renderTemplate } from '../../../src/autonomy/proactiveTemplate.js';
import type { ProactiveTrigger } from '../../../src/autonomy/proactiveTrigger.js';
import { ConfigError } from '../../../src/errors.js';

// fs.watch stays real; the wrapper only records which watchers were opened and closed.
const watchers = vi.hoisted(() => [] as { path: string; closed: boolean }[]);
vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>();
  const watch = (...args: unknown[]): FSWatcher => {
    const watcher = (actual.watch as (...a: unknown[]) => FSWatcher)(...args);
    const record = { path: String(args[0]), closed: false };
    watchers.push(record);
    const close = watcher.close.bind(watcher);
    watcher.close = () => {
      record.closed = true;
      close();
    };
    return watcher;
  };
  return { ...actual, default: { ...actual, watch }, watch };
});

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

const managers: ProactiveManager[] = [];
afterEach(async () => {
  await Promise.all(managers.splice(0).map((m) => m.stop()));
});

function setup(triggers: ProactiveTrigger[], options: Partial<ProactiveOptions> = {}) {
  const clock = new SimulatedClock();
  // Timers armed on the clock and neither fired nor cleared yet.
  const pending = new Set<number>();
  const setTimeout = clock.setTimeout.bind(clock);
  const clearTimeout = clock.clearTimeout.bind(clock);
  clock.setTimeout = (fn, ms) => {
    const id = setTimeout((...args: unknown[]) => {
      pending.delete(id);
      fn(...args);
    }, ms);
    pending.add(id);
    return id;
  };
  clock.clearTimeout = (id) => {
    pending.delete(id);
    clearTimeout(id);
  };
  const bus = new EventBus();
  const events: AuditEvent[] = [];
  bus.on((e) => events.push(e));
  const fires: ProactiveFire[] = [];
  const manager = new ProactiveManager({
    triggers,
    onFire: (fire) => {
      fires.push(fire);
    },
    clock,
    bus,
    ...options,
  });
  managers.push(manager);
  return { clock, bus, events, fires, manager, pending };
}

const every = (name: string, intervalMs: number, extra: Partial<ProactiveTrigger> = {}): ProactiveTrigger => ({
  name,
  type: 'schedule',
  intervalMs,
  cooldownMs: 0,
  promptTemplate: 'tick ${trigger_name} at ${timestamp}',
  ...extra,
});

describe('renderTemplate', () => {
  const vars = { trigger_name: 'disk', timestamp: '1970-01-01T00:00:00.000Z', path: '/var', value: '95.0' };

  it('substitutes ${var} and legacy {var}', () => {
    expect(renderTemplate('${trigger_name} at {timestamp}: ${path}={value}', vars)).toBe('disk at 1970-01-01T00:00:00.000Z: /var=95.0');
  });

  it('leaves unknown and malformed placeholders exactly as written', () => {
    expect(renderTemplate('${nope} {nope} {constructor} ${toString}', vars)).toBe('${nope} {nope} {constructor} ${toString}');
    for (const t of ['${oops', '{', '}{', '{}', '${}', '{ path }', '{1x}', '$path', '${path', 'a {path']) {
      expect(renderTemplate(t, vars), t).toBe(t);
    }
    expect(renderTemplate('}{path}{', vars)).toBe('}/var{');
    expect(renderTemplate('${oops {path}', vars)).toBe('${oops /var');
  });

  it('does not expand substituted values again, nor interpret $ patterns in them', () => {
    expect(renderTemplate('{path}', { path: '{timestamp} $& $1 $$', timestamp: 'T' })).toBe('{timestamp} $& $1 $$');
  });

  test.prop([fc.string(), fc.dictionary(fc.string(), fc.string())])('never throws and returns a string', (template, v) => {
    expect(typeof renderTemplate(template, v)).toBe('string');
  });

  test.prop([
    fc.string().filter((s) => !/[{}]/.test(s) && !s.endsWith('$')),
    fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,8}$/),
    fc.string(),
    fc.string().filter((s) => !/[{}]/.test(s)),
    fc.boolean(),
  ])('substitutes a known name in either syntax and keeps everything around it', (pre, key, value, post, dollar) => {
    const template = `${pre}${dollar ? '$' : ''}{${key}}${post}`;
    expect(renderTemplate(template, { [key]: value })).toBe(`${pre}${value}${post}`);
    expect(renderTemplate(template, {})).toBe(template);
  });

  it('never throws on hostile input', () => {
    expect(renderTemplate(undefined as unknown as string, vars)).toBe('undefined');
    expect(renderTemplate('{path}', null as unknown as Record<string, string>)).toBe('{path}');
    const evil = {
      toString: () => {
        throw new Error('no');
      },
    } as unknown as string;
    expect(renderTemplate('{path} {value}', { path: evil, value: '1' })).toBe('{path} {value}');
  });
});

describe('globToRegExp', () => {
  it('matches * and ? against a basename, everything else literally', () => {
    expect(globToRegExp('*.log').test('app.log')).toBe(true);
    expect(globToRegExp('*.log').test('app.log.1')).toBe(false);
    expect(globToRegExp('*.log').test('applog')).toBe(false);
    expect(globToRegExp('app-?.txt').test('app-1.txt')).toBe(true);
    expect(globToRegExp('app-?.txt').test('app-12.txt')).toBe(false);
    expect(globToRegExp('a+(b)[c].txt').test('a+(b)[c].txt')).toBe(true);
  });
});

describe('ProactiveManager: cooldown', () => {
  it('drops and counts events within cooldownMs of the last one, with an audit event', async () => {
    const { manager, fires, events, clock } = setup([{ name: 'manual', type: 'schedule', intervalMs: 1_000_000, promptTemplate: 'go', cooldownMs: 10_000 }]);
    expect(await manager.fireNow('manual')).toBe(true);
    clock.increment(9_999);
    expect(await manager.fireNow('manual')).toBe(false);
    expect(await manager.fireNow('manual')).toBe(false);
    expect(manager.stats().manual).toEqual({ fired: 1, dropped: 2, denied: 0, failed: 0, lastFiredAt: 0 });
    expect(events.filter((e) => e.type === 'proactive.trigger_dropped')).toEqual([
      { type: 'proactive.trigger_dropped', at: 9_999, trigger: 'manual', triggerType: 'schedule', reason: 'cooldown', remainingMs: 1 },
      { type: 'proactive.trigger_dropped', at: 9_999, trigger: 'manual', triggerType: 'schedule', reason: 'cooldown', remainingMs: 1 },
    ]);
    clock.increment(1);
    expect(await manager.fireNow('manual')).toBe(true);
    expect(fires.map((f) => f.at)).toEqual([0, 10_000]);
    expect(manager.stats().manual?.lastFiredAt).toBe(10_000);
  });

  it('defaults to a 5 minute cooldown', async () => {
    const { manager, clock } = setup([{ name: 'm', type: 'load_threshold', loadThresholdPerCore: 1, promptTemplate: 'x' }]);
    await manager.fireNow('m');
    clock.increment(299_999);
    expect(await manager.fireNow('m')).toBe(false);
    clock.increment(1);
    expect(await manager.fireNow('m')).toBe(true);
  });
});

describe('ProactiveManager: schedules', () => {
  it('fires an interval schedule every intervalMs of the injected clock, only while started', async () => {
    const { manager, fires, clock, events } = setup([every('tick', 60_000, { target: { agent: 'ops' } })]);
    clock.increment(120_000);
    await flush();
    expect(fires).toEqual([]);

    manager.start();
    clock.increment(59_999);
    await flush();
    expect(fires).toEqual([]);
    clock.increment(1);
    await flush();
    expect(fires).toEqual([
      {
        trigger: 'tick',
        sessionId: 'proactive-tick',
        prompt: 'tick tick at 1970-01-01T00:03:00.000Z',
        target: { agent: 'ops' },
        at: 180_000,
        tick: '180000',
      },
    ]);
    expect(events.find((e) => e.type === 'proactive.trigger_fired')).toMatchObject({
      at: 180_000,
      trigger: 'tick',
      sessionId: 'proactive-tick',
      target: { agent: 'ops' },
      prompt: 'tick tick at 1970-01-01T00:03:00.000Z',
    });
    clock.increment(60_000);
    await flush();
    clock.increment(60_000);
    await flush();
    expect(fires.map((f) => f.at)).toEqual([180_000, 240_000, 300_000]);
    expect(manager.stats().tick).toMatchObject({ fired: 3, lastFiredAt: 300_000 });
  });

  it('a clock jump over several intervals fires once and keeps the phase', async () => {
    const { manager, fires, clock } = setup([every('tick', 1_000)]);
    manager.start();
    clock.increment(5_500);
    await flush();
    expect(fires.map((f) => f.at)).toEqual([5_500]);
    clock.increment(499);
    await flush();
    expect(fires).toHaveLength(1);
    clock.increment(1);
    await flush();
    expect(fires.map((f) => f.at)).toEqual([5_500, 6_000]);
    // The jumped-over fire is the tick it was scheduled for, in its key and its timestamp.
    expect(fires.map((f) => f.tick)).toEqual(['1000', '6000']);
    expect(fires[0]!.prompt).toContain('1970-01-01T00:00:01.000Z');
  });

  it('ticks an interval schedule at the multiples of intervalMs, so processes started at different times agree on each tick', async () => {
    const { manager, fires, clock } = setup([every('tick', 1_000)]);
    clock.increment(12_345);
    manager.start();
    clock.increment(300);
    const other: ProactiveFire[] = [];
    const late = new ProactiveManager({ triggers: [every('tick', 1_000)], onFire: (f) => void other.push(f), clock });
    managers.push(late);
    late.start();
    for (let i = 0; i < 3; i++) {
      clock.increment(1_000);
      await flush();
    }
    // Started at 12 345 and 12 645: both tick at 13 000, 14 000, 15 000 (not one interval after their start).
    expect(fires.map((f) => f.tick)).toEqual(['13000', '14000', '15000']);
    expect(other.map((f) => f.tick)).toEqual(['13000', '14000', '15000']);
  });

  it('gives a manual fire a tick only for an event id', async () => {
    const { manager, fires } = setup([every('hook', 1_000_000, { cooldownMs: 0 })]);
    await manager.fireNow('hook', { event_id: 'evt-7' });
    await manager.fireNow('hook');
    expect(fires.map((f) => f.tick)).toEqual(['event:evt-7', undefined]);
  });

  it('fires a cron schedule at the next matching time of the simulated clock (croner computes, the clock waits)', async () => {
    const { manager, fires, clock } = setup([
      { name: 'five', type: 'schedule', cron: '*/5 * * * *', cooldownMs: 0, promptTemplate: '{trigger_type} {timestamp}' },
    ]);
    manager.start();
    clock.increment(299_999);
    await flush();
    expect(fires).toEqual([]);
    clock.increment(1);
    await flush();
    expect(fires.map((f) => [f.at, f.prompt])).toEqual([[300_000, 'schedule 1970-01-01T00:05:00.000Z']]);
    clock.increment(299_999);
    await flush();
    expect(fires).toHaveLength(1);
    clock.increment(1);
    await flush();
    expect(fires.map((f) => f.at)).toEqual([300_000, 600_000]);
  });

  it('fires an every-minute cron on each minute', async () => {
    const { manager, fires, clock } = setup([{ name: 'm', type: 'schedule', cron: '* * * * *', cooldownMs: 0, promptTemplate: 'm' }]);
    manager.start();
    for (let i = 0; i < 3; i++) {
      clock.increment(60_000);
      await flush();
    }
    expect(fires.map((f) => f.at)).toEqual([60_000, 120_000, 180_000]);
  });

  it('waits longer than Node timers allow by chaining timers no longer than 2^31-1 ms', async () => {
    const { manager, fires, clock } = setup([
      { name: 'yearly', type: 'schedule', cron: '0 0 1 1 *', timezone: 'UTC', cooldownMs: 0, promptTemplate: 'happy new year' },
    ]);
    const setTimeoutSpy = vi.spyOn(clock, 'setTimeout');
    manager.start();
    const newYear1971 = Date.UTC(1971, 0, 1);
    expect(setTimeoutSpy.mock.calls.every(([, ms]) => ms <= 2_147_483_647)).toBe(true);
    clock.increment(2_147_483_647);
    await flush();
    expect(fires).toEqual([]);
    clock.increment(newYear1971 - 2_147_483_647 - 1);
    await flush();
    expect(fires).toEqual([]);
    clock.increment(1);
    await flush();
    expect(fires.map((f) => f.at)).toEqual([newYear1971]);
    expect(setTimeoutSpy.mock.calls.every(([, ms]) => ms <= 2_147_483_647)).toBe(true);
  });
});

describe('ProactiveManager: confirmation', () => {
  const confirmed = every('deploy', 1_000, { requiresConfirmation: true, target: { agent: 'ops' } });

  it('fires after the gate approves (risk mutation, action = trigger name, agentId = session id)', async () => {
    const approver = vi.fn(() => true);
    const { manager, fires, events, clock } = setup([confirmed], { gate: new ApprovalGate({ approver }) });
    manager.start();
    clock.increment(1_000);
    await flush();
    expect(approver).toHaveBeenCalledTimes(1);
    expect(approver).toHaveBeenCalledWith(expect.objectContaining({ agentId: 'proactive-deploy', agentName: 'ops', action: 'deploy', risk: 'mutation' }));
    expect(fires.map((f) => f.at)).toEqual([1_000]);
    expect(manager.stats().deploy).toMatchObject({ fired: 1, denied: 0 });
    expect(events.map((e) => e.type)).toEqual(['proactive.trigger_fired']);
  });

  it('a denial is counted and audited and nothing fires', async () => {
    const gate = new ApprovalGate({ approver: () => ({ approved: false, reason: 'not now' }) });
    const { manager, fires, events, clock } = setup([confirmed], { gate });
    manager.start();
    clock.increment(1_000);
    await flush();
    expect(fires).toEqual([]);
    expect(manager.stats().deploy).toMatchObject({ fired: 0, denied: 1 });
    expect(events).toEqual([{ type: 'proactive.trigger_denied', at: 1_000, trigger: 'deploy', triggerType: 'schedule', reason: 'denied: not now' }]);
  });

  it('without a gate, a trigger that requires confirmation is denied with an audit event', async () => {
    const { manager, fires, events } = setup([confirmed]);
    expect(await manager.fireNow('deploy')).toBe(false);
    expect(fires).toEqual([]);
    expect(manager.stats().deploy?.denied).toBe(1);
    expect(events).toEqual([
      {
        type: 'proactive.trigger_denied',
        at: 0,
        trigger: 'deploy',
        triggerType: 'schedule',
        reason: 'no approval gate configured',
      },
    ]);
  });

  it('an automatic event approved after stop() does not fire', async () => {
    let approve!: (ok: boolean) => void;
    const gate = new ApprovalGate({ approver: () => new Promise<boolean>((resolve) => (approve = resolve)) });
    const { manager, fires, clock } = setup([confirmed], { gate });
    manager.start();
    clock.increment(1_000);
    await flush();
    await manager.stop();
    approve(true);
    await flush();
    expect(fires).toEqual([]);
    expect(manager.stats().deploy?.fired).toBe(0);
  });
});

describe('ProactiveManager: onFire failures and stop', () => {
  it('an onFire that throws or rejects is logged, counted and audited; the manager keeps going', async () => {
    let calls = 0;
    const error = vi.fn();
    const logger = { error, warn: vi.fn(), info: vi.fn(), debug: vi.fn() } as unknown as ProactiveOptions['logger'];
    const { manager, clock, events } = setup([every('tick', 1_000)], {
      logger,
      onFire: () => {
        calls++;
        if (calls === 1) throw new Error('sync boom');
        if (calls === 2) return Promise.reject(new Error('async boom'));
      },
    });
    manager.start();
    for (let i = 0; i < 3; i++) {
      clock.increment(1_000);
      await flush();
    }
    expect(calls).toBe(3);
    expect(manager.stats().tick).toMatchObject({ fired: 3, failed: 2 });
    expect(events.filter((e) => e.type === 'proactive.fire_failed').map((e) => e.error)).toEqual(['sync boom', 'async boom']);
    expect(error).toHaveBeenCalledTimes(2);
    expect(await manager.fireNow('tick')).toBe(true);
    expect(calls).toBe(4);
  });

  it('stop() clears the timers and waits for onFire calls in progress', async () => {
    let finish!: () => void;
    const started: number[] = [];
    const { manager, clock, pending } = setup([every('tick', 1_000), { name: 'l', type: 'load_threshold', loadThresholdPerCore: 1, promptTemplate: 'x' }], {
      probes: { load: () => ({ perCore: 0 }) },
      onFire: (fire) => {
        started.push(fire.at);
        return new Promise<void>((resolve) => (finish = resolve));
      },
    });
    manager.start();
    expect(manager.running).toBe(true);
    expect(pending.size).toBe(2); // the schedule and the poll
    clock.increment(1_000);
    await flush();
    expect(started).toEqual([1_000]);

    let stopped = false;
    const stopping = manager.stop().then(() => (stopped = true));
    await flush();
    expect(stopped).toBe(false);
    finish();
    await stopping;
    expect(manager.running).toBe(false);
    expect(pending.size).toBe(0);

    clock.increment(10_000);
    await flush();
    expect(started).toEqual([1_000]);
  });

  it('can be started again after stop()', async () => {
    const { manager, fires, clock } = setup([every('tick', 1_000)]);
    manager.start();
    await manager.stop();
    manager.start();
    manager.start(); // a no-op while running
    clock.increment(1_000);
    await flush();
    expect(fires).toHaveLength(1);
  });

  it('fireNow rejects an unknown trigger', async () => {
    const { manager } = setup([every('tick', 1_000)]);
    await expect(manager.fireNow('nope')).rejects.toThrow(ConfigError);
  });
});

describe('ProactiveManager: thresholds', () => {
  it('fires a disk trigger on each poll at or above the threshold, subject to the cooldown', async () => {
    let usedPct = 80;
    const disk = vi.fn(async (_path: string) => ({ usedPct }));
    const { manager, fires, clock, events } = setup(
      [
        {
          name: 'disk-full',
          type: 'disk_threshold',
          diskPath: '/data',
          diskThresholdPct: 90,
          cooldownMs: 20_000,
          promptTemplate: 'Disk ${path} is at {value}% (${trigger_type})',
        },
      ],
      { probes: { disk } },
    );
    manager.start();
    clock.increment(14_999);
    await flush();
    expect(disk).not.toHaveBeenCalled();
    clock.increment(1);
    await flush();
    expect(disk).toHaveBeenCalledWith('/data');
    expect(fires).toEqual([]);

    usedPct = 90;
    clock.increment(15_000);
    await flush();
    expect(fires.map((f) => [f.at, f.prompt])).toEqual([[30_000, 'Disk /data is at 90.0% (disk_threshold)']]);

    usedPct = 97.25;
    clock.increment(15_000); // 15 s after the fire: inside the 20 s cooldown
    await flush();
    expect(fires).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ type: 'proactive.trigger_dropped', trigger: 'disk-full' });

    clock.increment(15_000);
    await flush();
    expect(fires.map((f) => f.prompt)).toEqual(['Disk /data is at 90.0% (disk_threshold)', 'Disk /data is at 97.3% (disk_threshold)']);
    expect(manager.stats()['disk-full']).toMatchObject({ fired: 2, dropped: 1 });
    expect(disk).toHaveBeenCalledTimes(4);
  });

  it('fires a load trigger above its per-core threshold; a failing probe is audited and polling continues', async () => {
    const loads = [0.5, Number.NaN, 2];
    const load = vi.fn(() => {
      const perCore = loads.shift();
      if (perCore === undefined) throw new Error('no more');
      return { perCore };
    });
    const { manager, fires, clock, events } = setup(
      [{ name: 'busy', type: 'load_threshold', loadThresholdPerCore: 1.5, cooldownMs: 0, promptTemplate: 'load {value}' }],
      { probes: { load }, pollIntervalMs: 5_000 },
    );
    manager.start();
    for (let i = 0; i < 4; i++) {
      clock.increment(5_000);
      await flush();
    }
    expect(load).toHaveBeenCalledTimes(4);
    expect(fires.map((f) => [f.at, f.prompt])).toEqual([[15_000, 'load 2.00']]);
    expect(events.filter((e) => e.type === 'proactive.probe_failed').map((e) => e.at)).toEqual([10_000, 20_000]);
  });

  it('the default probes measure the real disk and load', async () => {
    const { usedPct } = await defaultDiskProbe(tmpdir());
    expect(usedPct).toBeGreaterThanOrEqual(0);
    expect(usedPct).toBeLessThanOrEqual(100);
    await expect(defaultDiskProbe(join(tmpdir(), 'troupe-no-such-dir-\u0000'))).rejects.toThrow();
    const { perCore } = defaultLoadProbe();
    expect(Number.isFinite(perCore) && perCore >= 0).toBe(true);
  });

  it('clamps pollIntervalMs to 5–30 s', async () => {
    const fast = vi.fn(() => ({ perCore: 0 }));
    const slow = vi.fn(() => ({ perCore: 0 }));
    const trigger: ProactiveTrigger = { name: 'l', type: 'load_threshold', loadThresholdPerCore: 1, promptTemplate: 'x' };
    const a = setup([trigger], { probes: { load: fast }, pollIntervalMs: 1 });
    const b = setup([trigger], { probes: { load: slow }, pollIntervalMs: 600_000 });
    a.manager.start();
    b.manager.start();
    a.clock.increment(4_999);
    b.clock.increment(29_999);
    await flush();
    expect(fast).not.toHaveBeenCalled();
    expect(slow).not.toHaveBeenCalled();
    a.clock.increment(1);
    b.clock.increment(1);
    await flush();
    expect(fast).toHaveBeenCalledTimes(1);
    expect(slow).toHaveBeenCalledTimes(1);
  });
});

describe('ProactiveManager: file_change (real fs.watch on a temp directory)', () => {
  let dir: string | undefined;
  afterEach(async () => {
    watchers.length = 0;
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('fires for a file matching the patterns, not for others', { timeout: 10_000 }, async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-proactive-'));
    let fired!: (fire: ProactiveFire) => void;
    const first = new Promise<ProactiveFire>((resolve) => (fired = resolve));
    const { manager } = setup(
      [
        {
          name: 'watch-logs',
          type: 'file_change',
          watchPath: dir,
          watchPatterns: ['*.log'],
          promptTemplate: 'A log file changed: ${path} at {timestamp}.',
        },
      ],
      { onFire: (fire) => fired(fire) },
    );
    manager.start();
    manager.start(); // a no-op while running: still one watcher
    expect(watchers).toEqual([{ path: dir, closed: false }]);
    await writeFile(join(dir, 'notes.txt'), 'ignored');
    await writeFile(join(dir, 'app.log'), 'hello');
    const fire = await first;
    expect(fire).toMatchObject({
      trigger: 'watch-logs',
      sessionId: 'proactive-watch-logs',
      target: { root: true },
      prompt: `A log file changed: ${join(dir, 'app.log')} at 1970-01-01T00:00:00.000Z.`,
    });
    await manager.stop();
    expect(watchers).toEqual([{ path: dir, closed: true }]);
  });

  it('start() throws ConfigError when the watch path cannot be watched, leaving nothing running', async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-proactive-'));
    const { manager, clock, fires, pending } = setup([
      every('tick', 1_000),
      { name: 'ok', type: 'file_change', watchPath: dir, promptTemplate: 'x' },
      { name: 'w', type: 'file_change', watchPath: join(dir, 'missing'), promptTemplate: 'x' },
    ]);
    expect(() => manager.start()).toThrow(ConfigError);
    expect(() => manager.start()).toThrow(/"w" cannot watch/);
    expect(manager.running).toBe(false);
    expect(watchers).toEqual([
      { path: dir, closed: true },
      { path: dir, closed: true },
    ]);
    expect(pending.size).toBe(0);
    clock.increment(5_000);
    await flush();
    expect(fires).toEqual([]);
  });
});

describe('ProactiveManager: validation', () => {
  const base = { promptTemplate: 'x' };
  const bad: [string, ProactiveTrigger[], RegExp][] = [
    ['duplicate names', [every('a', 1), every('a', 2)], /triggers\[1\]\.name must be unique/],
    ['file_change without watchPath', [{ ...base, name: 'f', type: 'file_change' }], /triggers\[0\]\.watchPath is required/],
    ['disk without diskPath', [{ ...base, name: 'd', type: 'disk_threshold', diskThresholdPct: 50 }], /diskPath is required/],
    ['disk threshold 0', [{ ...base, name: 'd', type: 'disk_threshold', diskPath: '/', diskThresholdPct: 0 }], /diskThresholdPct/],
    ['disk threshold > 100', [{ ...base, name: 'd', type: 'disk_threshold', diskPath: '/', diskThresholdPct: 100.5 }], /diskThresholdPct/],
    ['load threshold 0', [{ ...base, name: 'l', type: 'load_threshold', loadThresholdPerCore: 0 }], /loadThresholdPerCore/],
    ['schedule with neither', [{ ...base, name: 's', type: 'schedule' }], /exactly one of intervalMs and cron, got neither/],
    ['schedule with both', [{ ...base, name: 's', type: 'schedule', intervalMs: 5, cron: '* * * * *' }], /got both/],
    ['invalid cron', [{ ...base, name: 's', type: 'schedule', cron: 'every tuesday' }], /triggers\[0\]\.cron is not a valid cron/],
    ['invalid time zone', [{ ...base, name: 's', type: 'schedule', cron: '* * * * *', timezone: 'Mars/Olympus' }], /timezone/],
    ['a field of another type', [{ ...base, name: 's', type: 'schedule', intervalMs: 5, watchPath: '/' }], /watchPath is not allowed/],
    ['unknown type', [{ ...base, name: 's', type: 'cpu' as 'schedule' }], /type must be one of/],
    ['negative cooldown', [{ ...every('s', 5), cooldownMs: -1 }], /cooldownMs/],
    ['bad target', [{ ...every('s', 5), target: { agent: '' } }], /target/],
  ];
  it.each(bad)('rejects %s with a ConfigError naming the field', (_label, triggers, message) => {
    const create = () => new ProactiveManager({ triggers, onFire: () => {} });
    expect(create).toThrow(ConfigError);
    expect(create).toThrow(message);
  });

  it('accepts one valid trigger of each type', () => {
    expect(
      () =>
        new ProactiveManager({
          triggers: [
            { ...base, name: 'f', type: 'file_change', watchPath: '/tmp' },
            { ...base, name: 'd', type: 'disk_threshold', diskPath: '/', diskThresholdPct: 100 },
            { ...base, name: 'l', type: 'load_threshold', loadThresholdPerCore: 0.5 },
            { ...base, name: 's', type: 'schedule', cron: '0 9 * * 1-5', timezone: 'Europe/Paris' },
          ],
          onFire: () => {},
        }),
    ).not.toThrow();
  });
});

describe('parseProactiveConfig', () => {
  it('parses the snake_case section into triggers (seconds → ms, agent → target)', () => {
    expect(
      parseProactiveConfig({
        enabled: true,
        triggers: [
          {
            name: 'watch-logs',
            trigger_type: 'file_change',
            watch_path: '/var/log/app',
            watch_patterns: ['*.log'],
            prompt_template: 'A log file changed in /var/log/app at {timestamp}.',
            cooldown_seconds: 60,
          },
          {
            name: 'disk-full',
            trigger_type: 'disk_threshold',
            disk_path: '/',
            disk_threshold_pct: 90.0,
            requires_confirmation: true,
            prompt_template: 'Disk usage on / has exceeded 90%.',
            agent: 'janitor',
          },
          { name: 'hourly', type: 'schedule', interval_seconds: 3600, promptTemplate: 'hourly', cooldownMs: 0 },
          { name: 'nightly', trigger_type: 'schedule', cron: '0 3 * * *', prompt_template: 'nightly', load_threshold_per_core: undefined },
        ],
      }),
    ).toEqual([
      {
        name: 'watch-logs',
        type: 'file_change',
        watchPath: '/var/log/app',
        watchPatterns: ['*.log'],
        promptTemplate: 'A log file changed in /var/log/app at {timestamp}.',
        cooldownMs: 60_000,
      },
      {
        name: 'disk-full',
        type: 'disk_threshold',
        diskPath: '/',
        diskThresholdPct: 90,
        requiresConfirmation: true,
        promptTemplate: 'Disk usage on / has exceeded 90%.',
        target: { agent: 'janitor' },
      },
      { name: 'hourly', type: 'schedule', intervalMs: 3_600_000, promptTemplate: 'hourly', cooldownMs: 0 },
      { name: 'nightly', type: 'schedule', cron: '0 3 * * *', promptTemplate: 'nightly' },
    ]);
  });

  it('gives no triggers for a missing or disabled section (still validating it)', () => {
    expect(parseProactiveConfig(undefined)).toEqual([]);
    expect(parseProactiveConfig({ enabled: false, triggers: [{ name: 'x', type: 'schedule', interval_seconds: 1, prompt_template: 'p' }] })).toEqual([]);
    expect(() => parseProactiveConfig({ enabled: false, triggers: [{ name: 'x', type: 'schedule', prompt_template: 'p' }] })).toThrow(ConfigError);
  });

  const errors: [string, unknown, RegExp][] = [
    ['a non-object section', 'yes', /^proactive must be an object/],
    ['an unknown section key', { triggers: [], trigger: [] }, /unknown field "trigger"/],
    ['a non-boolean enabled', { enabled: 'yes', triggers: [] }, /proactive\.enabled must be a boolean/],
    ['non-array triggers', { triggers: {} }, /proactive\.triggers must be an array/],
    [
      'an unknown trigger key',
      { triggers: [{ name: 'x', type: 'schedule', interval_secs: 5, prompt_template: 'p' }] },
      /triggers\[0\] has an unknown field "interval_secs"/,
    ],
    [
      'a key given twice',
      { triggers: [{ name: 'x', type: 'schedule', interval_seconds: 5, intervalMs: 5, prompt_template: 'p' }] },
      /triggers\[0\]\.intervalMs duplicates proactive\.triggers\[0\]\.interval_seconds/,
    ],
    [
      'a non-numeric cooldown_seconds',
      { triggers: [{ name: 'x', type: 'schedule', interval_seconds: 5, cooldown_seconds: '60', prompt_template: 'p' }] },
      /triggers\[0\]\.cooldown_seconds must be a finite number of seconds/,
    ],
    [
      'a missing watch_path (named as written)',
      { triggers: [{ name: 'x', trigger_type: 'file_change', watch_patterns: ['*'], prompt_template: 'p' }] },
      /triggers\[0\]\.watch_path is required/,
    ],
    [
      'a bad disk_threshold_pct',
      { triggers: [{ name: 'x', trigger_type: 'disk_threshold', disk_path: '/', disk_threshold_pct: 150, prompt_template: 'p' }] },
      /triggers\[0\]\.disk_threshold_pct is required .*\(0, 100\]/,
    ],
    [
      'a bad cron',
      { triggers: [{ name: 'x', trigger_type: 'schedule', cron: '61 * * * *', prompt_template: 'p' }] },
      /triggers\[0\]\.cron is not a valid cron/,
    ],
    [
      'a missing prompt_template',
      { triggers: [{ name: 'x', trigger_type: 'schedule', cron: '* * * * *' }] },
      /triggers\[0\]\.prompt_template must be a string/,
    ],
    [
      'a missing promptTemplate (camelCase)',
      { triggers: [{ name: 'x', type: 'schedule', cron: '* * * * *' }] },
      /triggers\[0\]\.promptTemplate must be a string/,
    ],
    [
      'a missing interval (snake_case)',
      { triggers: [{ name: 'x', trigger_type: 'schedule', prompt_template: 'p' }] },
      /needs exactly one of interval_seconds and cron, got neither/,
    ],
    [
      'an empty agent',
      { triggers: [{ name: 'x', trigger_type: 'schedule', cron: '* * * * *', prompt_template: 'p', agent: ' ' }] },
      /triggers\[0\]\.agent must be a non-empty agent name/,
    ],
    [
      'duplicate names',
      {
        triggers: [
          { name: 'x', type: 'schedule', cron: '* * * * *', prompt_template: 'p' },
          { name: 'x', type: 'schedule', cron: '* * * * *', prompt_template: 'p' },
        ],
      },
      /triggers\[1\]\.name must be unique/,
    ],
  ];
  it.each(errors)('rejects %s with a ConfigError naming the field', (_label, raw, message) => {
    expect(() => parseProactiveConfig(raw)).toThrow(ConfigError);
    expect(() => parseProactiveConfig(raw)).toThrow(message);
  });
});
