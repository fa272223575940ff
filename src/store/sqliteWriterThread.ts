/**
 * The commit thread's entry (`openStore({ commitThread: true })`, sqliteWriter.ts starts it): a
 * second read-write connection to a file the main thread opened, checked and locked, and an owner's
 * store over it (with its caches: this thread is the only one that writes what they hold). Each
 * batch is applied in one transaction in the order posted and answered; an I/O error fails this
 * store closed, and the answer says so.
 * @module
 */
import { parentPort, workerData } from 'node:worker_threads';
import { createRedactor } from '../logging/redact.js';
import { applyOps } from './port.js';
import { writerStore, type SqliteStore } from './sqliteStore.js';
import { toWireStoreError, type FromWriter, type ToWriter, type WriterSetup } from './sqliteWriter.js';

const port = parentPort;
if (port === null) throw new Error('sqliteWriterThread.js runs as a worker thread (openStore commitThread: true)');
const setup = workerData as WriterSetup;
const post = (message: FromWriter) => port.postMessage(message);

const redactor = createRedactor(setup.secrets);
let store: SqliteStore | null = null;
try {
  const options = { path: setup.path, busyTimeoutMs: setup.busyTimeoutMs, maxSizeBytes: setup.maxSizeBytes, redactor };
  store = writerStore(options, setup.synchronous, setup.boot, setup.identity);
} catch (err) {
  post({ t: 'dead', error: toWireStoreError(err) });
  // Nothing to apply or close: a close() waiting for this thread returns at once.
  Atomics.store(setup.closed, 0, 1);
  Atomics.notify(setup.closed, 0);
  port.close();
}

port.on('message', (msg: ToWriter) => {
  if (store === null) return;
  if (msg.t === 'close') {
    store.close();
    store = null;
    Atomics.store(setup.closed, 0, 1);
    Atomics.notify(setup.closed, 0);
    port.close();
    return;
  }
  for (const secret of msg.secrets ?? []) redactor.add(secret);
  try {
    applyOps(store, msg.ops);
    post({ t: 'ok', id: msg.id });
  } catch (err) {
    post({ t: 'err', id: msg.id, error: toWireStoreError(err), fatal: store.failure !== null });
  }
});
