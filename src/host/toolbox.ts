/**
 * The tools of a run: the user's tools (`defineTool` tools and the tools of MCP servers, held by
 * the catalog, mcp/catalog.ts) and the list each agent is offered — one list object for every root
 * and one for every child with the same tool sets, until the user tools change (an MCP server
 * connects or lists new tools), so a request can reuse it (and a provider's prompt cache sees the
 * same bytes). An agent's tool sets (`tools:` skills) narrow what it and its descendants may call.
 * @module
 */
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { inSets, toolSetOf, ToolCatalog } from '../mcp/catalog.js';
import type { McpServer } from '../mcp/config.js';
import type { JsonSchema, ToolSpec } from '../model/types.js';
import type { AgentTerms } from '../store/types.js';
import { BUILTIN_TOOLS, withValueParameter } from '../tools/builtin.js';
import { canSpawn, type OfferedRun } from '../tools/builtinKit.js';
import { SPAWN_TOOLS } from '../tools/builtinSpawn.js';
import { FINISH_TOOLS } from '../turn/finishValue.js';
import { toToolSpec, type CompiledTool, type Tool } from '../tools/defineTool.js';
import type { AgentRef } from '../turn/ports.js';
import { describeProfiles, type ResolvedProfile } from './profiles.js';

/** What the toolbox reads of an agent: its tool sets and its parent's, and its output schema. */
interface ToolAgent {
  readonly skills: readonly string[];
  readonly parentId: string | null;
  readonly terms: AgentTerms | null;
}

export class Toolbox {
  readonly catalog: ToolCatalog;
  /** What of the run's options decides which built-ins an agent is offered. */
  readonly #run: OfferedRun;
  readonly #find: (id: string) => ToolAgent | undefined;
  readonly #specs = new Map<string, ToolSpec[]>();
  #specsVersion = -1;
  /** Each agent's tool sets: its skills and its ancestors' never change, and both lookups of a turn read them. */
  readonly #sets = new Map<string, readonly (readonly string[])[]>();
  /** The lists of agents with an output schema, each made from the shared list it was built on. */
  readonly #own = new Map<string, { shared: readonly ToolSpec[]; specs: readonly ToolSpec[] }>();
  readonly #profiles: ReadonlyMap<string, ResolvedProfile>;
  /** The spawn tools' specs, made for the run's profiles (spawnSpecs). */
  readonly #spawnSpecs: ReadonlyMap<string, ToolSpec>;

  constructor(
    definitions: readonly (Tool | McpServer)[],
    deps: {
      interactive: boolean;
      /** limits.maxDepth: an agent at it is not offered the spawn tools. */
      maxDepth: number;
      clock: Clock;
      logger: Logger;
      find: (id: string) => ToolAgent | undefined;
      profiles?: ReadonlyMap<string, ResolvedProfile>;
    },
  ) {
    this.catalog = new ToolCatalog(definitions, { clock: deps.clock, logger: deps.logger, reserved: new Set(BUILTIN_TOOLS.keys()) });
    this.#run = { interactive: deps.interactive, maxDepth: deps.maxDepth };
    this.#find = deps.find;
    this.#profiles = deps.profiles ?? new Map();
    this.#spawnSpecs = spawnSpecs(this.#profiles);
  }

  names(agent: Pick<AgentRef, 'id' | 'name' | 'parentId' | 'depth'>): string[] {
    return this.specs(agent).map((t) => t.name);
  }

  /** The tools an agent is offered: a function of its parent, depth and tool sets, and the run's options. */
  specs(agent: Pick<AgentRef, 'id' | 'name' | 'parentId' | 'depth'>): readonly ToolSpec[] {
    if (this.#specsVersion !== this.catalog.version) {
      this.#specs.clear();
      this.#specsVersion = this.catalog.version;
    }
    const sets = this.#toolSets(agent);
    // One list per kind of agent: root or child, below maxDepth or at it (no spawn tools), its tool sets.
    const kind = `${agent.parentId === null ? 'root' : 'child'}${canSpawn(agent, this.#run) ? '' : '-leaf'}`;
    const key = `${kind}${sets.length === 0 ? '' : JSON.stringify(sets)}`;
    let specs = this.#specs.get(key);
    if (!specs) {
      specs = [];
      for (const tool of BUILTIN_TOOLS.values()) {
        if (tool.offeredTo(agent, this.#run)) specs.push(this.#spawnSpecs.get(tool.name) ?? toToolSpec(tool as never));
      }
      for (const entry of this.catalog.values()) if (inSets(entry, sets)) specs.push(toToolSpec(entry.tool));
      this.#specs.set(key, specs);
    }
    const output = this.#find(agent.id)?.terms?.output;
    return output === undefined ? specs : this.#withOutput(agent.id, specs, output);
  }

  /** An agent with an output schema has its own list: its finish tool shows the schema as `value` (the others are shared). */
  #withOutput(id: string, shared: readonly ToolSpec[], output: JsonSchema): readonly ToolSpec[] {
    const known = this.#own.get(id);
    if (known && known.shared === shared) return known.specs;
    const specs = shared.map((spec) => (FINISH_TOOLS.has(spec.name) ? withValueParameter(spec, output) : spec));
    this.#own.set(id, { shared, specs });
    return specs;
  }

  /** A user tool the agent may call (its tool sets and its ancestors' allow it), by name. */
  userTool(agent: Pick<AgentRef, 'id' | 'parentId'>, name: string): CompiledTool | undefined {
    const entry = this.catalog.get(name);
    return entry && inSets(entry, this.#toolSets(agent)) ? entry.tool : undefined;
  }

  /** The tool sets (`tools:` skills, a profile's `tools`) of the agent and its ancestors; none for most agents. */
  #toolSets(agent: Pick<AgentRef, 'id' | 'parentId'>): readonly (readonly string[])[] {
    const known = this.#sets.get(agent.id);
    if (known) return known;
    const sets: string[][] = [];
    for (let h = this.#find(agent.id); h; h = h.parentId === null ? undefined : this.#find(h.parentId)) {
      const set = toolSetOf(h.skills);
      if (set) sets.push(set);
      // Its profile's tools narrow it as a tool set would (a profile no longer configured: the turn's model call fails it).
      const profile = h.terms?.profile === undefined ? undefined : this.#profiles.get(h.terms.profile);
      if (profile?.tools) sets.push([...profile.tools]);
    }
    const found = sets.length === 0 ? NO_SETS : sets;
    // Only agents the run knows (a lookup for an unknown id is not kept).
    if (this.#find(agent.id)) this.#sets.set(agent.id, found);
    return found;
  }
}

const NO_SETS: readonly (readonly string[])[] = [];

/**
 * The spawn tools' specs (spawn_agent, spawn_agents' entries): with profiles, spawn_agent's
 * description lists them and `profile` names one of them; without, there is no `profile`.
 */
function spawnSpecs(profiles: ReadonlyMap<string, ResolvedProfile>): ReadonlyMap<string, ToolSpec> {
  return new Map(
    SPAWN_TOOLS.map((tool) => {
      const spec = toToolSpec(tool as never);
      // The profiles are described once, in spawn_agent's description (spawn_agents' entries name them by the same enum).
      const description = profiles.size === 0 || tool.name !== 'spawn_agent' ? spec.description : `${spec.description}${describeProfiles(profiles)}`;
      return [tool.name, { ...spec, description, parameters: withProfiles(spec.parameters, profiles) }];
    }),
  );
}

type ObjectSchema = JsonSchema & { properties: Record<string, JsonSchema> };

/** A spawn tool's parameters (or its `agents` entries') with `profile` narrowed to the run's profiles, or without it. */
function withProfiles(parameters: JsonSchema, profiles: ReadonlyMap<string, ResolvedProfile>): JsonSchema {
  const { profile, agents, ...others } = (parameters as ObjectSchema).properties;
  const properties: Record<string, JsonSchema> = { ...others };
  if (agents !== undefined) {
    const list = agents as JsonSchema & { items: JsonSchema };
    properties.agents = { ...list, items: withProfiles(list.items, profiles) };
  }
  if (profile !== undefined && profiles.size > 0) properties.profile = { ...profile, enum: [...profiles.keys()] };
  return { ...parameters, properties };
}
