/**
 * The config file is checked whole by one schema: a typo anywhere is refused with its path; and a
 * budget that cannot bind (no price for the model) is refused with the fix.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfigFile, parsePrice, requirePrice } from '../../../src/cli/config.js';
import { coordinatorOptions, fromFlags } from '../../../src/cli/setup.js';

function file(content: unknown): string {
  const path = join(mkdtempSync(join(tmpdir(), 'troupe-config-')), 'troupe.config.json');
  writeFileSync(path, JSON.stringify(content));
  return path;
}

const refusal = (content: unknown) => {
  try {
    loadConfigFile(file(content));
  } catch (err) {
    return {
      message: (err as Error).message.replace(/^.*troupe\.config\.json: /, ''),
      code: (err as { code?: string }).code,
      field: (err as { details?: { field?: string } }).details?.field,
    };
  }
  return null;
};

describe('the config schema', () => {
  it.each([
    [{ budget: { limtUsd: 5 } }, 'budget.limtUsd', 'budget has an unknown key "limtUsd" (known: limitUsd, reserveFraction, policy, prices)'],
    [{ modle: 'x' }, 'modle', 'the top level has an unknown key "modle"'],
    [{ limits: { maxDepht: 2 } }, 'limits.maxDepht', 'limits has an unknown key "maxDepht"'],
    [{ budget: { limitUsd: '5' } }, 'budget.limitUsd', 'budget.limitUsd must be number, got "5"'],
    [
      { budget: { prices: { 'qwen2.5:7b': { inputPer1M: 1 } } } },
      'budget.prices["qwen2.5:7b"].outputPer1M',
      'budget.prices["qwen2.5:7b"].outputPer1M is required',
    ],
    [{ rateLimit: { requests: 0, intervalMs: 1000 } }, 'rateLimit.requests', 'rateLimit.requests must be >= 1, got 0'],
    [{ quota: { requestsPerMinute: 0 } }, 'quota.requestsPerMinute', 'quota.requestsPerMinute must be >= 1, got 0'],
    [{ watchdog: { intervalMs: 1, extra: true } }, 'watchdog.extra', 'watchdog has an unknown key "extra"'],
    [{ approvals: true }, 'approvals', 'approvals must NOT be valid, got true'],
    [{ approvals: { agents: { ops: { alow: [] } } } }, 'approvals.agents.ops.alow', 'approvals.agents.ops has an unknown key "alow"'],
    [{ profiles: { cheap: { systemPrompt: 'x' } } }, 'profiles.cheap.description', 'profiles.cheap.description is required'],
    [{ profiles: { cheap: { description: 'd', model: 7 } } }, 'profiles.cheap.model', 'profiles.cheap.model must be string'],
    [{ breaker: { cooldownMs: 0 } }, 'breaker', 'breaker'],
  ])('%j is refused naming %s', (content, field, message) => {
    const r = refusal(content);
    expect(r).toMatchObject({ code: 'CONFIG_INVALID', field });
    expect(r!.message.startsWith(message), r!.message).toBe(true);
  });

  it('a file that uses every documented key (and $schema) is accepted as it is', () => {
    const config = {
      $schema: './node_modules/troupe/fixtures/troupe.config.schema.json',
      model: 'gpt-4.1-mini',
      baseURL: 'https://api.openai.com/v1',
      apiKey: 'sk-x',
      stream: true,
      maxOutputTokens: 4096,
      timeoutMs: 60_000,
      interactive: false,
      budget: { limitUsd: 5, policy: 'stop', reserveFraction: 0.9, prices: { m: { inputPer1M: 1, outputPer1M: 2, cachedInputPer1M: 0.5 } } },
      limits: { maxDepth: 4, maxChildren: 8, maxAgents: 64, maxTurns: 100, maxMessageBytes: 65536, maxMailbox: 1000 },
      concurrency: { model: 8, tools: 16 },
      rateLimit: { requests: 60, intervalMs: 60000 },
      quota: { requestsPerMinute: 500, tokensPerMinute: 200000 },
      idleResumeMs: 300000,
      review: { everyTurns: 5, maxSteps: 3 },
      db: '.troupe/troupe.db',
      proactive: { enabled: false, triggers: [] },
      watchdog: { intervalMs: 30000, failureThreshold: 3 },
      approvals: {
        ask: ['destructive'],
        allow: ['read_*'],
        unattended: 'refuse',
        windowMs: 60000,
        agents: { 'ops*': { ask: ['mutation', 'destructive'], allow: ['drop_table'] } },
      },
      auxiliaryModel: 'gpt-4.1-nano',
      profiles: { cheap: { description: 'Quick lookups.', systemPrompt: 'Only look up.', model: 'gpt-4.1-nano', tools: ['fs'], limits: { maxTurns: 5 } } },
      breaker: { failureThreshold: 5, cooldownMs: 30_000, openTimeoutMs: 600_000 },
    };
    const { $schema: _schema, ...rest } = config;
    expect(loadConfigFile(file(config))).toEqual(rest);
  });
});

describe('profiles in the config file', () => {
  it("become the coordinator's profiles, each model a model on the run's server, the auxiliary model set once", () => {
    const config = loadConfigFile(
      file({
        model: 'big',
        baseURL: 'http://127.0.0.1:9/v1',
        auxiliaryModel: 'tiny',
        profiles: {
          cheap: { description: 'Quick lookups.', systemPrompt: 'Only look up.', model: 'small', limits: { maxTurns: 5 } },
          same: { description: 'Like you.' },
        },
      }),
    );
    const options = coordinatorOptions(config);
    expect(options.auxiliaryModel?.name).toBe('tiny');
    const { cheap, same } = options.profiles!;
    expect(cheap).toMatchObject({ description: 'Quick lookups.', systemPrompt: 'Only look up.', limits: { maxTurns: 5 } });
    expect(cheap!.model).toMatchObject({ name: 'small', endpoint: options.auxiliaryModel!.endpoint });
    expect(same).toEqual({ description: 'Like you.' });
  });
});

describe('a budget must be able to bind', () => {
  it('a limit with a model troupe has no price for is refused, naming --price and budget.prices', () => {
    expect(() => requirePrice({ model: 'qwen2.5:7b', budget: { limitUsd: 5 } })).toThrow(
      /no price for the model "qwen2.5:7b".*--price <input>,<output>.*"budget": \{ "prices"/,
    );
  });

  it('a known model, a price from --price or from the config, or no limit: accepted', () => {
    expect(() => requirePrice({ model: 'gpt-4.1-mini-2025-04-14', budget: { limitUsd: 5 } })).not.toThrow();
    expect(() => requirePrice({ model: 'qwen2.5:7b', ...fromFlags({ budget: '5', price: '0.1,0.4' }, 'qwen2.5:7b') })).not.toThrow();
    expect(() => requirePrice({ model: 'qwen2.5:7b', budget: { limitUsd: 5, prices: { 'qwen2.5:7b': { inputPer1M: 0, outputPer1M: 0 } } } })).not.toThrow();
    expect(() => requirePrice({ model: 'qwen2.5:7b' })).not.toThrow();
  });

  it('--price: two or three numbers >= 0', () => {
    expect(parsePrice('0.15,0.6')).toEqual({ inputPer1M: 0.15, outputPer1M: 0.6 });
    expect(parsePrice('1, 2, 0.5')).toEqual({ inputPer1M: 1, outputPer1M: 2, cachedInputPer1M: 0.5 });
    for (const bad of ['1', '1,', 'a,b', '1,-2', '1,2,3,4']) expect(() => parsePrice(bad), bad).toThrow(/Expected --price/);
  });
});
