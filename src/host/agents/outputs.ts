/**
 * Each agent's output check, compiled once from the output schema in its terms (persisted), or
 * set in-process by the API (a Standard Schema given to `start`), which wins while this process
 * runs. An agent whose terms hold no output schema has none: it finishes as before.
 * @module
 */
import type { AgentTerms } from '../../store/types.js';
import { compileOutputSchema, type OutputCheck } from '../../tools/outputSchema.js';

export class OutputChecks {
  readonly #checks = new Map<string, OutputCheck>();

  /** The API's in-process check for an agent (registered with the same schema's JSON form in its terms). */
  set(agentId: string, check: OutputCheck): void {
    this.#checks.set(agentId, check);
  }

  get(agent: { readonly id: string; readonly terms: AgentTerms | null }): OutputCheck | null {
    const schema = agent.terms?.output;
    if (schema === undefined) return null;
    let check = this.#checks.get(agent.id);
    if (!check) {
      // Checked at spawn; a persisted schema compiles again after a restart.
      check = compileOutputSchema(schema);
      this.#checks.set(agent.id, check);
    }
    return check;
  }
}
