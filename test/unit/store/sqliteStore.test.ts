import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../../../src/store/sqliteStore.js';
import { describeStoreContract } from './storeContract.js';

describeStoreContract('sqliteStore (:memory:)', () => openStore({ path: ':memory:' }));
describeStoreContract('sqliteStore (file, FULL)', () => openStore({ path: join(mkdtempSync(join(tmpdir(), 'troupe-')), 't.db') }));
