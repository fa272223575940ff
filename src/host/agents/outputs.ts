/**
 * Each agent's output check, compiled once from the output schema in its terms (persisted); for
 * the root, the API's in-process check (a Standard Schema given to `start`) wins while this
 * process runs. An agent whose terms hold no output schema has none: it finishes as before.
 * @module
 */
import type { AgentTerms } from '../../store/types.js';
import { compileOutputSchema, type OutputCheck } from '../../tools/outputSchema.js';

export class OutputChecks {
  readonly #checks = new Map<string, OutputCheck>();
  /**
   * The API's in-process check for the root (a Standard Schema given to `start`), registered with
   * the same schema's JSON form in its terms. Set before the root is registered, so its first turn
   * cannot be checked without it.
   */
  root: OutputCheck | null = null;

  get(agent: { readonly id: string; readonly parentId: string | null; readonly terms: AgentTerms | null }): OutputCheck | null {
    const schema = agent.terms?.output;
    if (schema === undefined) return null;
    if (agent.parentId === null && this.root) return this.root;
    let check = this.#checks.get(agent.id);
    if (!check) {
      // Checked at spawn; a persisted schema compiles again after a restart.
      check = compileOutputSchema(schema);
      this.#checks.set(agent.id, check);
    }
    return check;
  }
}
