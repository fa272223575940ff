/**
 * The JSON Schema of `troupe.config.json`: one schema checks the whole file (ajv, already the tool
 * argument validator), so a typo anywhere (`"budget": { "limtUsd": 5 }`) is refused with its path
 * instead of silently meaning nothing. The package ships it as
 * `fixtures/troupe.config.schema.json` (generated from this constant, kept equal by a test) for
 * editors: `"$schema": "./node_modules/troupe/fixtures/troupe.config.schema.json"`.
 * Proactive triggers are checked by `parseProactiveConfig` (their keys come in two spellings).
 * @module
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import { loadAjv } from '../tools/defineTool.js';
import { ConfigError } from '../errors.js';

const positiveInt = { type: 'integer', minimum: 1 } as const;
const usdPer1M = { type: 'number', minimum: 0 } as const;
const approvalRuleProperties = {
  ask: { type: 'array', items: { enum: ['mutation', 'destructive'] }, uniqueItems: true },
  allow: { type: 'array', items: { type: 'string', minLength: 1 } },
  unattended: { enum: ['refuse', 'ask'] },
  windowMs: { type: 'integer', minimum: 0 },
} as const;

export const CONFIG_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'troupe.config.json',
  description: 'Settings of the troupe command (troupe run, resume, serve). Flags and OPENAI_API_KEY / OPENAI_BASE_URL override them.',
  type: 'object',
  additionalProperties: false,
  properties: {
    $schema: { type: 'string', description: 'This schema, for editors.' },
    model: { type: 'string', minLength: 1, description: 'The model name sent to the server.' },
    baseURL: { type: 'string', minLength: 1, description: 'Any OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 for Ollama.' },
    apiKey: { type: 'string', description: 'The API key (chmod 600 the file); OPENAI_API_KEY is preferred.' },
    stream: { type: 'boolean', description: 'Stream answers: text shows as it is written.' },
    maxOutputTokens: { ...positiveInt, description: 'Output tokens per call (also what the budget reserves per call).' },
    timeoutMs: { ...positiveInt, description: 'Per-request timeout; default 600000.' },
    idleTimeoutMs: {
      ...positiveInt,
      description:
        'Streaming: no byte from the server for this long (before the first chunk or between two) ends the attempt as PROVIDER_TIMEOUT, retried; default 120000.',
    },
    auxiliaryModel: {
      type: 'string',
      minLength: 1,
      description: 'A cheaper model on the same server for compaction and background review (priced through budget.prices like the main one).',
    },
    contextWindow: {
      ...positiveInt,
      description: "The model's context window in tokens: a session is compacted before a call passes session.compactAt of it.",
    },
    session: {
      type: 'object',
      additionalProperties: false,
      description: 'How sessions are kept before each call.',
      properties: {
        maxImages: { type: ['integer', 'null'], minimum: 0, description: 'Images kept per session, the newest (default 20; null: all).' },
        compactAt: {
          type: 'number',
          exclusiveMinimum: 0,
          maximum: 1,
          description: 'Share of contextWindow at which a session is compacted first (default 0.8).',
        },
      },
    },
    interactive: { type: 'boolean', description: 'A human is attached: agents park, finished agents can be revived.' },
    budget: {
      type: 'object',
      additionalProperties: false,
      description: 'A spending limit that cannot be blown (README, Budget).',
      properties: {
        limitUsd: { type: 'number', exclusiveMinimum: 0, description: 'The limit in USD.' },
        reserveFraction: {
          type: 'number',
          exclusiveMinimum: 0,
          maximum: 1,
          description: 'Share of the limit at which every sub-agent is stopped; default 0.9.',
        },
        policy: { enum: ['stop', 'pause'], description: 'stop (default) or pause at the limit.' },
        prices: {
          type: 'object',
          description: 'USD per 1M tokens by model name (or name prefix); needed for models troupe has no price for (every local model).',
          additionalProperties: {
            type: 'object',
            additionalProperties: false,
            required: ['inputPer1M', 'outputPer1M'],
            properties: { inputPer1M: usdPer1M, outputPer1M: usdPer1M, cachedInputPer1M: usdPer1M },
          },
        },
      },
    },
    limits: {
      type: 'object',
      additionalProperties: false,
      description: 'As createCoordinator limits.',
      properties: {
        maxDepth: positiveInt,
        maxChildren: positiveInt,
        maxAgents: positiveInt,
        maxTurns: positiveInt,
        maxMessageBytes: positiveInt,
        maxMailbox: positiveInt,
        maxResultTries: positiveInt,
      },
    },
    concurrency: {
      type: 'object',
      additionalProperties: false,
      description: 'Model and tool calls at once.',
      properties: {
        model: positiveInt,
        tools: positiveInt,
        adaptive: { type: 'boolean', description: 'Fewer model calls at once while the event loop lags.' },
      },
    },
    rateLimit: {
      type: 'object',
      additionalProperties: false,
      description: 'At most `requests` model calls per `intervalMs`.',
      required: ['requests', 'intervalMs'],
      properties: { requests: positiveInt, intervalMs: positiveInt },
    },
    approvals: {
      description:
        'Which steps ask a person (default: destructive ones; refused in runs without a user unless allowed); `agents` gives agents, by name or profile, their own; false: none.',
      // Rules or false, without oneOf: a typo inside the rules is then reported at its own path.
      type: ['object', 'boolean'],
      not: { const: true },
      additionalProperties: false,
      properties: {
        ...approvalRuleProperties,
        agents: {
          type: 'object',
          description:
            "Per agent: the rules of the agents whose name, or else profile, matches the key (`name*`: a prefix); each field replaces the run's, `allow` adds to it.",
          propertyNames: { minLength: 1, not: { const: '*' } },
          additionalProperties: { type: 'object', additionalProperties: false, properties: approvalRuleProperties },
        },
      },
    },
    quota: {
      type: 'object',
      additionalProperties: false,
      description: "Per model endpoint (API key), shared by the process's runs and a PostgreSQL cluster; a 429's retry-after pauses it for all.",
      properties: { requestsPerMinute: positiveInt, tokensPerMinute: positiveInt },
    },
    profiles: {
      type: 'object',
      description: 'Named agent definitions spawn_agent can name: { description, systemPrompt?, model? (on the same server), tools?, limits?: { maxTurns? } }.',
      propertyNames: { pattern: '^[A-Za-z0-9_-]{1,64}$' },
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['description'],
        properties: {
          description: { type: 'string', minLength: 1 },
          systemPrompt: { type: 'string' },
          model: { type: 'string', minLength: 1 },
          tools: { type: 'array', items: { type: 'string', minLength: 1 } },
          limits: { type: 'object', additionalProperties: false, properties: { maxTurns: positiveInt } },
        },
      },
    },
    breaker: {
      description: "The model endpoint's circuit breaker, shared by the process's runs and a PostgreSQL cluster; false: none.",
      oneOf: [
        { const: false },
        {
          type: 'object',
          additionalProperties: false,
          properties: { failureThreshold: positiveInt, cooldownMs: positiveInt, openTimeoutMs: positiveInt },
        },
      ],
    },
    idleResumeMs: { ...positiveInt, description: 'Idle auto-resume of waits on agents; default 300000.' },
    db: { type: 'string', minLength: 1, description: 'The database file; default .troupe/troupe.db.' },
    review: {
      type: 'object',
      additionalProperties: false,
      description: 'Background review every N productive turns.',
      required: ['everyTurns'],
      properties: { everyTurns: positiveInt, maxSteps: { type: 'integer', minimum: 1, maximum: 10 }, subAgents: { type: 'boolean' } },
    },
    notes: {
      description: "What a new run's root reads of the promoted notes (troupe notes): { maxChars } (default 4000), or false for none.",
      oneOf: [{ const: false }, { type: 'object', additionalProperties: false, properties: { maxChars: positiveInt } }],
    },
    proactive: {
      type: 'object',
      additionalProperties: false,
      description: 'troupe serve: triggers that start or message runs.',
      properties: { enabled: { type: 'boolean' }, triggers: { type: 'array', items: { type: 'object' } } },
    },
    watchdog: {
      type: 'object',
      additionalProperties: false,
      description: 'troupe serve: health checks.',
      properties: { intervalMs: { type: 'integer', minimum: 1, maximum: 2_147_483_647 }, failureThreshold: positiveInt },
    },
    strictMcp: {
      type: 'boolean',
      description: 'An MCP server that fails to start ends the run with MCP_SERVER_UNAVAILABLE instead of going on without its tools, as --strict-mcp.',
    },
    otel: { type: 'boolean', description: 'Export OpenTelemetry spans and metrics over OTLP/HTTP, as --otel (run, resume, serve; demo: --otel only).' },
    mcpServers: {
      type: 'object',
      description:
        'MCP servers by name: { command, args?, env?, cwd? } or { url, headers? }, plus tools?, connectTimeoutMs?, maxResultChars?, maxTools?, maxListPages?. Never saved with a run.',
      additionalProperties: { type: 'object' },
    },
  },
} as const;

// Compiled on first use, not at import: every CLI command imports this module, and only those
// that read a config file need the validator (compiling it is a good share of a command's start).
let compiled: ValidateFunction | null = null;
const validator = (): ValidateFunction => (compiled ??= new (loadAjv())({ allErrors: false, strict: false, verbose: true }).compile(CONFIG_SCHEMA));

/** `/budget/prices/m` → `budget.prices["m"]`. */
function fieldPath(pointer: string): string {
  const parts = pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  return parts.reduce(
    (out, p) => (/^\d+$/.test(p) ? `${out}[${p}]` : /^[A-Za-z_$][\w$]*$/.test(p) ? (out ? `${out}.${p}` : p) : `${out}[${JSON.stringify(p)}]`),
    '',
  );
}

function describe(error: ErrorObject, data: unknown): { field: string; message: string } {
  const field = fieldPath(error.instancePath);
  const where = field || 'the top level';
  const value = error.instancePath
    .split('/')
    .slice(1)
    .reduce<unknown>((v, k) => (v as Record<string, unknown> | undefined)?.[k], data);
  switch (error.keyword) {
    case 'additionalProperty':
    case 'additionalProperties': {
      const key = String((error.params as { additionalProperty: string }).additionalProperty);
      const known = Object.keys(((error.parentSchema as { properties?: object } | undefined)?.properties ?? {}) as object);
      return { field: field ? `${field}.${key}` : key, message: `${where} has an unknown key "${key}"${known.length ? ` (known: ${known.join(', ')})` : ''}` };
    }
    case 'required': {
      const key = String((error.params as { missingProperty: string }).missingProperty);
      return { field: field ? `${field}.${key}` : key, message: `${field ? `${field}.` : ''}${key} is required` };
    }
    default:
      return { field, message: `${where} ${error.message ?? 'is invalid'}, got ${JSON.stringify(value)}` };
  }
}

/** Check a parsed config file against CONFIG_SCHEMA; ConfigError naming the file and the field. */
export function checkConfig(data: unknown, file: string): void {
  const validate = validator();
  if (validate(data)) return;
  const { field, message } = describe(validate.errors![0]!, data);
  throw new ConfigError(`${file}: ${message}`, { details: { field } });
}
