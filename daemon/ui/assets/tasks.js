// The tasks: a page at a time (newest first, `before` pages on), filtered by status,
// label, group and text; the filters are in the URL, and the page follows the event
// stream.

import { request, query, follow } from './api.js';
import { h, fill, link, badge, time, duration, describe, taskTimes, table, throttle } from './dom.js';

export const name = 'tasks';
export const title = 'Tasks';

const PAGE = 50;
const STATUSES = ['queued', 'running', 'blocked', 'delayed', 'retry_waiting', 'stashed', 'succeeded', 'failed', 'cancelled', 'dependency_failed'];

export async function render(main, _params, ctx) {
  const p = ctx.params;
  const filters = { status: p.get('status') || '', label: p.get('label') || '', group: p.get('group') || '', q: p.get('q') || '' };
  const before = p.get('before') || '';
  const status = h('select', { id: 'f-status', name: 'status' },
    h('option', { value: '' }, 'any status'),
    STATUSES.map((s) => h('option', { value: s, selected: s === filters.status }, s.replaceAll('_', ' '))));
  const text = (id, label, value, extra = {}) => [
    h('label', { for: id }, label),
    h('input', { id, name: id.slice(2), value, type: 'search', autocomplete: 'off', ...extra })];
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter tasks' },
    h('label', { for: 'f-status' }, 'Status'), status,
    ...text('f-label', 'Label', filters.label),
    ...text('f-group', 'Group', filters.group),
    ...text('f-q', 'Text', filters.q, { 'data-filter': true, placeholder: 'id, command, step… ( / )' }),
    h('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    ctx.navigate(`/ui/tasks${query(data)}`);
  });
  const rows = h('div', { id: 'task-table' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  fill(main, h('h1', {}, 'Tasks'), form, rows, pager);

  let shown = new Set();
  const draw = async () => {
    const { data, headers } = await request(`/tasks${query({ ...filters, before, limit: PAGE })}`, { signal: ctx.signal });
    shown = new Set(data.map((t) => t.id));
    fill(rows, table(['Task', 'Status', 'Command', 'Label', 'Group', 'Workflow', 'Submitted', 'Took'],
      data.map(row), 'No task matches.'));
    const next = headers.get('x-next-before');
    const searched = filters.q || filters.group;
    fill(pager,
      before ? link(`/ui/tasks${query(filters)}`, '⇤ Newest') : null,
      next ? link(`/ui/tasks${query({ ...filters, before: next })}`, searched && data.length < PAGE ? 'Search older tasks →' : 'Older →') : null,
      searched ? h('span', { class: 'muted' }, ` (a search looks at up to 10,000 tasks a page)`) : null);
    main.dataset.loaded = 'true';
  };
  await draw();
  const redraw = throttle(() => draw().catch((e) => ctx.signal.aborted || ctx.notify(e.message)), 1000);
  follow({}, (event) => {
    // The first page shows new tasks; any page shows its own tasks' changes (null: events
    // were missed, read it again).
    if (!event || (!before && event.kind.type === 'submitted') || shown.has(event.task)) redraw();
  }, ctx.signal, ctx.live);
}

function row(task) {
  const { started, ended } = taskTimes(task);
  const step = task.spec.workflow;
  return h('tr', { 'data-task': task.id },
    h('td', {}, link(`/ui/tasks/${task.id}`, `#${task.id}`)),
    h('td', {}, badge(task.state.status)),
    h('td', { class: 'mono wrap' }, describe(task.spec)),
    h('td', {}, task.spec.label || ''),
    h('td', {}, task.spec.group || ''),
    h('td', {}, step ? link(`/ui/workflows/${step.workflow}`, `${step.rollback ? '↺ ' : ''}${step.step} (#${step.workflow})`) : ''),
    h('td', {}, time(task.submitted_at)),
    h('td', {}, started && ended ? duration(ended - started) : ''));
}
