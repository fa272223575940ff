// @ts-check
// The timeline: one lane per agent over time, drawn on a canvas. Only the lanes in view are drawn
// (the scroll area is as tall as all lanes; the canvas stays in place and shows the slice scrolled
// to), so a run of thousands of agents scrolls as fast as one of five. Zoom with the buttons or
// Ctrl + wheel; drag sideways to pan; hover a mark for what it is; click a lane to open its agent.
//
// Marks closer than a badge's width are drawn as one badge with their count (hover it for each
// one; zoom in to split it), so no mark hides another. A run that was killed (or stopped) and
// resumed shows its hostings on the axis, and the time between them hatched across every lane.

export const STATUS_COLORS = {
  running: '#2e7d32',
  waiting: '#1565c0',
  stalled: '#f9a825',
  budgetPaused: '#8e24aa',
  completed: '#78909c',
  stopped: '#6d4c41',
  failed: '#c62828',
  crashed: '#212121',
};

export const MARK_COLORS = {
  model: '#ffffff',
  retry: '#ff5722',
  tool: '#3f51b5',
  message: '#00bcd4',
  notice: '#ff9800',
  said: '#cddc39',
  warning: '#ffc107',
  error: '#ff1744',
  trip: '#e53935',
  deadlock: '#ff1744',
};
/** A cluster's badge takes the colour of its most telling mark, first in this list. */
const SEVERITY = ['error', 'deadlock', 'trip', 'retry', 'warning', 'notice', 'message', 'said', 'tool', 'model'];
/** Light mark colours take dark text on a badge. */
const DARK_TEXT = new Set(['model', 'said', 'warning', 'notice', 'message']);

const LANE = 22;
/** The axis: tick labels, then the hostings band, then the run-wide marks' row. */
const AXIS = 40;
const TICK_Y = 11;
const BAND_Y = 14;
const FLAG_Y = 27;
const ROW_H = 11;
const LABEL = 150;
/** Room right of the run's end, so a badge there is not cut off. */
const RIGHT = 30;
/** Marks less than this many pixels apart share a badge; a badge is never wider (so badges never touch). */
const GAP = 24;
const MAX_TIP_LINES = 12;

/** @typedef {import('../readModel.js').Timeline} Timeline */
/** @typedef {Timeline['marks'][number]} Mark */
/**
 * What the last frame drew for a mark or a cluster of marks: its box in canvas pixels.
 * @typedef {{ lane: string | null, x: number, y: number, w: number, h: number, marks: Mark[] }} MarkBox
 */

/** Marks (sorted by time) grouped left to right: a group takes every mark less than GAP pixels after its first. */
function clusters(marks, xOf, left, right) {
  /** @type {{ x: number, marks: Mark[] }[]} */
  const out = [];
  for (const m of marks) {
    const mx = xOf(m.at);
    if (mx < left - GAP || mx > right + GAP) continue;
    const last = out.at(-1);
    if (last && mx - last.x < GAP) last.marks.push(m);
    else out.push({ x: mx, marks: [m] });
  }
  return out;
}

const worst = (marks) => SEVERITY.find((k) => marks.some((m) => m.kind === k)) ?? marks[0].kind;

/**
 * @param {{ scroll: HTMLElement, spacer: HTMLElement, canvas: HTMLCanvasElement, tip: HTMLElement, onLane: (agentId: string) => void }} parts
 */
export function createTimeline({ scroll, spacer, canvas, tip, onLane }) {
  /** @type {Timeline} */
  let data = { start: 0, end: 1, lanes: [], marks: [], hostings: [] };
  let window0 = null; // [t0, t1] shown; null: fit the whole run
  let drawn = {}; // marks on the lanes the last frame drew, by kind
  /** @type {MarkBox[]} */
  let boxes = []; // the marks and clusters the last frame drew
  /** @type {{ kind: 'hosting' | 'gap', index: number, x0: number, x1: number }[]} */
  let bands = []; // the hostings and the gaps between them the last frame drew
  const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext('2d'));

  // Diagonal hatching for the time no process hosted the run.
  const hatch = document.createElement('canvas');
  hatch.width = 8;
  hatch.height = 8;
  const hctx = /** @type {CanvasRenderingContext2D} */ (hatch.getContext('2d'));
  hctx.strokeStyle = 'rgba(38, 50, 56, 0.55)';
  hctx.lineWidth = 1.5;
  hctx.beginPath();
  hctx.moveTo(0, 8);
  hctx.lineTo(8, 0);
  hctx.stroke();
  const hatchPattern = ctx.createPattern(hatch, 'repeat');

  const range = () => window0 ?? [data.start, Math.max(data.end, data.start + 1)];
  const width = () => scroll.clientWidth;
  const height = () => scroll.clientHeight;
  const plotWidth = () => Math.max(1, width() - LABEL - RIGHT);
  const x = (t) => {
    const [t0, t1] = range();
    return LABEL + ((t - t0) / (t1 - t0)) * plotWidth();
  };
  const tAt = (px) => {
    const [t0, t1] = range();
    return t0 + ((px - LABEL) / plotWidth()) * (t1 - t0);
  };
  const firstLane = () => Math.floor(scroll.scrollTop / LANE);
  const seconds = (t) => `+${((t - data.start) / 1000).toFixed(2)} s`;

  /** One mark (a diamond) or a cluster (a badge with its count) at `cx`, in a row from `y` of height `h`. */
  function drawMark(group, y, h, lane) {
    const { x: cx, marks } = group;
    const kind = worst(marks);
    ctx.fillStyle = MARK_COLORS[kind] ?? '#000';
    ctx.strokeStyle = '#000';
    ctx.lineWidth = 1;
    if (marks.length === 1) {
      ctx.beginPath();
      ctx.moveTo(cx, y);
      ctx.lineTo(cx + 4, y + h / 2);
      ctx.lineTo(cx, y + h);
      ctx.lineTo(cx - 4, y + h / 2);
      ctx.closePath();
      ctx.fill();
      ctx.stroke();
      boxes.push({ lane, x: cx - 4, y, w: 8, h, marks });
      return;
    }
    const text = marks.length > 99 ? '99+' : String(marks.length);
    ctx.font = 'bold 10px system-ui, sans-serif';
    const w = Math.min(GAP - 2, Math.max(14, ctx.measureText(text).width + 6));
    ctx.beginPath();
    ctx.roundRect(cx - 4, y, w, h, 4);
    ctx.fill();
    ctx.stroke();
    ctx.fillStyle = DARK_TEXT.has(kind) ? '#000' : '#fff';
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    ctx.fillText(text, cx - 4 + w / 2, y + h / 2 + 0.5);
    ctx.textAlign = 'start';
    ctx.textBaseline = 'alphabetic';
    ctx.font = '12px system-ui, sans-serif';
    boxes.push({ lane, x: cx - 4, y, w, h, marks });
  }

  /** The gaps between hostings: [x0, x1] of each, at least 6 px wide so a short one still shows. */
  function gaps() {
    const out = [];
    for (let i = 0; i + 1 < data.hostings.length; i++) {
      const x0 = x(data.hostings[i].to);
      const x1 = Math.max(x0 + 6, x(data.hostings[i + 1].from));
      out.push({ index: i, x0, x1 });
    }
    return out;
  }

  function draw() {
    const ratio = window.devicePixelRatio || 1;
    const w = width();
    const h = height();
    canvas.width = w * ratio;
    canvas.height = h * ratio;
    canvas.style.width = `${w}px`;
    canvas.style.height = `${h}px`;
    // The canvas stays at the top of the scrolled area; the spacer after it makes up the rest of the lanes' height.
    spacer.style.height = `${Math.max(0, AXIS + data.lanes.length * LANE - h)}px`;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.font = '12px system-ui, sans-serif';
    const first = firstLane();
    const count = Math.ceil((h - AXIS) / LANE) + 1;
    const now = Date.now();
    drawn = {};
    boxes = [];
    bands = [];
    // The time between two hostings is hatched across every lane (over the spans, under the marks).
    const between = data.hostings.length > 1 ? gaps() : [];
    for (let i = first; i < Math.min(data.lanes.length, first + count); i++) {
      const lane = data.lanes[i];
      const y = AXIS + (i - first) * LANE;
      ctx.fillStyle = i % 2 ? '#fafafa' : '#f0f0f0';
      ctx.fillRect(0, y, w, LANE);
      ctx.fillStyle = '#222';
      ctx.fillText(`${'  '.repeat(Math.min(lane.depth, 6))}${lane.name}`, 4, y + 15, LABEL - 10);
      ctx.save();
      ctx.beginPath();
      // From a little left of the plot: a badge at the run's start is not cut off.
      ctx.rect(LABEL - 5, y, w - LABEL + 5, LANE);
      ctx.clip();
      for (const span of lane.spans) {
        const x0 = x(span.from);
        const x1 = Math.max(x0 + 2, x(span.to ?? Math.max(data.end, now)));
        ctx.fillStyle = STATUS_COLORS[span.status] ?? '#999';
        ctx.fillRect(x0, y + 4, x1 - x0, LANE - 8);
      }
      for (const g of between) {
        ctx.fillStyle = 'rgba(255, 255, 255, 0.55)';
        ctx.fillRect(g.x0, y, g.x1 - g.x0, LANE);
        if (hatchPattern) ctx.fillStyle = hatchPattern;
        ctx.fillRect(g.x0, y, g.x1 - g.x0, LANE);
      }
      for (const group of clusters(lane.marks, x, LABEL, w)) {
        for (const m of group.marks) drawn[m.kind] = (drawn[m.kind] ?? 0) + 1;
        drawMark(group, y + 3, LANE - 6, lane.name);
      }
      ctx.restore();
    }
    const lanesBottom = Math.min(h, AXIS + (data.lanes.length - first) * LANE);
    ctx.save();
    ctx.beginPath();
    ctx.rect(LABEL, 0, w - LABEL, h);
    ctx.clip();
    // Where a hosting ended (red) and the next began (green).
    for (const g of between) {
      ctx.lineWidth = 2;
      ctx.setLineDash([4, 3]);
      for (const { at, color } of [
        { at: g.x0, color: STATUS_COLORS.failed },
        { at: g.x1, color: STATUS_COLORS.running },
      ]) {
        ctx.strokeStyle = color;
        ctx.beginPath();
        ctx.moveTo(at, AXIS);
        ctx.lineTo(at, lanesBottom);
        ctx.stroke();
      }
      ctx.setLineDash([]);
      ctx.lineWidth = 1;
    }
    // A line down every lane under each run-wide mark (its flag is on the axis).
    const runMarks = clusters(
      [...data.marks].sort((a, b) => a.at - b.at),
      x,
      LABEL,
      w,
    );
    for (const group of runMarks) {
      ctx.strokeStyle = MARK_COLORS[worst(group.marks)] ?? '#000';
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.moveTo(group.x, AXIS);
      ctx.lineTo(group.x, lanesBottom);
      ctx.stroke();
      ctx.lineWidth = 1;
    }
    ctx.restore();

    // The axis: ticks, the hostings (when there are several), the run-wide marks (budget trips, deadlocks).
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, w, AXIS);
    ctx.strokeStyle = '#ccc';
    ctx.beginPath();
    ctx.moveTo(0, AXIS - 0.5);
    ctx.lineTo(w, AXIS - 0.5);
    ctx.stroke();
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = '#444';
    const [t0, t1] = range();
    for (let k = 0; k <= 4; k++) {
      const t = t0 + ((t1 - t0) * k) / 4;
      ctx.fillText(seconds(t), x(t) - (k === 4 ? 50 : 0), TICK_Y);
    }
    if (data.hostings.length > 1) ctx.fillText('hostings', 4, BAND_Y + 9);
    if (data.marks.length > 0) ctx.fillText('run events', 4, FLAG_Y + 9);
    ctx.save();
    ctx.beginPath();
    ctx.rect(LABEL - 6, 0, w - LABEL + 6, AXIS);
    ctx.clip();
    if (data.hostings.length > 1) {
      data.hostings.forEach((hosting, i) => {
        const x0 = i === 0 ? x(hosting.from) : between[i - 1].x1;
        // The last one runs to the end of the run (at least wide enough for its number).
        const x1 = i === data.hostings.length - 1 ? Math.max(x0 + 14, x(hosting.to)) : between[i].x0;
        ctx.fillStyle = i % 2 ? '#90a4ae' : '#b0bec5';
        ctx.fillRect(x0, BAND_Y, x1 - x0, ROW_H);
        ctx.fillStyle = '#102027';
        ctx.font = '10px system-ui, sans-serif';
        const label = [i === 0 ? 'hosting 1' : `hosting ${i + 1} (resumed)`, `hosting ${i + 1}`, String(i + 1)].find(
          (text) => ctx.measureText(text).width + 6 <= x1 - x0,
        );
        if (label) ctx.fillText(label, x0 + 3, BAND_Y + 9);
        bands.push({ kind: 'hosting', index: i, x0, x1 });
      });
      for (const g of between) {
        ctx.fillStyle = '#fff';
        ctx.fillRect(g.x0, BAND_Y, g.x1 - g.x0, ROW_H);
        if (hatchPattern) ctx.fillStyle = hatchPattern;
        ctx.fillRect(g.x0, BAND_Y, g.x1 - g.x0, ROW_H);
        bands.push({ kind: 'gap', index: g.index, x0: g.x0, x1: g.x1 });
      }
    }
    for (const group of runMarks) drawMark(group, FLAG_Y, ROW_H, null);
    ctx.restore();
    ctx.font = '12px system-ui, sans-serif';
  }

  /** The tip for a mark or a cluster. */
  const markTip = (box) =>
    box.marks.length === 1
      ? box.marks[0].label
      : [
          `${box.marks.length} marks:`,
          ...box.marks.slice(0, MAX_TIP_LINES).map((m) => `• ${m.label}`),
          ...(box.marks.length > MAX_TIP_LINES ? [`… and ${box.marks.length - MAX_TIP_LINES} more (zoom in)`] : []),
        ].join('\n');

  function bandTip(band) {
    const hs = data.hostings;
    if (band.kind === 'gap') {
      const before = hs[band.index];
      const after = hs[band.index + 1];
      return `not hosted from ${seconds(before.to)} to ${seconds(after.from)} (${((after.from - before.to) / 1000).toFixed(2)} s): hosting ${band.index + 1} ended after its last event (its process was stopped or killed); hosting ${band.index + 2} resumed the run`;
    }
    const hosting = hs[band.index];
    const boot = hosting.boot === null ? '' : ` (boot ${hosting.boot})`;
    return `hosting ${band.index + 1}${boot}: ${seconds(hosting.from)} to ${band.index === hs.length - 1 ? 'the end' : seconds(hosting.to)}`;
  }

  /** What is under the pointer: a lane (and its span), a mark or cluster, a hosting or the gap between two. */
  function hit(event) {
    const rect = canvas.getBoundingClientRect();
    const px = event.clientX - rect.left;
    const py = event.clientY - rect.top;
    const box = boxes.find((b) => px >= b.x - 1 && px <= b.x + b.w + 1 && py >= b.y - 2 && py <= b.y + b.h + 2);
    if (py < AXIS) {
      if (box) return { text: markTip(box) };
      const band = py >= BAND_Y && py <= BAND_Y + ROW_H ? bands.find((b) => px >= b.x0 && px <= b.x1) : undefined;
      return band ? { text: bandTip(band) } : null;
    }
    const lane = data.lanes[firstLane() + Math.floor((py - AXIS) / LANE)];
    if (!lane) return null;
    if (box) return { lane, text: `${lane.name}: ${markTip(box)}` };
    const gap = bands.find((b) => b.kind === 'gap' && px >= b.x0 && px <= b.x1);
    if (gap) return { lane, text: bandTip(gap) };
    const span = lane.spans.find((s) => px >= x(s.from) && px <= x(s.to ?? data.end));
    return { lane, text: span ? `${lane.name}: ${span.status} ${(((span.to ?? data.end) - span.from) / 1000).toFixed(2)} s` : null };
  }

  let drag = null;
  canvas.addEventListener('mousedown', (e) => (drag = { x: e.clientX, range: range(), moved: false }));
  window.addEventListener('mouseup', () => setTimeout(() => (drag = null), 0));
  canvas.addEventListener('mousemove', (e) => {
    if (drag && e.buttons === 1) {
      const [t0, t1] = drag.range;
      const dt = ((e.clientX - drag.x) / plotWidth()) * (t1 - t0);
      if (Math.abs(e.clientX - drag.x) > 3) drag.moved = true;
      window0 = [t0 - dt, t1 - dt];
      draw();
      return;
    }
    const h = hit(e);
    if (!h?.text) {
      tip.hidden = true;
      return;
    }
    tip.hidden = false;
    tip.style.left = `${e.clientX + 12}px`;
    tip.style.top = `${e.clientY + 12}px`;
    tip.textContent = h.text;
  });
  canvas.addEventListener('mouseleave', () => (tip.hidden = true));
  canvas.addEventListener('click', (e) => {
    if (drag?.moved) return;
    const h = hit(e);
    if (h?.lane) onLane(h.lane.agentId);
  });
  canvas.addEventListener(
    'wheel',
    (e) => {
      if (!e.ctrlKey) return;
      e.preventDefault();
      zoomAt(e.deltaY > 0 ? 1.25 : 0.8, tAt(e.clientX - canvas.getBoundingClientRect().left));
    },
    { passive: false },
  );
  scroll.addEventListener('scroll', () => requestAnimationFrame(draw));
  window.addEventListener('resize', () => requestAnimationFrame(draw));

  function zoomAt(factor, center) {
    const [t0, t1] = range();
    const span = Math.max(10, (t1 - t0) * factor);
    const c = center ?? (t0 + t1) / 2;
    const share = (c - t0) / (t1 - t0);
    window0 = [c - share * span, c - share * span + span];
    draw();
  }

  return {
    set(next) {
      data = next;
      draw();
    },
    zoom: (factor) => zoomAt(factor),
    fit() {
      window0 = null;
      draw();
    },
    /** The time window shown, [from, to] in ms. */
    range: () => [...range()],
    /** For tests and tools: how many marks of each kind the last frame drew on its lanes. */
    drawnMarks: () => ({ ...drawn }),
    /** For tests and tools: how many lanes the last frame drew. */
    drawnLanes: () => Math.max(0, Math.min(data.lanes.length - firstLane(), Math.ceil((height() - AXIS) / LANE) + 1)),
    /** For tests and tools: the box of each mark or cluster the last frame drew (lane null: the run's row), with its marks' kinds. */
    drawnBoxes: () => boxes.map((b) => ({ lane: b.lane, x: b.x, y: b.y, w: b.w, h: b.h, count: b.marks.length, kinds: b.marks.map((m) => m.kind) })),
    /** For tests and tools: the hostings and the gaps between them the last frame drew, [x0, x1] in pixels. */
    drawnHostings: () => bands.map((b) => ({ ...b })),
    /** For tests and tools: where lane `i` of those in view starts (pixels from the canvas top), and the lane height. */
    laneTop: (i) => AXIS + i * LANE,
    laneHeight: LANE,
  };
}
