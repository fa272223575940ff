/**
 * The demo's story holds on resume: the lead's "read every report" step (marked `awaits`) is not
 * served before scout's and flaky's reports are in its request — the lead waits again instead —
 * so the reserve cannot trip before scout reports while the final report says scout mapped it.
 */
import { describe, expect, it } from 'vitest';
import { demoScript, holdForReports } from '../../../src/cli/demoModel.js';
import type { FakeReply, FakeRequest } from '../../../src/testing/fakeOpenAIServer.js';

const request = (agent: string, ...said: string[]): FakeRequest =>
  ({
    index: 0,
    method: 'POST',
    path: '/v1/chat/completions',
    headers: {},
    body: { messages: [{ role: 'system', content: `You are ${agent} (id x).` }, ...said.map((content) => ({ role: 'user', content }))] },
    at: 0,
  }) as unknown as FakeRequest;

const tool = (reply: FakeReply) => (reply as { message?: { toolCalls?: { name: string; arguments: { reason?: string } }[] } }).message?.toolCalls?.[0];
const usage = (reply: FakeReply) => (reply as { usage?: { promptTokens: number } }).usage?.promptTokens;

describe('the demo on resume', () => {
  it('the reading step waits for the reports it reads; served once they are in the request', async () => {
    const script = demoScript();
    const summary = (name: string) => (script.agents[name]!.find((s) => s.tool === 'agent_finish')!.args as { summary: string }).summary;
    // Resumed after the lead's first five answers: its next step is the one that reads everything.
    const serve = holdForReports(script, { lead: 5 });
    const early = await serve(request('lead', `flaky reported: ${summary('flaky')}`));
    expect(tool(early)?.arguments.reason).toBe('the reports I still need');
    expect(usage(early)).toBe(100);
    const ready = await serve(request('lead', `flaky reported: ${summary('flaky')}`, `scout reported: ${summary('scout')}`));
    expect(usage(ready)).toBe(205_000);
    expect(tool(await serve(request('lead')))?.name).toBe('finish');
  });
});
