/**
 * Counts consecutive failures per tool (seeds/000). At the threshold it asks for the
 * strategy-rotation prompt, which the turn injects as a user message before the next model call.
 * A success resets only the consecutive count; lifetime totals are kept for statistics.
 * @module
 */

export interface ToolFailureStats {
  consecutive: number;
  total: number;
  lastError: string;
}

export class FailureTracker {
  readonly threshold: number;
  #stats = new Map<string, ToolFailureStats>();

  constructor(threshold = 3) {
    this.threshold = threshold;
  }

  /** Record a failure; true exactly when this failure reaches the threshold. */
  recordFailure(tool: string, error: string): boolean {
    const s = this.#stats.get(tool) ?? { consecutive: 0, total: 0, lastError: '' };
    s.consecutive += 1;
    s.total += 1;
    s.lastError = error;
    this.#stats.set(tool, s);
    return s.consecutive === this.threshold;
  }

  recordSuccess(tool: string): void {
    const s = this.#stats.get(tool);
    if (s) s.consecutive = 0;
  }

  strategyPrompt(tool: string): string {
    const s = this.#stats.get(tool);
    return [
      `The tool '${tool}' has failed ${s?.consecutive ?? this.threshold} times consecutively. Last error: ${s?.lastError ?? ''}`,
      'Before continuing, please:',
      '1. Analyse why this tool keeps failing',
      `2. List 3 alternative approaches that do not use '${tool}'`,
      '3. Execute the best alternative',
      `Do not attempt '${tool}' again until you have tried an alternative.`,
    ].join('\n');
  }

  stats(): Record<string, ToolFailureStats> {
    return Object.fromEntries([...this.#stats].map(([k, v]) => [k, { ...v }]));
  }

  /** A new top-level task: forget the streaks and totals of the previous one. */
  resetAll(): void {
    this.#stats.clear();
  }
}
