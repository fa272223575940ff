/** A recording read back with its history edited: how replay tests build recordings the code could not make on cue. */
import type { ReplayReads } from '../../src/replay/recording.js';
import { portOf } from '../../src/store/port.js';
import type { EventRow, Store } from '../../src/store/types.js';

/** The reads of `store`, whose history of a run is `edit` of the stored one. */
export function withHistory(store: Store, edit: (events: EventRow[]) => EventRow[]): ReplayReads {
  const port = portOf(store);
  return {
    getRun: (id) => port.getRun(id),
    listAgents: (id) => port.listAgents(id),
    listMessages: (id) => port.listMessages(id),
    loadSession: (id) => port.loadSession(id),
    historyOf: async (id) => edit(await port.historyOf(id)),
  };
}
