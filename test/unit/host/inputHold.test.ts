/**
 * Inputs are held like answers (commit.ts `admit`): a `send` made while a commit is out off the
 * event loop (a SQLite file in FULL syncing on the thread pool) is applied after that commit's
 * effects — the wake it releases, and the status change that wake stages — as it was when the
 * commit blocked the loop in fsync. Its writes follow theirs in the next group.
 */
import { expect, it } from 'vitest';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { portOf, type StorePort, type WriteOp } from '../../../src/store/port.js';
import { parks } from '../../helpers/models.js';

it('a send made while a commit is out comes after that commit’s effects: its message is written after the status the wake staged', async () => {
  const store = memoryStore({ groupAsOnDisk: true });
  const inner = portOf(store);
  const batches: WriteOp[][] = [];
  let gate: Promise<void> | null = null;
  const port = Object.create(inner) as StorePort & { commitsOffLoop: boolean };
  Object.defineProperty(port, 'commitsOffLoop', { value: true });
  port.commit = async (ops) => {
    await inner.commit(ops);
    batches.push([...ops]);
    if (gate) await gate;
  };
  const c = createCoordinator({ store: port, model: parks, interactive: true });
  const lead = await c.start({ name: 'lead', task: 'talk' });
  await c.waitFor(lead, ['waiting']);
  let open!: () => void;
  gate = new Promise<void>((resolve) => (open = resolve));
  const first = batches.length;
  // Its commit stays out: its effect (the wake) has not run.
  const a = c.send(lead, { content: 'first' });
  for (let i = 0; i < 20 && batches.length === first; i++) await new Promise((resolve) => setImmediate(resolve));
  expect(batches.length).toBe(first + 1);
  const b = c.send(lead, { content: 'second' });
  await new Promise((resolve) => setImmediate(resolve));
  gate = null;
  open();
  await Promise.all([a, b]);
  await c.waitFor(lead, ['waiting']);
  await c.shutdown();
  // The group after the held commit: the wake's status change (lead → running), then the held send.
  const next = batches.slice(first + 1).flat();
  const running = next.findIndex((o) => o.op === 'updateAgent' && o.id === lead && o.patch.status === 'running');
  const second = next.findIndex((o) => o.op === 'enqueueMessage' && o.message.content === 'second');
  expect(running).toBeGreaterThanOrEqual(0);
  expect(second).toBeGreaterThan(running);
});
