// @ts-check
// The troupe dashboard page: the team (a table and a graph), the timeline and one agent, read from
// this server's API and read again whenever its event stream says the run changed. No
// dependencies; every value from the run is put in the page as text (textContent), never as markup.
import { renderGraph, selectInGraph } from './graph.js';
import { createTimeline, MARK_COLORS, STATUS_COLORS } from './timeline.js';

/** The JSON the server answers with: the read model's types (src/dashboard/readModel.ts), checked here by npm run typecheck.
 * @typedef {import('../readModel.js').Team} Team
 * @typedef {import('../readModel.js').TeamAgent} TeamAgent
 * @typedef {import('../readModel.js').Timeline} Timeline
 * @typedef {import('../readModel.js').Approvals} Approvals
 * @typedef {Approvals['approvals'][number]} Approval
 * @typedef {Team & { live: boolean, db: string, answersApprovals: boolean, canFork: boolean }} TeamReply what /api/team answers: the team, whether a process hosts it (actions reach it), the database, whether an approval of a run nobody hosts is answered here, whether this server can fork a run
 */

const token = new URLSearchParams(location.search).get('token') ?? '';
/** An element of index.html by its id (each one exists: the page is ours). @type {(id: string) => HTMLElement} */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));
/** A form field of index.html by its id. @type {(id: string) => HTMLInputElement} */
const field = (id) => /** @type {HTMLInputElement} */ ($(id));

/**
 * `why`: why actions are disabled now (null: the run is live).
 * @type {{ run: string | null, team: Team | null, rows: TeamAgent[], agentId: string | null, view: string, live: boolean, why: string | null, approvalWhy: string | null, approvals: Approval[] }}
 */
const state = { run: null, team: null, rows: [], agentId: null, view: 'team', live: false, why: null, approvalWhy: null, approvals: [] };

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

const usd = (v) => `$${v.toFixed(v >= 1 ? 2 : 4)}`;
const time = (ms) => new Date(ms).toLocaleTimeString();
const pill = (status) => el('span', { class: 'pill', style: `background:${STATUS_COLORS[status] ?? '#999'}`, text: status, 'data-status': status });

async function api(path, params = {}, body) {
  const query = new URLSearchParams({ token, ...params });
  const res = await fetch(
    `${path}?${query}`,
    body === undefined ? {} : { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) },
  );
  const data = await res.json().catch(() => ({ error: { code: 'INTERNAL', message: `HTTP ${res.status}` } }));
  if (!res.ok) {
    throw Object.assign(new Error(data.error?.message ?? `HTTP ${res.status}`), { code: String(data.error?.code ?? 'INTERNAL') });
  }
  return data;
}

function showProblem(err) {
  const box = $('problem');
  if (err === null) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  box.textContent = `${err.code ?? 'ERROR'}: ${err.message}`;
}

// ── the team ───────────────────────────────────────────────────────────────────────────────────

function budgetBar(b) {
  const box = $('budget');
  box.replaceChildren();
  const flags = [b.reserveStopped && 'reserve tripped', b.budgetStopped && 'budget stopped', b.paused && 'paused'].filter(Boolean);
  const label =
    b.limitUsd === null
      ? `spent ${usd(b.spentUsd)}`
      : `${usd(b.spentUsd)} of ${usd(b.limitUsd)}${b.reserveUsd === null ? '' : ` (reserve line ${usd(b.reserveUsd)})`}`;
  box.append(el('div', { id: 'budget-text', text: `budget: ${label}${flags.length ? ` — ${flags.join(', ')}` : ''}` }));
  // Spend against each allowance a spawn gave (its owner's whole subtree).
  for (const a of b.allowances ?? []) {
    const back = a.returnedUsd === null ? '' : `, returned ${usd(a.returnedUsd)}`;
    box.append(el('div', { class: 'allowance', text: `allowance of ${a.name}: ${usd(a.spentUsd)} of ${usd(a.allowanceUsd)}${back}` }));
  }
  if (b.limitUsd === null) return;
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 100 10');
  svg.setAttribute('preserveAspectRatio', 'none');
  const rect = (x, w, fill) => {
    const r = document.createElementNS(ns, 'rect');
    Object.entries({ x, y: 0, width: w, height: 10, fill }).forEach(([k, v]) => r.setAttribute(k, String(v)));
    svg.append(r);
  };
  rect(0, 100, '#455a64');
  rect(0, Math.min(100, (100 * b.spentUsd) / b.limitUsd), b.budgetStopped || b.reserveStopped ? '#e53935' : '#66bb6a');
  if (b.reserveUsd !== null) rect((100 * b.reserveUsd) / b.limitUsd - 0.4, 0.8, '#ffeb3b');
  box.append(svg);
}

function renderTeam(team) {
  state.team = team;
  const select = /** @type {HTMLSelectElement} */ ($('run'));
  select.replaceChildren(...team.runs.map((r) => el('option', { value: r.id, text: `${r.id} (${new Date(r.createdAt).toLocaleString()})` })));
  select.value = team.run.id;
  renderLineage(team);
  budgetBar(team.budget);
  $('counts').replaceChildren(
    el('span', { text: `${team.agents.length} agents:` }),
    ...Object.entries(team.counts).map(([status, n]) => el('span', { class: 'count', 'data-status': status }, pill(status), ` ${n}`)),
  );
  // Depth-first order: each agent under its parent.
  const children = new Map();
  for (const a of team.agents) children.set(a.parentId, [...(children.get(a.parentId) ?? []), a]);
  /** @type {TeamAgent[]} */
  const rows = [];
  const walk = (parentId) => {
    for (const a of children.get(parentId) ?? []) {
      rows.push(a);
      walk(a.id);
    }
  };
  walk(null);
  state.rows = rows;
  renderRows();
  renderGraph($('graph'), team.agents, { selected: state.agentId, onAgent: (id) => void openAgent(id) });
  renderActions(team);
}

/** Why a stopped agent was stopped, by its stop reason. */
const STOP_REASONS = {
  requested: 'stopped on request (the user or its parent)',
  maxTurns: 'it used all its turns',
  budget: 'the budget is spent',
  reserve: 'the budget reached its reserve line',
  allowance: 'its budget allowance is spent',
  reentry: 'it kept waking itself (its self-wake budget is spent)',
};
const clip = (text, max) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** Why an agent failed, crashed or was stopped: [code, message], or null. */
function whyEnded(a) {
  if (a.stopReason) return [a.stopReason, STOP_REASONS[a.stopReason] ?? ''];
  if (a.error) return [a.error.code, a.error.message];
  return null;
}

function whyCell(a) {
  const why = whyEnded(a);
  if (!why) return el('td', { class: 'why' });
  const [code, message] = why;
  return el('td', { class: 'why', title: `${code}: ${message}` }, el('b', { text: code }), `: ${clip(message, 80)}`);
}

/**
 * Actions need a process that hosts the run and applies them (the API's `live`): on a finished run,
 * or one nothing hosts, the buttons are disabled and say why.
 * @param {TeamReply} team
 */
function renderActions(team) {
  const root = team.agents.find((a) => a.id === team.run.rootId);
  const finished = root !== undefined && !['running', 'waiting', 'stalled', 'budgetPaused'].includes(root.status);
  const why = team.live
    ? null
    : finished
      ? `The run has finished (its root is ${root?.status}): nothing applies actions to it any more`
      : 'No process hosts this run now: resume it (troupe resume --ui) to act on it from here';
  const titles = {
    pause: 'Pause the budget: no new paid model call starts until it is resumed',
    resume: 'Resume the budget: agents paused by it run again',
    send: 'Send this message to the agent',
    stop: 'Stop this agent',
  };
  for (const [id, title] of Object.entries(titles)) {
    const button = /** @type {HTMLButtonElement} */ ($(id));
    button.disabled = why !== null;
    button.title = why ?? title;
  }
  // A disabled button shows no tooltip in every browser: its group says it too.
  $('budget-actions').title = why ?? '';
  state.why = why;
  // An unfinished run nobody hosts still takes an answer to an approval (the server applies it and
  // its next host runs the step), when the server can host it for that moment.
  state.approvalWhy = team.answersApprovals && !finished ? null : why;
  approvalButtons();
}

// Only the rows in view (and a few either side) are in the page; a spacer row above and one below
// stand for the rest, so a run of thousands of agents renders and scrolls like one of five.
const ROW_HEIGHT = 26; // table.agents tbody tr in style.css
const OVERSCAN = 8;

function agentRow(a) {
  return el(
    'tr',
    { 'data-agent': a.name, 'data-id': a.id, class: a.id === state.agentId ? 'selected' : '', onclick: () => openAgent(a.id) },
    el('td', { style: `padding-left:${8 + a.depth * 18}px`, text: a.name }),
    el('td', {}, pill(a.status)),
    el('td', { class: 'waits', text: a.waitingOn ?? '', ...(a.waitingOn ? { title: a.waitingOn } : {}) }),
    whyCell(a),
    el('td', { text: String(a.turns) }),
    el('td', { text: usd(a.spentUsd) }),
    el('td', { text: a.lastTool ?? '' }),
  );
}

function renderRows() {
  const box = $('team-scroll');
  const rows = state.rows;
  const first = Math.max(0, Math.floor(box.scrollTop / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(rows.length, first + Math.ceil(box.clientHeight / ROW_HEIGHT) + 2 * OVERSCAN);
  const spacer = (rowsOf) => el('tr', { class: 'spacer', style: `height:${rowsOf * ROW_HEIGHT}px` }, el('td', { colspan: '7' }));
  $('agents').replaceChildren(spacer(first), ...rows.slice(first, last).map(agentRow), spacer(rows.length - last));
}

// ── one agent ──────────────────────────────────────────────────────────────────────────────────

const LIFECYCLE = {
  nodes: {
    running: [210, 20],
    waiting: [80, 75],
    stalled: [210, 75],
    budgetPaused: [340, 75],
    completed: [45, 140],
    stopped: [160, 140],
    failed: [265, 140],
    crashed: [375, 140],
  },
  edges: [
    ['running', 'waiting'],
    ['running', 'stalled'],
    ['running', 'budgetPaused'],
    ['running', 'completed'],
    ['running', 'stopped'],
    ['running', 'failed'],
    ['running', 'crashed'],
  ],
};

function lifecycleDiagram(current) {
  const ns = 'http://www.w3.org/2000/svg';
  const make = (tag, attrs = {}) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    return node;
  };
  const svg = make('svg', { class: 'lifecycle', viewBox: '0 0 420 165' });
  const defs = make('defs');
  const marker = make('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto' });
  marker.append(make('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#b0bec5' }));
  defs.append(marker);
  svg.append(defs);
  for (const [from, to] of LIFECYCLE.edges) {
    const [x1, y1] = LIFECYCLE.nodes[from];
    const [x2, y2] = LIFECYCLE.nodes[to];
    svg.append(make('line', { x1, y1: y1 + 11, x2, y2: y2 - 11 }));
  }
  for (const [status, [x, y]] of Object.entries(LIFECYCLE.nodes)) {
    const g = make('g', { 'data-status': status, class: status === current ? 'current' : '' });
    const r = make('rect', { x: x - 40, y: y - 11, width: 80, height: 22, rx: 6 });
    if (status === current) r.setAttribute('style', `fill:${STATUS_COLORS[status]};stroke:#000`);
    const t = make('text', { x, y, ...(status === current ? { fill: '#fff' } : {}) });
    t.textContent = status;
    g.append(r, t);
    svg.append(g);
  }
  return svg;
}

/** Long content is folded: the first lines show, the rest opens on a click. */
function folded(text, limit = 600) {
  if (text.length <= limit) return el('div', { text });
  return el('details', {}, el('summary', { text: `${text.slice(0, 200)}… (${text.length} characters)` }), el('div', { text }));
}

const contentText = (content) => (typeof content === 'string' ? content : Array.isArray(content) ? content.map((p) => p.text ?? `[${p.type}]`).join('\n') : '');

function transcriptItem(item) {
  const body = el(
    'div',
    { class: `item ${item.role}` },
    el('div', { class: 'role', text: item.role === 'tool' ? `tool result · ${item.name}${item.isError ? ' · error' : ''}` : item.role }),
  );
  if (item.content) body.append(folded(contentText(item.content)));
  for (const call of item.toolCalls ?? []) body.append(el('div', { class: 'call' }, folded(`→ ${call.name}(${call.arguments})`, 300)));
  if (item.refusal) body.append(el('div', { text: `refusal: ${item.refusal}` }));
  return body;
}

/** Show run `id` (a fork, or the run a fork came from). */
function showRun(id) {
  field('run').value = id;
  $('run').dispatchEvent(new Event('change'));
}

const runLink = (id) => el('a', { href: '#', 'data-run': id, onclick: (e) => (e.preventDefault(), showRun(id)), text: id });

/** Where the run shown was forked from, and the runs forked from it (fork/fork.ts). */
function renderLineage(team) {
  const parts = [];
  if (team.origin) parts.push('fork of ', runLink(team.origin.run), ` at ${team.origin.agent}:${team.origin.turn}`);
  if (team.forks.length > 0) {
    if (parts.length > 0) parts.push(' · ');
    parts.push('forks: ');
    team.forks.forEach((f, i) => parts.push(...(i > 0 ? [', '] : []), runLink(f.runId), ` (at ${f.origin.agent}:${f.origin.turn})`));
  }
  $('lineage').replaceChildren(...parts);
}

/**
 * The transcript, with "fork here" after each committed turn (turnPoints: the transcript's length
 * right after it) when this server can fork.
 */
function transcriptWithForks(agent, transcript, turnPoints) {
  const after = new Map(turnPoints.map((p) => [p.sessionLength, p.turn]));
  const nodes = [];
  const forkButton = (turn) =>
    el('button', {
      type: 'button',
      class: 'fork',
      'data-turn': String(turn),
      text: `Fork here (after ${agent.name}'s turn ${turn})`,
      onclick: async () => {
        const out = $('action-result');
        if (await action({ kind: 'fork', agent: agent.id, turn }, 'forking', out)) out.append(' ', runLink(out.dataset.run ?? ''));
      },
    });
  transcript.forEach((item, i) => {
    nodes.push(transcriptItem(item));
    const turn = after.get(i + 1);
    if (turn !== undefined && state.team && /** @type {TeamReply} */ (state.team).canFork) nodes.push(forkButton(turn));
  });
  return nodes;
}

async function openAgent(id) {
  state.agentId = id;
  $('action-result').textContent = '';
  for (const tr of $('agents').querySelectorAll('tr')) tr.classList.toggle('selected', tr.dataset.id === id);
  selectInGraph($('graph'), id);
  showWriting();
  await refreshAgent();
}

async function refreshAgent() {
  if (state.agentId === null) return;
  let d;
  try {
    d = await api('/api/agent', { run: state.run ?? '', agent: state.agentId });
  } catch (err) {
    showProblem(err);
    return;
  }
  const a = d.agent;
  $('agent').hidden = false;
  $('agent-name').replaceChildren(`${a.name} `, pill(a.status));
  const bits = [
    `id ${a.id}`,
    `turns ${a.turns}`,
    `depth ${a.depth}`,
    a.waitKind && `waits on ${a.waitKind}`,
    a.stopReason && `stop reason ${a.stopReason}`,
    a.error && `${a.error.code}: ${a.error.message}`,
  ];
  $('agent-meta').textContent = bits.filter(Boolean).join(' · ');
  $('agent-task').textContent = a.report ? `task: ${a.task}\nreport: ${a.report.summary}` : `task: ${a.task}`;
  $('lifecycle').replaceChildren(lifecycleDiagram(a.status));
  const spend = Object.entries(d.spentByPurpose);
  $('spend').replaceChildren(
    ...(spend.length
      ? spend.map(([p, v]) => el('tr', {}, el('td', { text: p }), el('td', { text: usd(v) })))
      : [el('tr', {}, el('td', { text: 'nothing spent' }))]),
  );
  $('children').replaceChildren(
    ...d.children.map((c) => el('li', {}, el('a', { href: '#', onclick: (e) => (e.preventDefault(), openAgent(c.id)), text: c.name }), ' ', pill(c.status))),
  );
  $('mailbox').replaceChildren(
    ...d.mailbox.map((m) =>
      el(
        'li',
        { class: m.deliveredAt === null ? 'pending' : '' },
        `${time(m.createdAt)} ${m.noticeKey ? 'notice' : m.type} from ${m.fromName}${m.deliveredAt === null ? ' (waiting in the mailbox)' : ''}: `,
        folded(m.content, 300),
      ),
    ),
  );
  $('transcript').replaceChildren(...transcriptWithForks(a, d.transcript, d.turnPoints));
  agentApprovals(a.id);
}

async function action(body, label, out = $('action-result')) {
  out.className = 'action-result';
  out.textContent = `${label}…`;
  delete out.dataset.run;
  try {
    const r = await api('/api/action', {}, { run: state.run, ...body });
    out.className = 'action-result ok';
    out.textContent = r.message;
    if (r.runId) out.dataset.run = r.runId;
    return true;
  } catch (err) {
    const e = /** @type {Error & { code?: string }} */ (err);
    out.className = 'action-result error';
    out.textContent = `${e.code}: ${e.message}`;
    return false;
  }
}

// ── approvals: the steps the run's rules hold for a person (host/async/approvals.ts) ────────────

const APPROVAL_COLORS = { pending: '#f9a825', approved: '#1565c0', ran: '#2e7d32', denied: '#6d4c41', failed: '#c62828', in_doubt: '#8e24aa' };
const approvalPill = (s) => el('span', { class: 'pill', style: `background:${APPROVAL_COLORS[s] ?? '#999'}`, text: s.replace('_', ' '), 'data-state': s });
const pretty = (v) => JSON.stringify(v ?? {}, null, 2);
/** The cards of pending approvals by id: kept across reads, so an answer being written survives a refresh. @type {Map<string, HTMLElement>} */
const approvalCards = new Map();

function say(out, kind, text) {
  out.className = `action-result ${kind}`;
  out.textContent = text;
}

function approvalHead(a) {
  return el(
    'div',
    { class: 'approval-head' },
    el('b', { text: a.id }),
    el('span', { text: a.agentName }),
    el('code', { text: a.tool }),
    el('span', { class: `risk ${a.risk}`, text: a.risk.replace('_', ' ') }),
    el('span', { class: 'when', text: `asked ${time(a.askedAt)}` }),
  );
}

/** A pending approval: its arguments editable (JSON, checked here before anything is posted), Approve, and Deny with a reason. @param {Approval} a */
function pendingCard(a) {
  const original = pretty(a.args);
  const args = /** @type {HTMLTextAreaElement} */ (el('textarea', { class: 'approval-args', spellcheck: 'false', 'aria-label': `arguments of ${a.id}` }));
  args.value = original;
  args.rows = Math.min(12, original.split('\n').length + 1);
  const reason = /** @type {HTMLInputElement} */ (
    el('input', { type: 'text', class: 'approval-reason', placeholder: 'why not (the agent is told)', 'aria-label': `reason to deny ${a.id}` })
  );
  const out = el('div', { class: 'action-result', role: 'status' });
  const answered = async (body, label) => {
    if (await action({ kind: 'approval', approval: a.id, ...body }, label, out)) {
      say($('approval-result'), 'ok', out.textContent ?? '');
      void refresh();
    }
  };
  const approve = el('button', {
    type: 'button',
    class: 'approve',
    text: 'Approve',
    onclick: () => {
      let parsed;
      try {
        parsed = JSON.parse(args.value);
      } catch (err) {
        return say(out, 'error', `The arguments are not JSON (${/** @type {Error} */ (err).message}): nothing was sent`);
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
        return say(out, 'error', 'The arguments must be a JSON object: nothing was sent');
      // Sent only when changed: the step runs with the arguments it asked with otherwise.
      const edited = JSON.stringify(parsed) !== JSON.stringify(a.args ?? {});
      void answered({ approve: true, ...(edited ? { args: parsed } : {}) }, edited ? 'approving with the edited arguments' : 'approving');
    },
  });
  const deny = el('button', {
    type: 'button',
    class: 'deny',
    text: 'Deny',
    onclick: () => {
      if (reason.value.trim() === '') {
        reason.focus();
        return say(out, 'error', 'Say why it is denied (the agent is told): nothing was sent');
      }
      void answered({ approve: false, reason: reason.value }, 'denying');
    },
  });
  args.addEventListener('input', () => {
    args.classList.toggle('edited', args.value !== original);
    say(out, '', '');
  });
  return el('div', { class: 'approval', 'data-approval': a.id }, approvalHead(a), args, el('div', { class: 'approval-actions' }, approve, reason, deny), out);
}

/** What became of an answered approval. @param {Approval} a */
function answerText(a) {
  const how = !a.answer
    ? ''
    : a.answer.approved
      ? `approved${a.answer.args ? ` with ${JSON.stringify(a.answer.args)}` : ''}`
      : `denied: ${a.answer.reason ?? ''}`;
  return a.result ? `${how} — ${a.result}` : how;
}

/** The buttons of pending approvals work while the run is live; otherwise they say why not. */
function approvalButtons() {
  for (const button of /** @type {NodeListOf<HTMLButtonElement>} */ (document.querySelectorAll('#approvals-pending button'))) {
    button.disabled = state.approvalWhy !== null;
    button.title =
      state.approvalWhy ??
      (button.classList.contains('approve') ? 'Run the step (with the arguments as edited)' : 'Do not run it; the agent is told the reason');
  }
}

/** @param {Approval[]} list pending first */
function renderApprovals(list) {
  state.approvals = list;
  const pending = list.filter((a) => a.state === 'pending');
  const answered = list.filter((a) => a.state !== 'pending');
  $('approvals').hidden = list.length === 0;
  $('approvals').classList.toggle('waiting', pending.length > 0);
  $('approvals-count').textContent = pending.length ? `${pending.length} waiting for you` : 'none waiting';
  for (const id of [...approvalCards.keys()]) if (!pending.some((a) => a.id === id)) approvalCards.delete(id);
  for (const a of pending) if (!approvalCards.has(a.id)) approvalCards.set(a.id, pendingCard(a));
  // Put back only when the set changed: moving a card would take the focus from an edit in progress.
  const box = $('approvals-pending');
  const shown = [...box.children].map((c) => /** @type {HTMLElement} */ (c).dataset.approval);
  if (shown.join() !== pending.map((a) => a.id).join()) box.replaceChildren(...pending.map((a) => /** @type {HTMLElement} */ (approvalCards.get(a.id))));
  approvalButtons();
  $('approvals-answered').replaceChildren(
    ...answered.map((a) =>
      el(
        'li',
        { 'data-approval': a.id, 'data-state': a.state },
        approvalPill(a.state),
        ' ',
        el('b', { text: a.id }),
        ` ${a.agentName} · `,
        el('code', { text: a.tool }),
        ` (${a.risk}): `,
        folded(answerText(a), 300),
      ),
    ),
  );
  if (state.agentId !== null) agentApprovals(state.agentId);
}

/** The open agent's approvals, in its panel (answered in the Approvals panel above). */
function agentApprovals(agentId) {
  const mine = state.approvals.filter((a) => a.agentId === agentId);
  $('agent-approvals').hidden = mine.length === 0;
  $('agent-approvals-list').replaceChildren(
    ...mine.map((a) =>
      el(
        'li',
        { 'data-approval': a.id, 'data-state': a.state },
        approvalPill(a.state),
        ` ${a.id} `,
        el('code', { text: a.tool }),
        a.state === 'pending' ? ' — answer it under Approvals above' : `: ${clip(answerText(a), 200)}`,
      ),
    ),
  );
}

// ── reading again when the run changes ─────────────────────────────────────────────────────────

const timeline = createTimeline({
  scroll: $('tl-scroll'),
  spacer: $('tl-spacer'),
  canvas: /** @type {HTMLCanvasElement} */ ($('tl-canvas')),
  tip: $('tl-tip'),
  onLane: (id) => openAgent(id),
});
// For tests and the curious: the timeline's state (how many lanes the last frame drew).
/** @type {any} */ (window).troupeTimeline = timeline;

function renderRunMarks(marks) {
  $('run-marks').replaceChildren(
    ...(marks.length ? marks.map((m) => el('li', { 'data-kind': m.kind, text: `${time(m.at)} ${m.label}` })) : [el('li', { text: 'none' })]),
  );
}

/** The run's hostings, listed when there are several (it was killed or stopped, and resumed). @param {Timeline['hostings']} hostings */
function renderHostings(hostings) {
  $('hostings-box').hidden = hostings.length < 2;
  const seconds = (ms) => `${(ms / 1000).toFixed(2)} s`;
  $('hostings').replaceChildren(
    ...hostings.flatMap((h, i) => {
      const boot = h.boot === null ? '' : ` (boot ${h.boot})`;
      const last = i === hostings.length - 1;
      const item = el('li', {
        'data-kind': 'hosting',
        text: `hosting ${i + 1}${boot}: ${i === 0 ? 'started' : 'resumed'} ${time(h.from)}, ${last ? 'the latest' : `last event ${time(h.to)}`}`,
      });
      if (last) return [item];
      const next = hostings[i + 1];
      return [item, el('li', { 'data-kind': 'gap', text: `not hosted for ${seconds(next.from - h.to)}: its process was stopped or killed` })];
    }),
  );
}

let reading = null;
let again = false;
async function refresh() {
  if (reading) {
    again = true;
    return reading;
  }
  reading = (async () => {
    do {
      again = false;
      try {
        const team = await api('/api/team', state.run ? { run: state.run } : {});
        state.run = team.run.id;
        state.live = team.live;
        followStream(team.run.id);
        // Live: a process drives the run shown and it has not finished (actions reach it).
        $('conn').className = `conn ${team.live ? 'live' : ''}`;
        $('conn').textContent = team.live ? 'live' : 'not live (read only)';
        renderTeam(team);
        renderApprovals((await api('/api/approvals', { run: state.run })).approvals);
        if (state.view === 'timeline') {
          const t = await api('/api/timeline', { run: state.run });
          timeline.set(t);
          renderRunMarks(t.marks);
          renderHostings(t.hostings);
        }
        await refreshAgent();
        showProblem(null);
      } catch (err) {
        showProblem(err);
      }
    } while (again);
  })();
  await reading;
  reading = null;
}

// ── the live stream: what agents are writing now (/api/stream) ─────────────────────────────────

/** Each agent's answer text streamed since its last other event (the stream merges pieces). @type {Map<string, string>} */
const writing = new Map();
/** @type {EventSource | null} */
let stream = null;
/** @type {string | null} */
let streamRun = null;

function showWriting() {
  const text = state.agentId === null ? undefined : writing.get(state.agentId);
  $('live').hidden = !text;
  $('live-text').textContent = text ?? '';
}

/** Follow run `run`'s live stream from now on (a reconnection resumes after the last event seen). */
function followStream(run) {
  if (run === streamRun) return;
  stream?.close();
  writing.clear();
  showWriting();
  streamRun = run;
  stream = new EventSource(`/api/stream?${new URLSearchParams({ token, run, after: 'now' })}`);
  stream.addEventListener('agent.delta', (m) => {
    const e = JSON.parse(m.data);
    if (e.delta.kind !== 'text') return;
    writing.set(e.agentId, (writing.get(e.agentId) ?? '') + e.delta.text);
    showWriting();
  });
  // Any other event of an agent ends what it was writing (its answer is in the transcript then).
  for (const type of ['agent.status', 'agent.said', 'agent.activity']) {
    stream.addEventListener(type, (m) => {
      writing.delete(JSON.parse(m.data).agentId);
      showWriting();
    });
  }
  stream.addEventListener('end', () => stream?.close());
}

function connect() {
  const conn = $('conn');
  const events = new EventSource(`/api/events?token=${encodeURIComponent(token)}`);
  events.addEventListener('changed', () => void refresh());
  events.onerror = () => {
    conn.className = 'conn down';
    conn.textContent = 'disconnected — reconnecting…';
    // The browser retries a dropped stream by itself (each connection starts with a read of
    // everything, so the page catches up from the database), but not one refused outright: a
    // process restarted on this port with another token. Say so, and try again in a while.
    if (events.readyState === EventSource.CLOSED) {
      showProblem({
        code: 'DISCONNECTED',
        message: 'the server refused this page’s token (restarted? open the URL it printed, or set TROUPE_UI_TOKEN to keep one across restarts)',
      });
      setTimeout(connect, 2_000);
    }
  };
}

// ── wiring ─────────────────────────────────────────────────────────────────────────────────────

for (const tab of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll('.tab'))) {
  tab.addEventListener('click', () => {
    state.view = tab.dataset.view ?? 'team';
    for (const t of document.querySelectorAll('.tab')) t.classList.toggle('active', t === tab);
    $('team').hidden = state.view !== 'team';
    $('timeline').hidden = state.view !== 'timeline';
    void refresh();
  });
}
$('run').addEventListener('change', () => {
  state.run = field('run').value;
  $('approval-result').textContent = '';
  state.agentId = null;
  $('agent').hidden = true;
  void refresh();
});
$('agent-close').addEventListener('click', () => {
  state.agentId = null;
  $('agent').hidden = true;
});
$('send').addEventListener('click', async () => {
  const content = field('message').value;
  if (await action({ kind: 'send', agent: state.agentId, content }, 'sending')) field('message').value = '';
});
$('stop').addEventListener('click', () => action({ kind: 'stop', agent: state.agentId, cascade: field('cascade').checked }, 'stopping'));
$('pause').addEventListener('click', () => action({ kind: 'pause' }, 'pausing the budget'));
$('resume').addEventListener('click', () => action({ kind: 'resume' }, 'resuming the budget'));
$('team-scroll').addEventListener('scroll', () => requestAnimationFrame(renderRows));
window.addEventListener('resize', () => requestAnimationFrame(renderRows));
$('zoom-in').addEventListener('click', () => timeline.zoom(0.5));
$('zoom-out').addEventListener('click', () => timeline.zoom(2));
$('zoom-reset').addEventListener('click', () => timeline.fit());
$('legend').replaceChildren(
  ...Object.keys(STATUS_COLORS).map((s) => pill(s)),
  ...Object.entries(MARK_COLORS).map(([kind, color]) =>
    el('span', { class: 'mark-key' }, el('span', { class: 'diamond', style: `background:${color}` }), ` ${kind}`),
  ),
  el(
    'span',
    { class: 'mark-key', title: 'Marks too close to tell apart share a badge: hover it for each, zoom in to split it' },
    el('span', { class: 'badge-key', text: '3' }),
    ' marks together',
  ),
  el(
    'span',
    { class: 'mark-key', title: 'No process hosted the run: it was stopped or killed, then resumed' },
    el('span', { class: 'gap-key' }),
    ' not hosted',
  ),
);

connect();
