/**
 * The first calls of a spawned batch leave a few per turn of the event loop (loopPacer.ts), with
 * the loop's I/O between them, not all in one check phase.
 */
import { expect, it } from 'vitest';
import { LoopPacer } from '../../../src/host/calls/loopPacer.js';

/** One turn of the event loop: an immediate queued now runs in the next check phase, behind the pacer's. */
const loopTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

it('releases its waits a few per turn of the event loop, in the order they came', async () => {
  const pacer = new LoopPacer(16);
  const released: number[] = [];
  for (let i = 0; i < 40; i++) void pacer.next().then(() => released.push(i));
  // None within the turn that asked.
  await Promise.resolve();
  expect(released).toHaveLength(0);
  const seen: number[] = [];
  for (let turn = 0; turn < 4; turn++) {
    await loopTurn();
    seen.push(released.length);
  }
  expect(seen).toEqual([16, 32, 40, 40]);
  expect(released).toEqual(Array.from({ length: 40 }, (_, i) => i));
});

it('starts again after it ran dry', async () => {
  const pacer = new LoopPacer(2);
  await Promise.all([pacer.next(), pacer.next(), pacer.next()]);
  let released = 0;
  void pacer.next().then(() => released++);
  await loopTurn();
  expect(released).toBe(1);
});
