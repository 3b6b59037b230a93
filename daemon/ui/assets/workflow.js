// One workflow: its DAG with live step states, the waves, a timeline of its steps and a
// lane of its compensations, a page of steps at a time; the actions its state allows
// (cancel, rollback, retry a step, restart from a step) for operators.

import { get, post, query, may, follow, ApiError } from './api.js';
import { h, fill, link, badge, time, duration, describe, table, section, throttle, taskTimes, keepingFocus, refocusAction, serial } from './dom.js';
import { drawGraph, drawGantt, waves } from './graph.js';

export const name = 'workflows';
export const title = 'Workflow';

/** Steps per page: the graph, timeline and list show one page. */
const PAGE = 200;

export async function render(main, [idText], ctx) {
  const id = Number(idText);
  const offset = Number(ctx.params.get('offset') || 0);
  let selected = ctx.params.get('step');
  const head = h('div', { id: 'workflow-head' });
  const actions = h('div', { class: 'actions', id: 'workflow-actions' });
  const graph = h('div', { class: 'scroll graph', id: 'workflow-graph' });
  const wavesBox = h('div', { id: 'workflow-waves' });
  const gantt = h('div', { class: 'scroll', id: 'workflow-gantt' });
  const stepBox = h('div', { id: 'workflow-step' });
  const list = h('div', { id: 'workflow-steps' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages of steps' });
  fill(main, head, actions,
    section('Graph', h('p', { class: 'muted' }, 'Select a step (click, or Tab and Enter) for its task and actions.'), graph),
    h('div', { class: 'grid' }, section('Selected step', stepBox), section('Waves', wavesBox)),
    section('Timeline', gantt),
    section('Steps', list, pager));

  let view = null;
  let times = new Map();
  const draw = serial(() => keepingFocus(main, async () => {
    view = await get(`/workflows/${id}${query({ offset, limit: PAGE })}`, ctx.signal);
    times = await loadTimes(view.tasks, ctx.signal);
    const w = view.workflow;
    const steps = view.tasks.filter((e) => !e.rollback);
    const compensations = view.tasks.filter((e) => e.rollback);
    document.title = `${w.name} #${w.id} · orchestrator`;
    main.dataset.status = w.state.status;
    drawHead(head, w, view.request);
    drawActions(actions, w, ctx, draw);
    const hrefOf = (e) => `/ui/workflows/${id}${query({ offset: offset || '', step: e.rollback ? `rollback:${e.task}` : e.id })}`;
    fill(graph, drawGraph(steps, compensations, selected, hrefOf));
    drawWaves(wavesBox, steps, w);
    fill(gantt, drawGantt(steps, compensations, times, Date.now(), gantt.clientWidth) || h('p', { class: 'muted' }, 'No step has started yet.'));
    drawStep(stepBox, w, view.tasks, selected, ctx, draw);
    fill(list, table(['Step', 'Status', 'Task', 'Needs', 'Started', 'Took'], view.tasks.map((e) => stepRow(e, times))));
    fill(pager,
      offset > 0 ? link(`/ui/workflows/${id}${query({ offset: Math.max(0, offset - PAGE) || '' })}`, '← Earlier steps') : null,
      view.next_offset ? link(`/ui/workflows/${id}${query({ offset: view.next_offset })}`, 'Later steps →') : null,
      h('span', { class: 'muted' }, ` steps ${offset + 1}–${offset + view.tasks.length} of ${w.steps + w.compensations}`));
    main.dataset.loaded = 'true';
  }));
  await draw();
  graph.addEventListener('click', (event) => {
    const a = event.target.closest('a[data-step]');
    if (!a) return;
    event.preventDefault();
    selected = a.dataset.step;
    history.replaceState(null, '', a.getAttribute('href'));
    draw().catch((e) => ctx.notify(e.message));
  });
  const redraw = throttle(() => draw().catch((e) => ctx.signal.aborted || ctx.notify(e.message)), 300);
  follow({ workflow: id }, redraw, ctx.signal, ctx.live);
  // A running step's bar grows with the time.
  const timer = setInterval(() => {
    if (view && ['running', 'rolling_back'].includes(view.workflow.state.status)) {
      const steps = view.tasks.filter((e) => !e.rollback);
      const compensations = view.tasks.filter((e) => e.rollback);
      fill(gantt, drawGantt(steps, compensations, times, Date.now(), gantt.clientWidth) || '');
    }
  }, 1000);
  ctx.signal.addEventListener('abort', () => clearInterval(timer));
}

/** The start and end of each entry's task, read in ranges of consecutive ids (a
 * workflow's steps, and each rollback's compensations, have consecutive ids). */
async function loadTimes(entries, signal) {
  const ids = [...new Set(entries.map((e) => e.task))].sort((a, b) => a - b);
  const ranges = [];
  for (const task of ids) {
    const last = ranges[ranges.length - 1];
    if (last && task === last[1] + 1) last[1] = task; else ranges.push([task, task]);
  }
  const times = new Map();
  await Promise.all(ranges.map(async ([low, high]) => {
    const tasks = await get(`/tasks${query({ before: high + 1, limit: high - low + 1 })}`, signal);
    for (const t of tasks) if (t.id >= low) times.set(t.id, { ...taskTimes(t), task: t });
  }));
  return times;
}

function drawHead(el, w, request) {
  const restart = request && request.restart_of;
  const c = w.step_counts;
  fill(el,
    h('h1', {}, `${w.name} `, h('span', { class: 'muted' }, `#${w.id} `), badge(w.state.status)),
    h('p', {},
      `${w.kind} workflow · ${w.steps} steps: ${c.succeeded} succeeded, ${c.running} running, ${c.failed} failed, ${c.dependency_failed} skipped, ${c.cancelled} cancelled`,
      w.compensations ? ` · ${w.compensations} compensations (${w.compensation_counts.succeeded} done)` : '',
      ' · submitted ', time(w.submitted_at),
      w.rollback_enabled ? ' · rolls back on failure' : ''),
    w.state.reason ? h('p', { class: 'warn-text' }, `Rollback: ${w.state.reason}`) : null,
    w.state.failed && w.state.failed.length ? h('p', { class: 'bad-text' }, `Did not succeed: ${w.state.failed.join(', ')}`) : null,
    restart ? h('p', {}, 'Restarted from step ', h('strong', {}, request.from_step), ' of ', link(`/ui/workflows/${restart}`, `workflow #${restart}`)) : null);
}

/** A button that POSTs and reports what it did (or the daemon's refusal); the focus
 * stays among the actions afterwards. */
function action(label, path, body, done, ctx) {
  const name = label.toLowerCase().replaceAll(' ', '-');
  return h('button', {
    type: 'button', 'data-action': name,
    onclick: async (event) => {
      const bar = event.target.closest('main') || document.body;
      const here = location.href;
      event.target.disabled = true;
      try {
        const answer = await post(path, body);
        await done(answer);
        // Not after going to another view (a restart opens the new workflow).
        if (location.href === here) refocusAction(bar, name);
      } catch (e) {
        ctx.notify(e instanceof ApiError ? e.message : String(e));
        event.target.disabled = false;
      }
    },
  }, label);
}

function drawActions(el, w, ctx, redraw) {
  fill(el);
  if (!may('operator')) return;
  const status = w.state.status;
  if (status === 'running') {
    el.append(action('Cancel', `/workflows/${w.id}/cancel`, undefined, async () => { ctx.notify(`Workflow #${w.id} cancelled.`, 'ok'); await redraw(); }, ctx));
  }
  if (['succeeded', 'failed', 'cancelled', 'rollback_failed'].includes(status)) {
    el.append(action('Roll back', `/workflows/${w.id}/rollback`, undefined, async () => { ctx.notify(`Workflow #${w.id} rolls back.`, 'ok'); await redraw(); }, ctx));
  }
}

/** The plan's waves of the steps on this page (a step's wave comes from the daemon's
 * plan of the whole workflow, under its parallel limits). */
function drawWaves(el, steps, w) {
  const wave = waves(steps);
  const byWave = new Map();
  for (const step of steps) {
    const n = wave.get(step.id);
    if (!byWave.has(n)) byWave.set(n, []);
    byWave.get(n).push(step.id);
  }
  const ordered = [...byWave.entries()].sort(([a], [b]) => a - b);
  fill(el,
    h('ol', { class: 'waves' }, ordered.map(([n, ids]) => h('li', { value: n + 1, 'data-wave': n + 1 }, ids.join(', ')))),
    w.waves ? h('p', { class: 'muted' }, `${w.waves} waves in all under the workflow's parallel limits (as planned; each wave starts once the one before has ended, if every step took the same time).`) : null);
}

function drawStep(el, w, entries, selected, ctx, redraw) {
  const entry = entries.find((e) => (e.rollback ? `rollback:${e.task}` : e.id) === selected);
  if (!entry) {
    fill(el, h('p', { class: 'muted' }, selected ? `No step ${selected} on this page.` : 'None selected.'));
    return;
  }
  const status = entry.status || 'removed';
  const buttons = [];
  if (may('operator') && !entry.rollback) {
    if (w.state.status === 'running' && ['failed', 'cancelled', 'dependency_failed'].includes(status)) {
      buttons.push(action('Retry step', `/tasks/${entry.task}/retry`, undefined, async () => { ctx.notify(`Step ${entry.id} queued again.`, 'ok'); await redraw(); }, ctx));
    }
    if (['succeeded', 'failed', 'cancelled'].includes(w.state.status)) {
      buttons.push(action('Restart from this step', `/workflows/${w.id}/restart`, { step: entry.id }, async (created) => {
        ctx.notify(`Workflow #${created.id} runs step ${entry.id} and every step after it.`, 'ok');
        ctx.navigate(`/ui/workflows/${created.id}`);
      }, ctx));
    }
  }
  fill(el,
    h('h3', {}, entry.rollback ? `Compensation of ${entry.id}` : `Step ${entry.id}`, ' ', badge(status)),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Task'), h('dd', {}, link(`/ui/tasks/${entry.task}`, `#${entry.task}`)),
      entry.description ? [h('dt', {}, 'Does'), h('dd', { class: 'mono wrap' }, entry.description)] : null,
      entry.dependencies && entry.dependencies.length ? [h('dt', {}, 'Needs'), h('dd', {}, entry.dependencies.join(', '))] : null,
      entry.soft_dependencies && entry.soft_dependencies.length ? [h('dt', {}, 'After'), h('dd', {}, entry.soft_dependencies.join(', '))] : null,
      entry.has_rollback ? [h('dt', {}, 'Undone by'), h('dd', {}, 'its compensation, on rollback')] : null),
    buttons.length ? h('div', { class: 'actions' }, buttons) : null);
}

function stepRow(entry, times) {
  const t = times.get(entry.task);
  return h('tr', { 'data-entry': entry.rollback ? `rollback:${entry.task}` : entry.id },
    h('td', {}, entry.rollback ? `↺ ${entry.id}` : entry.id),
    h('td', {}, badge(entry.status)),
    h('td', {}, link(`/ui/tasks/${entry.task}`, `#${entry.task}`), t ? h('span', { class: 'mono muted' }, ` ${describe(t.task.spec)}`) : null),
    h('td', {}, (entry.dependencies || []).join(', ')),
    h('td', {}, t && t.started ? time(new Date(t.started).toISOString()) : ''),
    h('td', {}, t && t.started && t.ended ? duration(t.ended - t.started) : ''));
}
