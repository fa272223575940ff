/**
 * The runs of a SQLite file (runStore.ts): the owner lock is the claim, the file's inbox table
 * carries requests to whichever process owns it. No workers: a run nobody hosts does its work when
 * `troupe resume` (or a library call) hosts it again.
 * @module
 */
import { isTroupeError } from '../errors.js';
import type { Redactor } from '../logging/redact.js';
import { postToInbox, readDelivery, readInbox } from '../store/inbox.js';
import { ownerAlive } from '../store/ownerLock.js';
import { portOf } from '../store/port.js';
import { openStore, type SqliteStore } from '../store/sqliteStore.js';
import type { RunClaim, RunStore } from './runStore.js';

export function sqliteRuns(path: string, options: { redactor?: Redactor } = {}): RunStore {
  // No lock: the run may be live in another process.
  const reader = openStore({ path, readonly: true });
  let verified = false;
  return {
    label: path,
    reads: portOf(reader),
    verify: () => {
      if (!verified) reader.verify();
      verified = true;
      return Promise.resolve();
    },
    hostOf: () => {
      const hosted = ownerAlive(path);
      return Promise.resolve({ hosted, state: hosted ? 'hosted' : 'free', owner: hosted ? 'a troupe process' : null, epoch: null });
    },
    runOfExecution: (id) => {
      const row = reader.getExecution(id);
      return Promise.resolve(row && reader.getAgent(row.agentId)?.runId);
    },
    claim: (runId) => {
      let store: SqliteStore;
      try {
        store = openStore({ path, ...(options.redactor ? { redactor: options.redactor } : {}) });
      } catch (err) {
        if (isTroupeError(err) && err.code === 'RUN_LOCKED') return Promise.resolve(null);
        return Promise.reject(err as Error);
      }
      const claim: RunClaim = {
        runId,
        port: portOf(store),
        openRequests: () => Promise.resolve(store.openInbox(runId)),
        // The file's runs wait for their next host whatever state they are let go in.
        release: () => Promise.resolve(store.close()),
      };
      return Promise.resolve(claim);
    },
    post: (request) => {
      // Posting writes to the file: decode it all first, as an owner's open does.
      if (!verified) reader.verify();
      verified = true;
      return Promise.resolve(postToInbox(path, request));
    },
    request: (id) => Promise.resolve(readInbox(path, id)),
    delivery: (id) => Promise.resolve(readDelivery(path, id)),
    close: () => Promise.resolve(reader.close()),
  };
}
