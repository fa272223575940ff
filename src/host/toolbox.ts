/**
 * The tools of a run: the user's tools compiled once (names unique, no built-in shadowed), and the
 * list each agent is offered — one list object for every root and one for every child, so a
 * request can reuse it (and a provider's prompt cache sees the same bytes).
 * @module
 */
import { ConfigError } from '../errors.js';
import type { ToolSpec } from '../model/types.js';
import { BUILTIN_TOOLS } from '../tools/builtin.js';
import { compileTool, toToolSpec, type CompiledTool, type Tool } from '../tools/defineTool.js';
import type { AgentRef } from '../turn/ports.js';

export class Toolbox {
  readonly tools: ReadonlyMap<string, CompiledTool>;
  readonly #interactive: boolean;
  readonly #specs = new Map<'root' | 'child', ToolSpec[]>();

  constructor(definitions: readonly Tool[], interactive: boolean) {
    const tools = new Map<string, CompiledTool>();
    for (const tool of definitions) {
      const compiled = compileTool(tool);
      if (BUILTIN_TOOLS.has(compiled.name) || tools.has(compiled.name)) {
        throw new ConfigError(`Expected tool names to be unique and not shadow a built-in, got "${compiled.name}" twice`);
      }
      tools.set(compiled.name, compiled);
    }
    this.tools = tools;
    this.#interactive = interactive;
  }

  names(agent: Pick<AgentRef, 'id' | 'name' | 'parentId'>): string[] {
    return this.specs(agent).map((t) => t.name);
  }

  /** The tools an agent is offered. */
  specs(agent: Pick<AgentRef, 'id' | 'name' | 'parentId'>): readonly ToolSpec[] {
    const key = agent.parentId === null ? 'root' : 'child';
    let specs = this.#specs.get(key);
    if (!specs) {
      specs = [];
      for (const tool of BUILTIN_TOOLS.values()) if (tool.offeredTo(agent, this.#interactive)) specs.push(toToolSpec(tool as never));
      for (const tool of this.tools.values()) specs.push(toToolSpec(tool));
      this.#specs.set(key, specs);
    }
    return specs;
  }
}
