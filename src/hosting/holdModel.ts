/**
 * The model of a host that starts no work: a submitter creating a run, or a CLI command hosting a
 * run only to apply a request to it. A call it gets waits until the hosting ends (aborted at
 * shutdown), so the agent's turn is made by the run's next real host.
 * @module
 */
import { toError } from '../errors.js';
import type { Model } from '../model/types.js';

export const holdModel: Model = {
  name: 'troupe-hold',
  // It prices its calls (it makes none), so a run with a budget is not refused for it: the model
  // of the host that runs the turns is the one checked for a price.
  estimateCostUsd: () => 0,
  complete: (_request, { signal }) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(toError(signal.reason)), { once: true })),
};
