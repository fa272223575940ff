/**
 * Agent profiles (issue 34 item 4): named agent definitions a spawn may name — a description the
 * model reads in spawn_agent's tool description, a system prompt appended to the run's, a model
 * its main calls go to (priced as that model), the user tools it may call, and its turn limit.
 * Validated with the run's options; the profile an agent was spawned with is persisted in its
 * terms, and looked up again by name at resume.
 * @module
 */
import { ConfigError, TroupeError } from '../errors.js';
import { requirePriceForBudget } from '../model/prices.js';
import type { Model, ModelPrice } from '../model/types.js';
import { isMcpServer, type McpServer } from '../mcp/config.js';
import type { Tool } from '../tools/defineTool.js';

export interface AgentProfile {
  /** Shown to the model in spawn_agent's description, so it can choose. */
  description: string;
  /** Appended to the run's `systemPrompt` (which every agent keeps) for agents of this profile. */
  systemPrompt?: string;
  /** Where this agent's main calls go, priced as this model (compaction and review: `auxiliaryModel` if set, else this). */
  model?: Model;
  /**
   * The user tools (by tool or MCP server name) it and its descendants may call. The built-in tools
   * (spawn_agent, send_message, wait_for_agents, finish …) stay offered as to any agent. Default: all.
   */
  tools?: string[];
  /** Its own `maxTurns` per stint (the run's `limits.maxTurns` otherwise). */
  limits?: { maxTurns?: number };
}

export interface ResolvedProfile {
  readonly name: string;
  readonly description: string;
  readonly systemPrompt: string | undefined;
  readonly model: Model | null;
  readonly tools: readonly string[] | null;
  readonly maxTurns: number | null;
}

/** A profile name: letters, digits, `_` and `-`, 1..64 characters (it is written in tool calls). */
const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const KEYS = new Set(['description', 'systemPrompt', 'model', 'tools', 'limits']);

const show = (value: unknown) => `${typeof value === 'string' ? JSON.stringify(value) : String(value)} (${typeof value})`;

/** The names a profile's `tools` may use: each user tool's and each MCP server's (its tools, listed only at start, by its prefix). */
function toolNames(tools: readonly (Tool | McpServer)[]): { known: Set<string>; has(name: string): boolean } {
  const known = new Set<string>();
  const servers: string[] = [];
  for (const t of tools) {
    if (isMcpServer(t)) {
      known.add(t.options.name);
      servers.push(`${t.options.name}__`);
    } else if (t && typeof t.name === 'string') known.add(t.name);
  }
  return { known, has: (name) => known.has(name) || servers.some((prefix) => name.startsWith(prefix)) };
}

/** `profiles` validated; throws ConfigError naming the first invalid one. */
export function resolveProfiles(
  value: unknown,
  ctx: { tools: readonly (Tool | McpServer)[]; prices: Record<string, ModelPrice>; limitUsd: number | null },
): ReadonlyMap<string, ResolvedProfile> {
  const out = new Map<string, ResolvedProfile>();
  if (value === undefined) return out;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(`Expected profiles to be an object keyed by profile name, got ${show(value)}`);
  }
  const known = toolNames(ctx.tools);
  for (const [name, given] of Object.entries(value as Record<string, unknown>)) {
    const at = `profiles[${JSON.stringify(name)}]`;
    if (!NAME.test(name)) throw new ConfigError(`Expected profile names of 1..64 letters, digits, _ or -, got ${JSON.stringify(name)}`);
    if (typeof given !== 'object' || given === null || Array.isArray(given)) throw new ConfigError(`Expected ${at} to be an object, got ${show(given)}`);
    const p = given as Record<string, unknown>;
    for (const key of Object.keys(p)) if (!KEYS.has(key)) throw new ConfigError(`Unknown option ${at}.${key}`);
    if (typeof p.description !== 'string' || p.description.trim() === '') {
      throw new ConfigError(`Expected ${at}.description to be a non-empty string, got ${show(p.description)}`);
    }
    if (p.systemPrompt !== undefined && typeof p.systemPrompt !== 'string') {
      throw new ConfigError(`Expected ${at}.systemPrompt to be a string, got ${show(p.systemPrompt)}`);
    }
    const model = p.model === undefined ? null : (p.model as Model);
    if (model !== null) {
      if (typeof model !== 'object' || typeof model.complete !== 'function') {
        throw new ConfigError(`Expected ${at}.model to be an object with a complete(request, { signal }) method, got ${show(p.model)}`);
      }
      // Its calls count against the run's limit: one it cannot price would spend unseen.
      requirePriceForBudget(model, ctx.prices, ctx.limitUsd, `budget.limitUsd (${at}.model)`);
    }
    let tools: string[] | null = null;
    if (p.tools !== undefined) {
      if (!Array.isArray(p.tools) || !p.tools.every((t) => typeof t === 'string')) {
        throw new ConfigError(`Expected ${at}.tools to be a list of tool or MCP server names, got ${show(p.tools)}`);
      }
      const unknown = p.tools.filter((t) => !known.has(t as string));
      if (unknown.length > 0) {
        throw new ConfigError(
          `${at}.tools names ${unknown.map((t) => JSON.stringify(t)).join(', ')}, which is neither a tool nor an MCP server of this run (known: ${[...known.known].join(', ') || 'none'})`,
        );
      }
      tools = [...(p.tools as string[])];
    }
    let maxTurns: number | null = null;
    if (p.limits !== undefined) {
      if (typeof p.limits !== 'object' || p.limits === null || Array.isArray(p.limits)) {
        throw new ConfigError(`Expected ${at}.limits to be { maxTurns? }, got ${show(p.limits)}`);
      }
      const limits = p.limits as Record<string, unknown>;
      for (const key of Object.keys(limits)) if (key !== 'maxTurns') throw new ConfigError(`Unknown option ${at}.limits.${key} (a profile sets maxTurns only)`);
      const turns = limits.maxTurns;
      if (turns !== undefined) {
        if (typeof turns !== 'number' || !Number.isInteger(turns) || turns < 1) {
          throw new ConfigError(`Expected ${at}.limits.maxTurns to be an integer >= 1, got ${show(turns)}`);
        }
        maxTurns = turns;
      }
    }
    out.set(name, { name, description: p.description, systemPrompt: p.systemPrompt as string | undefined, model, tools, maxTurns });
  }
  return out;
}

/** The profile an agent was given, or null; a name the run no longer configures is PROFILE_UNKNOWN. */
export function profileOf(profiles: ReadonlyMap<string, ResolvedProfile>, name: string | undefined): ResolvedProfile | null {
  if (name === undefined) return null;
  const profile = profiles.get(name);
  if (!profile) throw unknownProfile(profiles, name);
  return profile;
}

function unknownProfile(profiles: ReadonlyMap<string, ResolvedProfile>, name: string): TroupeError {
  const known = [...profiles.keys()];
  return new TroupeError('PROFILE_UNKNOWN', `No profile ${JSON.stringify(name)} in this run (profiles: ${known.join(', ') || 'none configured'})`);
}

/** spawn_agent's description of the profiles (name and description each), or '' with none. */
export function describeProfiles(profiles: ReadonlyMap<string, ResolvedProfile>): string {
  if (profiles.size === 0) return '';
  const lines = [...profiles.values()].map((p) => `- ${p.name}: ${p.description.replace(/\s+/g, ' ').trim()}`);
  return ` Profiles you may give it (\`profile\`):\n${lines.join('\n')}`;
}
