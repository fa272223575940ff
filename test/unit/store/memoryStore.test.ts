import { memoryStore } from '../../../src/store/memoryStore.js';
import { describeStoreContract } from './storeContract.js';

describeStoreContract('memoryStore', memoryStore);
