import { describe, expect, it } from 'vitest';
import type { SessionItem } from '../../../src/model/types.js';
import { compactionCut, IMAGE_PLACEHOLDER, imageDroppedText, withNewestImages, withoutImages } from '../../../src/turn/compaction.js';

const user = (content: string): SessionItem => ({ role: 'user', content });
const asst = (id: string): SessionItem => ({ role: 'assistant', content: null, toolCalls: [{ id, name: 'lookup', arguments: '{}' }] });
const tool = (id: string): SessionItem => ({ role: 'tool', toolCallId: id, name: 'lookup', content: '{}' });

describe('compactionCut', () => {
  it('keeps the newest quarter, starting at an assistant item, so no tool result loses its call', () => {
    const items = [user('task'), asst('1'), tool('1'), asst('2'), tool('2'), asst('3'), tool('3'), asst('4'), tool('4')];
    const cut = compactionCut(items);
    expect(cut).toBe(7);
    expect(items[cut]!.role).toBe('assistant');
  });
  it('summarises everything after the task when no assistant item is left in the tail, but never unanswered mail', () => {
    expect(compactionCut([user('task'), asst('1'), tool('1'), asst('2'), tool('2')])).toBe(5);
    expect(compactionCut([user('task'), asst('1'), tool('1'), user('mail'), user('more mail')])).toBe(3);
  });
  it('has nothing to compact in a session of the task and one reply', () => {
    expect(compactionCut([user('task'), asst('1')])).toBe(0);
  });
});

describe('withoutImages', () => {
  it('replaces every image with the placeholder and keeps the text parts', () => {
    const items: SessionItem[] = [
      user('task'),
      {
        role: 'user',
        content: [
          { type: 'text', text: 'see' },
          { type: 'image', url: 'data:a' },
          { type: 'image', url: 'data:b' },
        ],
      },
    ];
    expect(withoutImages(items)?.[1]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'see' },
        { type: 'text', text: IMAGE_PLACEHOLDER },
        { type: 'text', text: IMAGE_PLACEHOLDER },
      ],
    });
  });
  it('returns null when there is nothing to replace', () => {
    expect(withoutImages([user('task'), { role: 'user', content: [{ type: 'text', text: 'no image' }] }])).toBeNull();
  });
});

describe('withNewestImages', () => {
  const shot = (...names: string[]): SessionItem => ({ role: 'user', content: names.map((n) => ({ type: 'image' as const, url: n })) });
  const urls = (items: readonly SessionItem[] | null) =>
    (items ?? []).flatMap((i) => (i.role === 'user' && typeof i.content !== 'string' ? i.content.map((p) => (p.type === 'image' ? p.url : p.text)) : []));

  it('keeps the newest images counted from the end, the last ones within a message', () => {
    const items = [user('task'), shot('a', 'b'), user('between'), shot('c', 'd', 'e')];
    const gone = imageDroppedText(2);
    expect(urls(withNewestImages(items, 2))).toEqual([gone, gone, gone, 'd', 'e']);
    expect(urls(withNewestImages(items, 4))).toEqual([imageDroppedText(4), 'b', 'c', 'd', 'e']);
    expect(urls(withNewestImages(items, 0))).toEqual(Array.from({ length: 5 }, () => imageDroppedText(0)));
  });
  it('returns null (nothing to rewrite) at or under the budget, and leaves other items as they were', () => {
    const items = [user('task'), shot('a'), shot('b')];
    expect(withNewestImages(items, 2)).toBeNull();
    const kept = withNewestImages(items, 1)!;
    expect(kept[0]).toBe(items[0]);
    expect(kept[2]).toBe(items[2]);
  });
});
