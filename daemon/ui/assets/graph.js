// Drawing a workflow: its DAG in waves (a step's wave is one after the latest of its
// dependencies, as the plan orders them), its compensations as a lane of their own, and
// a timeline (Gantt) of when each step ran.

import { svg, statusLook } from './dom.js';

const NODE_W = 156;
const NODE_H = 34;
const COL_GAP = 56;
const ROW_GAP = 12;
const TOP = 26;

/** Each step's wave (0 first): the plan's, as the daemon gives it with each step (under
 * the workflow's parallel limits, over the whole workflow); for a step without one, one
 * after the latest of its dependencies on the page. */
export function waves(steps) {
  const wave = new Map();
  for (const step of steps) {
    if (step.wave) {
      wave.set(step.id, step.wave - 1);
      continue;
    }
    const deps = [...(step.dependencies || []), ...(step.soft_dependencies || [])];
    const before = deps.filter((d) => wave.has(d)).map((d) => wave.get(d));
    wave.set(step.id, before.length ? Math.max(...before) + 1 : 0);
  }
  return wave;
}

function cut(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

/** One node: a focusable link with the status's colour and icon. */
function node(x, y, label, entry, selected, href) {
  const status = entry.status || 'removed';
  const [icon, tone] = statusLook(status);
  return svg('a', { href, 'data-step': entry.rollback ? `rollback:${entry.task}` : entry.id, 'data-status': status, class: `node ${tone}${selected ? ' selected' : ''}`, 'aria-label': `${label}: ${status.replaceAll('_', ' ')}` },
    svg('rect', { x, y, width: NODE_W, height: NODE_H, rx: 6 }),
    svg('text', { x: x + 10, y: y + NODE_H / 2 + 5, class: 'icon' }, icon),
    svg('text', { x: x + 28, y: y + NODE_H / 2 + 5 }, cut(label, 17)),
    svg('title', {}, `${label} — ${status.replaceAll('_', ' ')} (task ${entry.task})`));
}

/** The graph of `steps` (a page of them) and the lane of `compensations`. */
export function drawGraph(steps, compensations, selected, hrefOf) {
  const wave = waves(steps);
  // One column per wave that has steps on this page (a later page starts at a later
  // wave), in the waves' order, each labelled with its wave.
  const numbers = [...new Set(steps.map((s) => wave.get(s.id)))].sort((a, b) => a - b);
  const columnOf = new Map(numbers.map((n, i) => [n, i]));
  const columns = numbers.map(() => []);
  for (const step of steps) columns[columnOf.get(wave.get(step.id))].push(step);
  const at = new Map();
  columns.forEach((column, w) => column.forEach((step, i) => {
    at.set(step.id, { x: 10 + w * (NODE_W + COL_GAP), y: TOP + i * (NODE_H + ROW_GAP) });
  }));
  const tallest = Math.max(1, ...columns.map((c) => c.length));
  const lane = TOP + tallest * (NODE_H + ROW_GAP) + 20;
  const width = Math.max(320, 20 + Math.max(1, columns.length) * (NODE_W + COL_GAP) - COL_GAP);
  const perRow = Math.max(1, Math.floor((width - 10) / (NODE_W + ROW_GAP)));
  const laneRows = Math.ceil(compensations.length / perRow);
  const height = compensations.length ? lane + 24 + laneRows * (NODE_H + ROW_GAP) : lane - 10;
  const parts = [];
  numbers.forEach((n, w) => parts.push(svg('text', { x: 10 + w * (NODE_W + COL_GAP), y: 16, class: 'wave' }, `wave ${n + 1}`)));
  for (const step of steps) {
    const to = at.get(step.id);
    const edges = [...(step.dependencies || []).map((d) => [d, false]), ...(step.soft_dependencies || []).map((d) => [d, true])];
    for (const [dep, soft] of edges) {
      const from = at.get(dep);
      if (!from) continue;
      const x1 = from.x + NODE_W;
      const y1 = from.y + NODE_H / 2;
      const x2 = to.x;
      const y2 = to.y + NODE_H / 2;
      const mid = (x1 + x2) / 2;
      parts.push(svg('path', { d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2 - 4},${y2}`, class: soft ? 'edge soft' : 'edge', 'marker-end': 'url(#arrow)' }));
    }
  }
  for (const step of steps) {
    const { x, y } = at.get(step.id);
    parts.push(node(x, y, step.id, step, step.id === selected, hrefOf(step)));
  }
  if (compensations.length) {
    parts.push(svg('line', { x1: 0, x2: width, y1: lane - 8, y2: lane - 8, class: 'lane-rule' }));
    parts.push(svg('text', { x: 10, y: lane + 10, class: 'wave' }, 'rollback lane (compensations, in the order they ran)'));
    compensations.forEach((c, i) => {
      const x = 10 + (i % perRow) * (NODE_W + ROW_GAP);
      const y = lane + 20 + Math.floor(i / perRow) * (NODE_H + ROW_GAP);
      parts.push(node(x, y, `↺ ${c.id}${c.round > 1 ? ` #${c.round}` : ''}`, c, selected === `rollback:${c.task}`, hrefOf(c)));
    });
  }
  return svg('svg', { class: 'dag', viewBox: `0 0 ${width} ${height}`, width, height, role: 'group', 'aria-label': `The workflow's graph: ${steps.length} steps in ${columns.length} waves, ${compensations.length} compensations` },
    svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 8 8', refX: 7, refY: 4, markerWidth: 7, markerHeight: 7, orient: 'auto' }, svg('path', { d: 'M0,0 L8,4 L0,8 z', class: 'arrow' }))),
    ...parts);
}

/** The timeline of the entries' tasks (`times` by task id: `{started, ended}` in ms),
 * steps first, then the compensations in their lane; a running one reaches `now`. It is
 * `width` pixels wide (at least 560: narrower screens scroll it). */
export function drawGantt(steps, compensations, times, now, width = 760) {
  const rows = [];
  for (const entry of steps) rows.push({ entry, label: entry.id });
  const lane = rows.length;
  for (const entry of compensations) rows.push({ entry, label: `↺ ${entry.id}` });
  const known = rows.map((r) => times.get(r.entry.task)).filter((t) => t && t.started);
  const LABEL = 130;
  const WIDTH = Math.max(560, Math.round(width));
  const ROW = 20;
  const height = 24 + rows.length * ROW + (compensations.length ? 18 : 0);
  if (!known.length) return null;
  const start = Math.min(...known.map((t) => t.started));
  const end = Math.max(start + 1, ...known.map((t) => t.ended || now));
  const scale = (WIDTH - LABEL - 10) / (end - start);
  const parts = [
    svg('text', { x: LABEL, y: 14, class: 'wave' }, '0'),
    svg('text', { x: WIDTH - 10, y: 14, class: 'wave', 'text-anchor': 'end' }, `${((end - start) / 1000).toFixed(2)} s`),
  ];
  rows.forEach((row, i) => {
    const y = 24 + i * ROW + (compensations.length && i >= lane ? 18 : 0);
    if (compensations.length && i === lane) {
      parts.push(svg('text', { x: 4, y: y - 5, class: 'wave' }, 'rollback lane'));
    }
    const status = row.entry.status || 'removed';
    const [icon, tone] = statusLook(status);
    parts.push(svg('text', { x: 4, y: y + 13 }, `${icon} ${cut(row.label, 16)}`));
    const t = times.get(row.entry.task);
    if (t && t.started) {
      const x = LABEL + (t.started - start) * scale;
      const w = Math.max(2, ((t.ended || now) - t.started) * scale);
      parts.push(svg('rect', { x: x.toFixed(1), y: y + 3, width: w.toFixed(1), height: ROW - 6, rx: 3, class: `bar ${tone}`, 'data-bar': row.label },
        svg('title', {}, `${row.label}: ${status.replaceAll('_', ' ')}, ${(((t.ended || now) - t.started) / 1000).toFixed(3)} s`)));
    }
  });
  return svg('svg', { class: 'gantt', viewBox: `0 0 ${WIDTH} ${height}`, width: WIDTH, height, role: 'img', 'aria-label': `Timeline of ${rows.length} tasks over ${((end - start) / 1000).toFixed(2)} seconds` }, ...parts);
}
