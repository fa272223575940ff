// @ts-check
// The team as a graph beside the table: a node per agent coloured by its live status, a grey line
// from each parent to its children, and a dashed arrow from a waiting agent to whom it waits on
// (its active children, or the user). Laid out as a tree, left to right: one column per
// generation, one row per leaf, a parent level with the middle of its children; long names are
// cut short, the full name (and status, and wait) in the node's tooltip. No library: plain SVG.
import { STATUS_COLORS } from './timeline.js';

/** Past this many agents the graph is not drawn (the table still lists them all). */
const MAX_GRAPH_AGENTS = 200;
const NS = 'http://www.w3.org/2000/svg';
const COL = 176;
const NODE_W = 116;
const NODE_H = 20;
const ROW = 26;
const PAD = 10;
const NAME_CHARS = 16;
const WAIT_COLOR = '#ef6c00';
/** A status colour too light for white text. */
const DARK_TEXT = new Set(['stalled']);

/** @typedef {import('../readModel.js').TeamAgent} TeamAgent */

/** An SVG element with its attributes (and its text, as text). */
function make(tag, attrs = {}, text) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

const short = (name) => (name.length > NAME_CHARS ? `${name.slice(0, NAME_CHARS - 1)}…` : name);

/**
 * Where each agent goes: `col` its generation, `row` its line (a leaf one of its own, a parent the
 * middle of its children's). An agent whose parent is not in the run's rows is drawn as a root.
 * @param {TeamAgent[]} agents
 */
function layoutTeam(agents) {
  const ids = new Set(agents.map((a) => a.id));
  /** @type {Map<string, TeamAgent[]>} */
  const children = new Map();
  /** @type {TeamAgent[]} */
  const roots = [];
  for (const a of agents) {
    if (a.parentId === null || !ids.has(a.parentId)) roots.push(a);
    else {
      const list = children.get(a.parentId);
      if (list) list.push(a);
      else children.set(a.parentId, [a]);
    }
  }
  /** @type {Map<string, { col: number, row: number }>} */
  const at = new Map();
  let rows = 0;
  let cols = 0;
  // Depth first, children before their parent is placed (iterative: no recursion limit on a deep chain).
  /** @type {{ agent: TeamAgent, col: number, visited: boolean }[]} */
  const stack = roots.map((agent) => ({ agent, col: 0, visited: false })).reverse();
  while (stack.length > 0) {
    const top = /** @type {{ agent: TeamAgent, col: number, visited: boolean }} */ (stack.at(-1));
    const kids = children.get(top.agent.id) ?? [];
    if (!top.visited && kids.length > 0) {
      top.visited = true;
      for (let i = kids.length - 1; i >= 0; i--) stack.push({ agent: kids[i], col: top.col + 1, visited: false });
      continue;
    }
    stack.pop();
    cols = Math.max(cols, top.col + 1);
    if (kids.length === 0) at.set(top.agent.id, { col: top.col, row: rows++ });
    else {
      const first = /** @type {{ row: number }} */ (at.get(kids[0].id)).row;
      const last = /** @type {{ row: number }} */ (at.get(kids[kids.length - 1].id)).row;
      at.set(top.agent.id, { col: top.col, row: (first + last) / 2 });
    }
  }
  return { at, rows, cols };
}

/**
 * Draw the team into `box` (replacing what it held).
 * @param {HTMLElement} box
 * @param {TeamAgent[]} agents
 * @param {{ selected: string | null, onAgent: (id: string) => void }} options
 */
export function renderGraph(box, agents, { selected, onAgent }) {
  if (agents.length > MAX_GRAPH_AGENTS) {
    box.replaceChildren(
      Object.assign(document.createElement('p'), {
        className: 'graph-note',
        textContent: `${agents.length} agents: too many to draw here (the graph draws up to ${MAX_GRAPH_AGENTS}); the table lists them all.`,
      }),
    );
    return;
  }
  const { at, rows, cols } = layoutTeam(agents);
  const waitsOnUser = agents.filter((a) => a.waitingOn === 'the user' && at.has(a.id));
  // The user, when someone waits on them, is a node of its own left of the roots.
  const shift = waitsOnUser.length > 0 ? 1 : 0;
  const cx = (col) => PAD + (col + shift) * COL + NODE_W / 2;
  const cy = (row) => PAD + row * ROW + NODE_H / 2;
  const width = PAD * 2 + (cols + shift - 1) * COL + NODE_W;
  const height = PAD * 2 + Math.max(1, rows) * ROW - (ROW - NODE_H);
  const svg = make('svg', { class: 'team-graph', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'the team as a graph' });
  const defs = make('defs');
  const arrow = make('marker', { id: 'wait-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto' });
  arrow.append(make('path', { d: 'M0,0 L10,5 L0,10 z', fill: WAIT_COLOR }));
  defs.append(arrow);
  svg.append(defs);
  const edges = make('g', { class: 'edges' });
  const waits = make('g', { class: 'waits' });
  const nodes = make('g', { class: 'nodes' });
  svg.append(edges, waits, nodes);

  /** A curve from the right side of one node to the left side of another, leaving and arriving level. */
  const curve = (x1, y1, x2, y2) => {
    const mid = (x1 + x2) / 2;
    return `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`;
  };
  const byId = new Map(agents.map((a) => [a.id, a]));
  for (const a of agents) {
    const me = /** @type {{ col: number, row: number }} */ (at.get(a.id));
    const parent = a.parentId === null ? undefined : at.get(a.parentId);
    if (parent) {
      edges.append(
        make('path', {
          class: 'edge',
          'data-from': a.parentId,
          'data-to': a.id,
          d: curve(cx(parent.col) + NODE_W / 2, cy(parent.row), cx(me.col) - NODE_W / 2, cy(me.row)),
        }),
      );
    }
    for (const id of a.waitingOnIds) {
      const other = at.get(id);
      if (!other) continue;
      const path = make('path', {
        class: 'wait',
        'data-from': a.id,
        'data-to': id,
        'marker-end': 'url(#wait-arrow)',
        // Over the parent's line to that child (the one an agent waits on is its child), dashed, an arrow at the child.
        d: curve(cx(me.col) + NODE_W / 2, cy(me.row), cx(other.col) - NODE_W / 2 - 1, cy(other.row)),
      });
      path.append(make('title', {}, `${a.name} waits on ${byId.get(id)?.name ?? id}`));
      waits.append(path);
    }
  }
  if (shift) {
    const row = waitsOnUser.reduce((sum, a) => sum + /** @type {{ row: number }} */ (at.get(a.id)).row, 0) / waitsOnUser.length;
    const user = make('g', { class: 'node user', 'data-user': '' });
    user.append(
      make('title', {}, `the user: ${waitsOnUser.map((a) => a.name).join(', ')} ${waitsOnUser.length === 1 ? 'waits' : 'wait'} on them`),
      make('rect', { x: PAD, y: cy(row) - NODE_H / 2, width: NODE_W, height: NODE_H, rx: 10 }),
      make('text', { x: PAD + NODE_W / 2, y: cy(row) }, 'the user'),
    );
    nodes.append(user);
    for (const a of waitsOnUser) {
      const me = /** @type {{ col: number, row: number }} */ (at.get(a.id));
      const path = make('path', {
        class: 'wait',
        'data-from': a.id,
        'data-to': 'user',
        'marker-end': 'url(#wait-arrow)',
        d: `M${cx(me.col) - NODE_W / 2},${cy(me.row)} C${PAD + NODE_W + (COL - NODE_W) / 2},${cy(me.row)} ${PAD + NODE_W + (COL - NODE_W) / 2},${cy(row)} ${PAD + NODE_W + 1},${cy(row)}`,
      });
      path.append(make('title', {}, `${a.name} waits on the user`));
      waits.append(path);
    }
  }
  for (const a of agents) {
    const me = /** @type {{ col: number, row: number }} */ (at.get(a.id));
    const g = make('g', {
      class: `node${a.id === selected ? ' selected' : ''}${a.status === 'waiting' ? ' waiting' : ''}`,
      'data-id': a.id,
      'data-agent': a.name,
      'data-status': a.status,
    });
    const wait = a.waitingOn === null ? '' : ` — waits on ${a.waitingOn}`;
    g.append(
      make('title', {}, `${a.name} (${a.status})${wait}`),
      make('rect', { x: cx(me.col) - NODE_W / 2, y: cy(me.row) - NODE_H / 2, width: NODE_W, height: NODE_H, rx: 4, fill: STATUS_COLORS[a.status] ?? '#999' }),
      make('text', { x: cx(me.col), y: cy(me.row), fill: DARK_TEXT.has(a.status) ? '#000' : '#fff' }, short(a.name)),
    );
    g.addEventListener('click', () => onAgent(a.id));
    nodes.append(g);
  }
  box.replaceChildren(svg);
}

/** Mark the selected agent's node (after a click, without drawing again). */
export function selectInGraph(box, id) {
  for (const g of box.querySelectorAll('g.node[data-id]')) g.classList.toggle('selected', g.getAttribute('data-id') === id);
}
