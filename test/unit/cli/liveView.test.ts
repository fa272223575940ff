/**
 * The redrawn terminal view: every line fits the terminal (wide characters counted), each redraw
 * erases exactly the rows the last frame took (also after a resize that wrapped them), and the
 * final frame is drawn once. What agents do shows as words: retries with their wait, nudges, why
 * an agent failed.
 */
import { PassThrough, Writable } from 'node:stream';
import fc from 'fast-check';
import stringWidth from 'string-width';
import { describe, expect, it } from 'vitest';
import { attachView, fit, rowsAt, wrapWords } from '../../../src/cli/liveView.js';
import { activityText, eventLine } from '../../../src/cli/view.js';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import type { Model } from '../../../src/model/types.js';
import { dropTableTool } from '../../helpers/approvals.js';
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

describe('a pending approval in the TTY view', () => {
  it("shows on its agent's line while pending, and goes once answered", async () => {
    const { tool } = dropTableTool();
    const t = team(
      {
        agents: {
          lead: [
            { tools: [{ name: 'drop_table', args: { table: 'users' } }] },
            { tools: [{ name: 'wait_for_agents', args: { reason: 'the approval' } }] },
            { tools: [{ name: 'respond_to_user', args: { message: 'done' } }] },
          ],
        },
      },
      { tools: [tool], interactive: true, approvals: { ask: ['destructive'] } },
    );
    let written = '';
    const view = attachView(t.c, 'tty', { write: (s) => (written += s) }, { intervalMs: 0, columns: () => 200 });
    const rootId = await t.c.start({ name: 'lead', task: 'Clean up.' });
    await t.c.waitFor(rootId, ['waiting']);
    await t.advance(1_000);
    const leadLine = () =>
      frames(written)
        .frames.at(-1)!
        .find((l) => l.includes(`lead (${rootId})`));
    expect(leadLine()).toMatch(/^… lead \(\w+\) {2}waiting \(asks approval ap-1\) {2}turns=2 /);
    await t.c.approvals.approve('ap-1');
    // It ran, the lead was told and answered its user.
    await expect.poll(() => t.c.get(rootId).waitKind).toBe('user');
    await t.advance(1_000);
    expect(leadLine()).toMatch(/^… lead \(\w+\) {2}waiting \(waits for you\) {2}turns=3 /);
    view.stop();
    await t.c.shutdown();
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

/**
 * A TTY view of an interactive team at `columns`, its screen, and a way to wait for text on it (the
 * view redraws on a real timer: wait for the text to be drawn, not for time to pass). `sendTyped`:
 * lines typed go to the root.
 */
async function interactive(script: Parameters<typeof team>[0], columns: number, sendTyped = false) {
  const t = team(script, { interactive: true });
  let screen = '';
  const waiting: { text: string; resolve: () => void }[] = [];
  const wrote = (text: string) => {
    screen += text;
    for (const w of waiting.splice(0))
      if (screen.includes(w.text)) w.resolve();
      else waiting.push(w);
  };
  const calls = { interrupts: 0, ends: 0, lines: [] as string[] };
  const input = new PassThrough();
  const output = new Writable({ write: (chunk: Buffer, _enc, done) => (wrote(chunk.toString()), done()) });
  const rootId = await t.c.start({ name: 'lead', task: 'Review' });
  const view = attachView(
    t.c,
    'tty',
    { write: wrote },
    {
      intervalMs: 0,
      columns: () => columns,
      prompt: {
        input,
        output,
        rootId,
        onLine: (line) => {
          calls.lines.push(line);
          if (sendTyped) void t.c.send(rootId, { content: line });
        },
        onInterrupt: () => void (calls.interrupts += 1),
        onInputEnd: () => ((calls.ends += 1), 'input closed (Ctrl-D): the run goes on without you'),
      },
    },
  );
  return {
    t,
    rootId,
    input,
    view,
    calls,
    screen: () => screen,
    drawn: (text: string) => new Promise<void>((resolve) => (screen.includes(text) ? resolve() : waiting.push({ text, resolve }))),
  };
}

describe('the prompt of an interactive run', () => {
  it('says when the root waits for you, survives redraws, and keeps what you typed in the frame', async () => {
    const script = {
      agents: {
        lead: [
          { tool: 'respond_to_user', args: { message: 'What should I review?' } },
          { tool: 'finish', args: { summary: 'reviewed it' } },
        ],
      },
    };
    const v = await interactive(script, 80, true);
    await v.t.c.waitFor(v.rootId, ['waiting']);
    await v.t.advance(10);
    // The test times out if the prompt never says so.
    await v.drawn('lead waits for you › ');
    // The root's reply is printed once above the frame (it scrolls away with the terminal).
    expect(v.screen().split('lead:\n  What should I review?\n')).toHaveLength(2);
    const before = frames(v.screen())
      .frames.at(-1)!
      .filter((l) => !l.startsWith('\x1b[1G') && l !== 'lead:' && l !== '  What should I review?');
    v.input.write('hello there\r');
    await v.t.c.waitFor(v.rootId, ['completed']);
    await v.t.advance(10);
    await v.drawn('you → lead: hello there');
    v.view.stop();
    // The frame after Enter erased the frame and the prompt row the typed line is on.
    const after = frames(v.screen());
    const i = after.frames.findIndex((f) => f.some((l) => l.includes('you → lead: hello there')));
    expect(i).toBeGreaterThan(0);
    expect(after.erased[i]).toBe(before.length + 1);
    expect(after.frames.at(-1)!.join('\n')).toContain('you → lead: hello there');
  });
});

describe('the prompt: replies in full, Ctrl-C, Ctrl-D', () => {
  it("prints the root's whole reply above the frame, wrapped at word boundaries, once", async () => {
    const reply =
      'First finding: the parser accepts trailing commas everywhere.\nSecond: the cache is never invalidated after a schema change, which explains the stale reads.';
    const v = await interactive(
      {
        agents: {
          lead: [
            { tool: 'respond_to_user', args: { message: reply } },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      40,
    );
    await v.t.c.waitFor(v.rootId, ['waiting']);
    await v.t.advance(10);
    await v.drawn('lead waits for you');
    v.view.stop();
    const screen = v.screen();
    const start = screen.indexOf('lead:\n');
    expect(start).toBeGreaterThanOrEqual(0);
    const rows = screen.slice(start + 'lead:\n'.length).split('\n');
    const printed = rows.slice(
      0,
      rows.findIndex((r) => !r.startsWith('  ')),
    );
    // Every word of the reply, in order, none cut; every row fits 39 columns; its own line break kept.
    expect(printed.join(' ').split(/\s+/).filter(Boolean)).toEqual(reply.split(/\s+/));
    for (const row of printed) expect(stringWidth(row)).toBeLessThanOrEqual(39);
    expect(printed.length).toBeGreaterThan(3);
    expect(printed.some((r) => r.trimEnd().endsWith('everywhere.'))).toBe(true);
    expect(screen.split('First finding')).toHaveLength(2);
    // Not cut into the frame's line either.
    expect(screen).not.toContain('says: First finding');
  });

  it('Ctrl-C at the prompt is an interrupt; Ctrl-D ends input with a line saying what happens, and the prompt goes', async () => {
    const v = await interactive(
      {
        agents: {
          lead: [
            { tool: 'respond_to_user', args: { message: 'go on?' } },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      80,
    );
    await v.t.c.waitFor(v.rootId, ['waiting']);
    await v.t.advance(10);
    await v.drawn('lead waits for you › ');
    v.input.write('\x03');
    expect(v.calls.interrupts).toBe(1);
    v.input.write('still here\r');
    expect(v.calls.lines).toEqual(['still here']);
    v.input.write('\x04');
    await v.drawn('input closed (Ctrl-D): the run goes on without you');
    expect(v.calls.ends).toBe(1);
    const after = v.screen().slice(v.screen().indexOf('input closed (Ctrl-D)'));
    expect(after).not.toContain('waits for you ›');
    v.view.stop();
    // stop() closes nothing twice and says nothing more.
    expect(v.calls.ends).toBe(1);
  });
});

describe('a line for the user (an MCP server down)', () => {
  it('is printed above the live frame, whole; the piped and JSON views leave it to the caller', async () => {
    const t = team({ agents: { lead: [{ tool: 'finish', args: { summary: 'done' } }] } });
    let screen = '';
    const view = attachView(t.c, 'tty', { write: (s: string) => void (screen += s) }, { intervalMs: 0, columns: () => 40 });
    const line = 'MCP server "gone" failed to start (spawn /nonexistent ENOENT); the run goes on without its tools';
    expect(view.say(line)).toBe(true);
    view.stop();
    const rows = screen.split('\n');
    const at = rows.findIndex((r) => r.includes('MCP server "gone"'));
    expect(at).toBeGreaterThanOrEqual(0);
    // Wrapped, not cut, and above the frame that follows it.
    expect(
      rows
        .slice(at, at + 4)
        .join(' ')
        .replace(/\s+/g, ' '),
    ).toContain(line);
    expect(rows.slice(at).some((r) => r.startsWith('spent $'))).toBe(true);
    for (const mode of ['lines', 'json'] as const) {
      const other = attachView(t.c, mode, { write: () => undefined });
      expect(other.say(line)).toBe(false);
      other.stop();
    }
  });
});

describe('wrapWords', () => {
  it('keeps every word in order, fits each row, cuts only words wider than a row (property)', () => {
    const word = fc.stringMatching(/^[a-zé漢]{1,12}$/);
    fc.assert(
      fc.property(fc.array(fc.array(word, { maxLength: 12 }), { minLength: 1, maxLength: 4 }), fc.integer({ min: 8, max: 60 }), (paragraphs, columns) => {
        const text = paragraphs.map((p) => p.join(' ')).join('\n');
        const rows = wrapWords(text, columns, '  ');
        for (const row of rows) expect(stringWidth(row)).toBeLessThanOrEqual(columns - 1);
        const max = columns - 3;
        const words = paragraphs.flat();
        if (words.every((w) => stringWidth(w) <= max)) expect(rows.join(' ').split(/\s+/).filter(Boolean)).toEqual(words);
        else expect(rows.join('').replace(/\s+/g, '')).toBe(words.join(''));
        // The text's own line breaks are kept: its rows are its paragraphs' rows.
        const each = paragraphs.map((p) => wrapWords(p.join(' '), columns, '  '));
        expect(rows).toEqual(each.flat());
        // Within a paragraph, no row stopped while the next row's first word would have fitted.
        for (const prows of each)
          for (let i = 0; i + 1 < prows.length; i++) {
            const next = prows[i + 1]!.trim().split(' ')[0]!;
            if (stringWidth(next) <= max) expect(stringWidth(prows[i]!) + 1 + stringWidth(next)).toBeGreaterThan(columns - 1);
          }
      }),
    );
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

  it("the endpoint's breaker and a 429's pause name the endpoint (never its key's hash) and what the agents do", () => {
    const endpoint = 'http://127.0.0.1:9/v1#0123456789ab';
    expect(eventLine({ type: 'provider.breaker', endpoint, state: 'open', failures: 5, openSince: 0, at: 0 })).toBe(
      'provider   http://127.0.0.1:9/v1 is down (5 failures in a row): circuit open, calls wait for a probe',
    );
    expect(eventLine({ type: 'provider.breaker', endpoint, state: 'closed', failures: 0, openSince: null, at: 0 })).toBe(
      'provider   http://127.0.0.1:9/v1 answers again: circuit closed, calls resume',
    );
    expect(eventLine({ type: 'provider.quota', endpoint, state: 'paused', until: Date.UTC(2026, 0, 1, 12, 0, 5), at: 0 })).toBe(
      'provider   http://127.0.0.1:9/v1 said 429: paused for every agent until 2026-01-01T12:00:05.000Z',
    );
  });
});
