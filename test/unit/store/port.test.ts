import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { portOf } from '../../../src/store/port.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { describePortContract } from './portContract.js';

describePortContract('memoryStore', async () => ({ port: portOf(memoryStore()), close: () => undefined }));

describePortContract('SQLite file', async () => {
  const store = openStore({ path: join(mkdtempSync(join(tmpdir(), 'troupe-port-')), 'run.db') });
  return { port: portOf(store), close: () => store.close() };
});
