/**
 * `--inspect` where the hosted inspector (https://stately.ai/inspect) cannot be reached: the
 * server's background check of its URL (never awaited by the run, bounded, ended by close()), the
 * default check against local servers (no internet needed), the one line the CLI prints and where
 * it goes (stderr, or above a live view's frame), the end-of-run line with the exact `troupe ui`
 * command, and the page's notice markup (its behaviour is in test/browser/inspector.test.ts).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { drive } from '../../src/cli/drive.js';
import { inspector, type Inspection } from '../../src/cli/setup.js';
import { startInspector, type InspectorHandle, type InspectorOptions } from '../../src/inspect/server.js';
import { captureIo } from '../helpers/dashboard.js';
import { closedPort } from '../helpers/ports.js';
import { team } from '../helpers/team.js';

type Probe = NonNullable<InspectorOptions['probe']>;

/** A probe that stays pending until the test settles it; it records what it was called with. */
function heldProbe() {
  const calls: { url: string; signal: AbortSignal }[] = [];
  let settle!: { resolve: () => void; reject: (err: unknown) => void };
  const probe: Probe = (url, signal) => {
    calls.push({ url, signal });
    return new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  };
  return { probe, calls, resolve: () => settle.resolve(), reject: (err: unknown) => settle.reject(err) };
}

/** What fetch throws when DNS has no answer (as offline, here and in CI). */
const dnsFailure = () => new TypeError('fetch failed', { cause: Object.assign(new Error('getaddrinfo ENOTFOUND stately.ai'), { code: 'ENOTFOUND' }) });

/**
 * Every promise continuation already due has run (a settled probe's result reaches the CLI through
 * a few of them): the next turn of the event loop comes after all of them. No time passes.
 */
const drained = () => new Promise<void>((resolve) => setImmediate(resolve));

const handles: InspectorHandle[] = [];
const inspections: Inspection[] = [];
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all([...handles.splice(0).map((h) => h.close()), ...inspections.splice(0).map((i) => i.close())]);
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise<void>((resolve) => {
          s.close(() => resolve());
          s.closeAllConnections();
        }),
    ),
  );
});

async function start(options: InspectorOptions): Promise<InspectorHandle> {
  const handle = await startInspector({ port: 0, ...options });
  handles.push(handle);
  return handle;
}

/** A local HTTP server answering every request with `status`; its URL. */
async function answering(status: number): Promise<string> {
  const server = createServer((_req, res) => void res.writeHead(status).end());
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/inspect`;
}

describe('startInspector: the background check of the hosted inspector', () => {
  it('does not wait for it: the handle (and the page) come while the probe is pending; a failure resolves `unreachable` with its cause', async () => {
    const held = heldProbe();
    const handle = await start({ probe: held.probe });
    // The handle exists and serves while the check has not answered.
    expect(held.calls).toHaveLength(1);
    expect(held.calls[0]!.url).toBe('https://stately.ai/inspect');
    expect(held.calls[0]!.signal.aborted).toBe(false);
    expect((await fetch(handle.url)).status).toBe(200);
    let settled = false;
    void handle.unreachable.then(() => (settled = true));
    await drained();
    expect(settled).toBe(false);

    held.reject(dnsFailure());
    expect(await handle.unreachable).toBe('getaddrinfo ENOTFOUND stately.ai');
    expect(handle.inspectorUrl).toBe('https://stately.ai/inspect');
  });

  it('an answer resolves it with null', async () => {
    const held = heldProbe();
    const handle = await start({ probe: held.probe });
    held.resolve();
    expect(await handle.unreachable).toBeNull();
  });

  it('no answer within probeTimeoutMs counts as unreachable, even from a probe that ignores its signal (which is aborted)', async () => {
    const held = heldProbe();
    const handle = await start({ probe: held.probe, probeTimeoutMs: 50 });
    expect(await handle.unreachable).toBe('no answer within 50 ms');
    expect(held.calls[0]!.signal.aborted).toBe(true);
  });

  it('close() ends the check: null, the probe aborted, and a late failure says nothing', async () => {
    const held = heldProbe();
    const handle = await start({ probe: held.probe });
    await handle.close();
    expect(held.calls[0]!.signal.aborted).toBe(true);
    held.reject(dnsFailure());
    expect(await handle.unreachable).toBeNull();
  });

  it('a probe that throws at once is a failure like any other', async () => {
    const handle = await start({
      probe: () => {
        throw new Error('no network here');
      },
    });
    expect(await handle.unreachable).toBe('no network here');
  });

  it('the default probe (HTTP HEAD): a closed port is unreachable, a 404 is an answer, a 503 is not', async () => {
    const closed = `http://127.0.0.1:${await closedPort()}/inspect`;
    expect(await (await start({ inspectorUrl: closed })).unreachable).toMatch(/ECONNREFUSED/);
    expect(await (await start({ inspectorUrl: await answering(404) })).unreachable).toBeNull();
    expect(await (await start({ inspectorUrl: await answering(503) })).unreachable).toBe('it answered HTTP 503');
  });

  it('the inspector URL must be http(s)', async () => {
    await expect(startInspector({ port: 0, inspectorUrl: 'javascript:alert(1)' })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    await expect(startInspector({ port: 0, inspectorUrl: 'not a url' })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
  });

  it('the page carries the notice (hidden until its script finds the inspector did not load), the dashboard named, HTML escaped', async () => {
    const handle = await start({ probe: () => Promise.resolve(), dashboard: 'run `troupe ui --db <x>&y.db` somewhere', pageTimeoutMs: 1_234 });
    const html = await (await fetch(handle.url)).text();
    expect(html).toContain('<div id="offline" role="alert" hidden>');
    expect(html).toContain('The Stately inspector did not load');
    expect(html).toContain('the same run: run <code>troupe ui --db &lt;x&gt;&amp;y.db</code> somewhere, then open its <b>Timeline</b> tab');
    expect(html).toContain('const WAIT_MS = 1234;');
    expect(html).toContain("fetch(URL_TO_LOAD, { mode: 'no-cors'");
    // The bridge script is unchanged, and still the page's only bare <script> (the other has an id).
    expect(html.match(/<script>/g)).toHaveLength(1);
    expect(html).not.toContain("'*'");
  });
});

describe('inspector(): the line on the terminal', () => {
  async function inspecting(values: Parameters<typeof inspector>[0], probe: Probe, env: NodeJS.ProcessEnv = {}) {
    const io = { ...captureIo(), env };
    const inspection = await inspector(values, io, { probe });
    inspections.push(inspection);
    return {
      io,
      inspection,
      lines: () =>
        io
          .text()
          .err.split('\n')
          .filter((l) => l.startsWith('troupe: --inspect:')),
    };
  }

  it('unreachable: one line on stderr, after inspector() has returned, saying why and naming `troupe ui --db <db>` and its Timeline', async () => {
    const held = heldProbe();
    const { io, inspection, lines } = await inspecting({ inspect: '0', db: 'work/team.db' }, held.probe);
    // inspector() returned while the check was pending: the run is not held up by it.
    expect(io.text().err).toMatch(/^XState inspector: open http:\/\/127\.0\.0\.1:\d+\/\?token=/);
    expect(lines()).toEqual([]);
    expect(inspection.unreachable!()).toBeUndefined();

    held.reject(dnsFailure());
    await drained();
    expect(lines()).toEqual([
      'troupe: --inspect: this machine could not reach https://stately.ai/inspect (getaddrinfo ENOTFOUND stately.ai), which the inspector page loads from the internet, ' +
        'so the page will say it did not load instead of showing the run. Offline, the dashboard shows the same run: ' +
        "run `troupe ui --db work/team.db` in another shell (or start the team with --ui); its Timeline tab draws every agent's lifecycle states over time.",
    ]);
    expect(inspection.unreachable!()).toBe('getaddrinfo ENOTFOUND stately.ai');
    expect(io.text().out).toBe('');
  });

  it('reachable: no line', async () => {
    const held = heldProbe();
    const { io, inspection } = await inspecting({ inspect: '0' }, held.probe);
    held.resolve();
    await drained();
    expect(
      io
        .text()
        .err.split('\n')
        .filter((l) => l !== ''),
    ).toHaveLength(1); // the hint only
    expect(inspection.unreachable!()).toBeUndefined();
  });

  it('with --ui it points to the dashboard this command serves; a PostgreSQL --db is not printed with its password; a proxy is mentioned', async () => {
    const fail = () => Promise.reject(dnsFailure());
    const ui = await inspecting({ inspect: '0', ui: '0' }, fail);
    const pg = await inspecting({ inspect: '0', db: 'postgres://me:hunter2@db.example/troupe' }, fail, { HTTPS_PROXY: 'http://proxy:3128' });
    await drained();
    expect(ui.lines()[0]).toContain('the dashboard shows the same run: open the dashboard this command serves (--ui; its address is printed on the terminal);');
    expect(pg.lines()[0]).toContain('run `troupe ui --db postgres://…` in another shell');
    expect(pg.io.text().err).not.toContain('hunter2');
    expect(pg.lines()[0]).toMatch(/\(This check does not use the HTTPS_PROXY set here: a browser that does may still load the page\.\)$/);
  });

  it('tellWith routes the line elsewhere (a live view): said once, there, not on stderr', async () => {
    const held = heldProbe();
    const { inspection, lines } = await inspecting({ inspect: '0' }, held.probe);
    const told: string[] = [];
    inspection.tellWith!((line) => told.push(line));
    held.reject(dnsFailure());
    await drained();
    expect(lines()).toEqual([]);
    expect(told).toEqual([expect.stringMatching(/^--inspect: this machine could not reach https:\/\/stately\.ai\/inspect \(getaddrinfo ENOTFOUND/)]);
  });

  it('without --inspect there is no server and no check', async () => {
    let probed = 0;
    const { io, inspection } = await inspecting({}, () => {
      probed++;
      return Promise.resolve();
    });
    expect(inspection.url).toBeUndefined();
    expect(probed).toBe(0);
    expect(io.text().err).toBe('');
  });
});

describe('drive with an inspector that cannot load', () => {
  /**
   * Drive a one-turn run (its root finishes) with `inspection`; the probe fails once `onHosted`
   * ran (the view listens). The run over, drive serves the inspector until SIGINT: its own
   * handler is called then, as a signal would.
   */
  async function driveRun(mode: 'lines' | 'tty', held: ReturnType<typeof heldProbe>, inspection: Inspection, io: ReturnType<typeof captureIo>) {
    const t = team({ agents: { lead: [{ tool: 'finish', args: { summary: 'All done.' } }] } }, { inspect: inspection.inspect! });
    const before = new Set(process.listeners('SIGINT'));
    const driving = drive(
      async (onHosted) => {
        onHosted(t.c as never);
        held.reject(dnsFailure());
        await expect.poll(() => inspection.unreachable!()).toBeDefined();
        const rootId = await t.c.start({ name: 'lead', task: 'Finish.' });
        return { c: t.c as never, rootId };
      },
      { mode, io, address: ' --db work/team.db', interactive: false, inspection },
    );
    let code: number;
    try {
      await expect.poll(() => io.text().err).toMatch(/The run ended/);
    } finally {
      const handler = process.listeners('SIGINT').find((l) => !before.has(l));
      handler?.('SIGINT');
      code = await driving;
      await t.c.shutdown();
    }
    return code;
  }

  async function setUp() {
    const held = heldProbe();
    const io = captureIo();
    const inspection = await inspector({ inspect: '0' }, io, { probe: held.probe });
    inspections.push(inspection);
    return { held, io, inspection };
  }

  it('piped: the line once on stderr during the run; the end says the exact `troupe ui` command for this run', async () => {
    const { held, io, inspection } = await setUp();
    expect(await driveRun('lines', held, inspection, io)).toBe(0);
    const err = io.text().err;
    expect(err.match(/troupe: --inspect: this machine could not reach/g)).toHaveLength(1);
    expect(err).toContain(
      `The run ended; the inspector keeps serving ${inspection.url} until Ctrl-C. This machine could not reach the Stately inspector its page loads ` +
        "(getaddrinfo ENOTFOUND stately.ai); `troupe ui --db work/team.db` shows the same run offline: its Timeline tab draws every agent's lifecycle states over time.\n",
    );
  });

  it('on a terminal: the line goes above the live frame, not to stderr', async () => {
    const { held, io, inspection } = await setUp();
    expect(await driveRun('tty', held, inspection, io)).toBe(0);
    expect(io.text().err).not.toContain('could not reach https://stately.ai/inspect');
    expect(io.text().out.replace(/\s+/g, ' ')).toContain(
      '--inspect: this machine could not reach https://stately.ai/inspect (getaddrinfo ENOTFOUND stately.ai)',
    );
  });
});
