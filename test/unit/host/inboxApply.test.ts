/**
 * An inbox request's answer is committed with its effect: the batch that queues a message, pauses
 * the budget (or records an execution's end) also marks the request answered — never one without the
 * other. A refusal is an answer alone; a stop is answered once the stopped agents are terminal.
 */
import { describe, expect, it } from 'vitest';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { portOf, type StorePort, type WriteOp } from '../../../src/store/port.js';
import { parks } from '../../helpers/models.js';

/** A memory store's port that keeps every committed batch. */
function recordingPort(): { port: StorePort; batches: WriteOp[][] } {
  const inner = portOf(memoryStore());
  const batches: WriteOp[][] = [];
  const port: StorePort = {
    ...inner,
    boot: inner.boot,
    commit: (ops) => {
      batches.push([...ops]);
      return inner.commit(ops);
    },
  };
  return { port, batches };
}

/** An interactive lead waiting on its user, over a recording port. */
async function waitingLead() {
  const { port, batches } = recordingPort();
  const c = createCoordinator<StorePort>({ store: port, model: parks, interactive: true });
  const root = await c.start({ name: 'lead', task: 'talk' });
  await c.waitFor(root, ['waiting']);
  return { c, root, batches };
}

const batchAnswering = (batches: WriteOp[][], id: number) => batches.filter((b) => b.some((op) => op.op === 'answerRequest' && op.id === id));

describe('applying an inbox request', () => {
  it('commits the answer in the same batch as the effect: a send, a pause', async () => {
    const { c, batches } = await waitingLead();
    const sent = await c.applyRequest({ id: 1, kind: 'send', payload: { agent: 'lead', content: 'from outside' } });
    expect(sent).toMatchObject({ ok: true, messageId: expect.any(String) });
    const [sendBatch, ...others] = batchAnswering(batches, 1);
    expect(others).toEqual([]);
    expect(sendBatch!.some((op) => op.op === 'enqueueMessage' && op.message.id === sent.messageId)).toBe(true);

    expect(await c.applyRequest({ id: 2, kind: 'pause', payload: {} })).toMatchObject({ ok: true });
    const [pauseBatch] = batchAnswering(batches, 2);
    expect(pauseBatch!.some((op) => op.op === 'updateRun' && op.patch.budget?.paused === true)).toBe(true);

    await c.shutdown();
  });

  it('a refusal is an answer alone, with its code; applying nothing', async () => {
    const { c, batches } = await waitingLead();
    const refused = await c.applyRequest({ id: 3, kind: 'send', payload: { agent: 'nobody', content: 'hi' } });
    expect(refused).toMatchObject({ ok: false, code: 'AGENT_NOT_FOUND' });
    const [batch] = batchAnswering(batches, 3);
    // The live stream's rows may ride along (they record, they apply nothing).
    expect(batch!.map((op) => op.op).filter((op) => op !== 'appendStream')).toEqual(['answerRequest']);
    await c.shutdown();
  });

  it('a stop is answered once the stopped agents are terminal', async () => {
    const { c, root, batches } = await waitingLead();
    expect(await c.applyRequest({ id: 4, kind: 'stop', payload: { agent: 'lead' } })).toMatchObject({ ok: true, message: 'stopped lead' });
    const answered = batches.findIndex((b) => b.some((op) => op.op === 'answerRequest' && op.id === 4));
    const stopped = batches.findIndex((b) => b.some((op) => op.op === 'updateAgent' && op.id === root && op.patch.status === 'stopped'));
    expect(stopped).toBeGreaterThanOrEqual(0);
    expect(answered).toBeGreaterThanOrEqual(stopped);
    await c.shutdown();
  });
});
