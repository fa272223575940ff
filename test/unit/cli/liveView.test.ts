/**
 * The redrawn terminal view: every line fits the terminal (wide characters counted), each redraw
 * erases exactly the rows the last frame took (also after a resize that wrapped them), and the
 * final frame is drawn once. What agents do shows as words: retries with their wait, nudges, why
 * an agent failed.
 */
import { PassThrough, Writable } from 'node:stream';
import stringWidth from 'string-width';
import { describe, expect, it } from 'vitest';
import { attachView, fit, rowsAt } from '../../../src/cli/liveView.js';
import { activityText, eventLine } from '../../../src/cli/view.js';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import type { Model } from '../../../src/model/types.js';
import { team, TERMINAL } from '../../helpers/team.js';

/** The frames a TTY view wrote, and the row count each redraw erased first. */
function frames(text: string): { erased: number[]; frames: string[][] } {
  const erased: number[] = [];
  const out: string[][] = [];
  for (const chunk of text.split(/(?=\x1b\[\d+F\x1b\[0J)/)) {
    const m = /^\x1b\[(\d+)F\x1b\[0J/.exec(chunk);
    erased.push(m ? Number(m[1]) : 0);
    out.push(
      chunk
        .replace(/^\x1b\[\d+F\x1b\[0J/, '')
        .replace(/\n$/, '')
        .split('\n'),
    );
  }
  return { erased, frames: out };
}

describe('fit', () => {
  it('cuts a line to the width minus one column, counting wide characters, with an ellipsis', () => {
    const long = `scout: ${'地図を作る🎭'.repeat(20)}`;
    for (const columns of [10, 40, 60, 61]) {
      const cut = fit(long, columns);
      expect(stringWidth(cut)).toBeLessThanOrEqual(columns - 1);
      expect(cut.endsWith('…')).toBe(true);
    }
    expect(fit('short', 60)).toBe('short');
  });

  it('rowsAt: the rows lines take on a terminal that wraps them', () => {
    expect(rowsAt(['a'.repeat(59), 'b'.repeat(60), ''], 30)).toBe(2 + 2 + 1);
  });
});

describe('the TTY view', () => {
  it('at 60 columns: no line is wider than 59, each redraw erases what the last frame drew; a resize erases the wrapped rows', async () => {
    let columns = 100;
    let resize: () => void = () => {};
    const t = team({
      agents: {
        lead: [
          { tool: 'spawn_agent', args: { name: 'researcher', task: 'look around the repository for a while' } },
          { tool: 'wait_for_agents', args: { reason: 'the researcher' } },
          { tool: 'finish', args: { summary: 'done' } },
        ],
        researcher: [
          { error: { code: 'PROVIDER_RATE_LIMITED', status: 429, message: 'slow down', retryAfterMs: 8_000 } },
          { text: 'I think the layout is fine, and here is a very long explanation of why it is fine.' },
          { tool: 'agent_finish', args: { summary: 'mapped it' } },
        ],
      },
    });
    let written = '';
    const view = attachView(
      t.c,
      'tty',
      { write: (s) => (written += s) },
      { intervalMs: 0, columns: () => columns, onResize: (r) => ((resize = r), () => undefined) },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(1_000);
    columns = 60;
    await t.advance(1_000);
    // The next frame is drawn at 100 columns' worth of content cut to 60; shrink to 30 and redraw.
    const before = frames(written).frames.at(-1)!;
    columns = 30;
    resize();
    const afterResize = frames(written);
    expect(afterResize.erased.at(-1)).toBe(rowsAt(before, 30));
    columns = 60;
    await t.advance(60_000);
    await t.c.waitFor(rootId, TERMINAL);
    view.stop();
    const { erased, frames: drawn } = frames(written);
    for (let i = 1; i < drawn.length; i++) {
      if (i === afterResize.erased.length - 1) continue;
      expect(erased[i], `frame ${i}`).toBe(drawn[i - 1]!.length);
    }
    const narrow = drawn.slice(afterResize.erased.length);
    expect(narrow.length).toBeGreaterThan(0);
    for (const frame of narrow) for (const line of frame) expect(stringWidth(line), line).toBeLessThanOrEqual(59);
    const all = drawn.flat().join('\n');
    expect(all).toContain('rate limited (429), retrying in 8 s (1/5)');
    // The final frame once: the last write is a full frame showing the root completed.
    expect(drawn.at(-1)!.join('\n')).toMatch(/✓ lead .*completed/);
  });
});

describe('streamed text (--stream)', () => {
  it('shows on the agent’s line as it is written', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let streamed!: () => void;
    const wrote = new Promise<void>((resolve) => (streamed = resolve));
    const model: Model = {
      name: 'm',
      complete: async (_request, { onDelta }) => {
        onDelta?.({ kind: 'text', text: 'Reading the ' });
        onDelta?.({ kind: 'text', text: 'layout now' });
        streamed();
        await released;
        return { text: null, toolCalls: [{ id: 'c1', name: 'finish', arguments: '{"summary":"done"}' }] };
      },
    };
    const c = createCoordinator({ model });
    let screen = '';
    let shown!: () => void;
    const drawn = new Promise<void>((resolve) => (shown = resolve));
    const view = attachView(
      c,
      'tty',
      { write: (s) => ((screen += s), screen.includes('  lead: writes: …Reading the layout now') && shown()) },
      { intervalMs: 0 },
    );
    const rootId = await c.start({ name: 'lead', task: 'x' });
    await wrote;
    // The frame drawn after the deltas shows them (the test times out if none does).
    await drawn;
    release();
    await c.waitFor(rootId, TERMINAL);
    view.stop();
    await c.shutdown();
  });
});

describe('the prompt of an interactive run', () => {
  it('says when the root waits for you, survives redraws, and keeps what you typed in the frame', async () => {
    const t = team(
      {
        agents: {
          lead: [
            { tool: 'respond_to_user', args: { message: 'What should I review?' } },
            { tool: 'finish', args: { summary: 'reviewed it' } },
          ],
        },
      },
      { interactive: true },
    );
    let screen = '';
    // The view redraws on a real timer: wait for the text to be drawn, not for time to pass.
    const waiting: { text: string; resolve: () => void }[] = [];
    const wrote = (s: string) => {
      screen += s;
      for (const w of waiting.splice(0))
        if (screen.includes(w.text)) w.resolve();
        else waiting.push(w);
    };
    const drawn = (text: string) => new Promise<void>((resolve) => (screen.includes(text) ? resolve() : waiting.push({ text, resolve })));
    const output = new Writable({ write: (chunk: Buffer, _enc, done) => (wrote(chunk.toString()), done()) });
    const input = new PassThrough();
    const rootId = await t.c.start({ name: 'lead', task: 'Review' });
    const view = attachView(
      t.c,
      'tty',
      { write: wrote },
      { intervalMs: 0, columns: () => 80, prompt: { input, output, rootId, onLine: (line) => void t.c.send(rootId, { content: line }) } },
    );
    await t.c.waitFor(rootId, ['waiting']);
    await t.advance(10);
    // The test times out if the prompt never says so.
    await drawn('lead waits for you › ');
    expect(screen).toContain('lead waits for you › ');
    const before = frames(screen)
      .frames.at(-1)!
      .filter((l) => !l.startsWith('\x1b[1G'));
    input.write('hello there\r');
    await t.c.waitFor(rootId, ['completed']);
    await t.advance(10);
    await drawn('you → lead: hello there');
    view.stop();
    // The frame after Enter erased the frame and the prompt row the typed line is on.
    const after = frames(screen);
    const i = after.frames.findIndex((f) => f.some((l) => l.includes('you → lead: hello there')));
    expect(i).toBeGreaterThan(0);
    expect(after.erased[i]).toBe(before.length + 1);
    expect(after.frames.at(-1)!.join('\n')).toContain('you → lead: hello there');
  });
});

describe('words for events', () => {
  it('retries name the cause, the wait and the count; a nudge its count; a failed agent says why', () => {
    expect(eventLine({ type: 'agent.activity', agentId: 't', name: 'talker', activity: { kind: 'nudge', attempt: 1, limit: 3 }, at: 0 })).toBe(
      'talker     answered in plain text: nudged (1/3)',
    );
    expect(activityText({ kind: 'retry', code: 'PROVIDER_CONNECTION', message: 'Connection error.', retry: 2, maxRetries: 5, delayMs: 4_000 })).toBe(
      'cannot reach the model server (Connection error.), retrying in 4 s (2/5)',
    );
    const line = eventLine(
      { type: 'agent.status', agentId: 'p', name: 'prober', from: 'running', to: 'failed', at: 0 },
      () =>
        ({
          status: 'failed',
          error: { code: 'PROVIDER_AUTH', message: 'HTTP 403: no browsing' },
          stopReason: null,
        }) as never,
    );
    expect(line).toBe('prober     running → failed: PROVIDER_AUTH: HTTP 403: no browsing');
  });
});
