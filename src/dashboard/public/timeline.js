// @ts-check
// The timeline: one lane per agent over time, drawn on a canvas. Only the lanes in view are drawn
// (the scroll area is as tall as all lanes; the canvas stays in place and shows the slice scrolled
// to), so a run of thousands of agents scrolls as fast as one of five. Zoom with the buttons or
// Ctrl + wheel; drag sideways to pan; hover a mark for what it is; click a lane to open its agent.

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
const LANE = 22;
const AXIS = 22;
const LABEL = 150;

/** @typedef {import('../readModel.js').Timeline} Timeline */

/**
 * @param {{ scroll: HTMLElement, spacer: HTMLElement, canvas: HTMLCanvasElement, tip: HTMLElement, onLane: (agentId: string) => void }} parts
 */
export function createTimeline({ scroll, spacer, canvas, tip, onLane }) {
  /** @type {Timeline} */
  let data = { start: 0, end: 1, lanes: [], marks: [] };
  let window0 = null; // [t0, t1] shown; null: fit the whole run
  let drawn = {}; // marks on the lanes the last frame drew, by kind
  const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext('2d'));

  const range = () => window0 ?? [data.start, Math.max(data.end, data.start + 1)];
  const width = () => scroll.clientWidth;
  const height = () => scroll.clientHeight;
  const x = (t) => {
    const [t0, t1] = range();
    return LABEL + ((t - t0) / (t1 - t0)) * (width() - LABEL - 8);
  };
  const tAt = (px) => {
    const [t0, t1] = range();
    return t0 + ((px - LABEL) / (width() - LABEL - 8)) * (t1 - t0);
  };
  const firstLane = () => Math.floor(scroll.scrollTop / LANE);

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
    for (let i = first; i < Math.min(data.lanes.length, first + count); i++) {
      const lane = data.lanes[i];
      const y = AXIS + (i - first) * LANE;
      ctx.fillStyle = i % 2 ? '#fafafa' : '#f0f0f0';
      ctx.fillRect(0, y, w, LANE);
      ctx.fillStyle = '#222';
      ctx.fillText(`${'  '.repeat(Math.min(lane.depth, 6))}${lane.name}`, 4, y + 15, LABEL - 8);
      ctx.save();
      ctx.beginPath();
      ctx.rect(LABEL, y, w - LABEL, LANE);
      ctx.clip();
      for (const span of lane.spans) {
        const x0 = x(span.from);
        const x1 = Math.max(x0 + 2, x(span.to ?? Math.max(data.end, now)));
        ctx.fillStyle = STATUS_COLORS[span.status] ?? '#999';
        ctx.fillRect(x0, y + 4, x1 - x0, LANE - 8);
      }
      for (const mark of lane.marks) {
        const mx = x(mark.at);
        drawn[mark.kind] = (drawn[mark.kind] ?? 0) + 1;
        ctx.fillStyle = MARK_COLORS[mark.kind] ?? '#000';
        ctx.strokeStyle = '#000';
        ctx.beginPath();
        ctx.moveTo(mx, y + 3);
        ctx.lineTo(mx + 4, y + LANE / 2);
        ctx.lineTo(mx, y + LANE - 3);
        ctx.lineTo(mx - 4, y + LANE / 2);
        ctx.closePath();
        ctx.fill();
        ctx.stroke();
      }
      ctx.restore();
    }
    // The axis and the run-wide marks (budget trips, deadlocks) across every lane.
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, w, AXIS);
    ctx.fillStyle = '#444';
    const [t0, t1] = range();
    for (let k = 0; k <= 4; k++) {
      const t = t0 + ((t1 - t0) * k) / 4;
      ctx.fillText(`+${((t - data.start) / 1000).toFixed(2)} s`, x(t) - (k === 4 ? 50 : 0), 15);
    }
    for (const mark of data.marks) {
      const mx = x(mark.at);
      ctx.strokeStyle = MARK_COLORS[mark.kind] ?? '#000';
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.moveTo(mx, AXIS);
      ctx.lineTo(mx, h);
      ctx.stroke();
      ctx.lineWidth = 1;
    }
  }

  function hit(event) {
    const rect = canvas.getBoundingClientRect();
    const px = event.clientX - rect.left;
    const py = event.clientY - rect.top;
    if (py < AXIS) return null;
    const lane = data.lanes[firstLane() + Math.floor((py - AXIS) / LANE)];
    if (!lane) return null;
    const near = (t) => Math.abs(x(t) - px) <= 5;
    const mark = lane.marks.find((m) => near(m.at)) ?? data.marks.find((m) => near(m.at));
    const span = lane.spans.find((s) => px >= x(s.from) && px <= x(s.to ?? data.end));
    return { lane, mark, span };
  }

  let drag = null;
  canvas.addEventListener('mousedown', (e) => (drag = { x: e.clientX, range: range(), moved: false }));
  window.addEventListener('mouseup', () => setTimeout(() => (drag = null), 0));
  canvas.addEventListener('mousemove', (e) => {
    if (drag && e.buttons === 1) {
      const [t0, t1] = drag.range;
      const dt = ((e.clientX - drag.x) / (width() - LABEL - 8)) * (t1 - t0);
      if (Math.abs(e.clientX - drag.x) > 3) drag.moved = true;
      window0 = [t0 - dt, t1 - dt];
      draw();
      return;
    }
    const h = hit(e);
    if (!h || (!h.mark && !h.span)) {
      tip.hidden = true;
      return;
    }
    tip.hidden = false;
    tip.style.left = `${e.clientX + 12}px`;
    tip.style.top = `${e.clientY + 12}px`;
    const span = h.span;
    tip.textContent = `${h.lane.name}: ${h.mark ? h.mark.label : span ? `${span.status} ${(((span.to ?? data.end) - span.from) / 1000).toFixed(2)} s` : ''}`;
  });
  canvas.addEventListener('mouseleave', () => (tip.hidden = true));
  canvas.addEventListener('click', (e) => {
    if (drag?.moved) return;
    const h = hit(e);
    if (h) onLane(h.lane.agentId);
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
  };
}
