// The workflows: a page of summaries at a time (newest first), following the event
// stream.

import { get, query, follow } from './api.js';
import { h, fill, link, badge, time, table, throttle } from './dom.js';

export const name = 'workflows';
export const title = 'Workflows';

const PAGE = 50;

export async function render(main, _params, ctx) {
  const before = ctx.params.get('before') || '';
  const list = h('div', { id: 'workflow-table' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  fill(main, h('h1', {}, 'Workflows'), list, pager);
  let shown = new Set();
  const draw = async () => {
    const workflows = await get(`/workflows${query({ limit: PAGE, before })}`, ctx.signal);
    shown = new Set(workflows.map((w) => w.id));
    fill(list, table(['Workflow', 'Status', 'Kind', 'Steps', 'Submitted'], workflows.map((w) => h('tr', { 'data-workflow': w.id },
      h('td', {}, link(`/ui/workflows/${w.id}`, `#${w.id} ${w.name}`)),
      h('td', {}, badge(w.state.status)),
      h('td', {}, w.kind),
      h('td', {}, progress(w)),
      h('td', {}, time(w.submitted_at)))), 'No workflow yet.'));
    const last = workflows[workflows.length - 1];
    fill(pager,
      before ? link('/ui/workflows', '⇤ Newest') : null,
      workflows.length === PAGE ? link(`/ui/workflows${query({ before: last.id })}`, 'Older →') : null);
    main.dataset.loaded = 'true';
  };
  await draw();
  const redraw = throttle(() => draw().catch((e) => ctx.signal.aborted || ctx.notify(e.message)), 1000);
  follow({}, (event) => {
    if (!event) return redraw();
    const mine = shown.has(event.task) || shown.has(event.workflow);
    if (mine || (!before && event.kind.type === 'workflow')) redraw();
  }, ctx.signal, ctx.live);
}

/** Steps done of all, and what did not succeed. */
function progress(w) {
  const c = w.step_counts;
  const bad = c.failed + c.cancelled + c.dependency_failed;
  return h('span', {},
    `${c.succeeded}/${w.steps} succeeded`,
    c.running ? h('span', { class: 'run-text' }, ` · ▶ ${c.running} running`) : null,
    bad ? h('span', { class: 'bad-text' }, ` · ✗ ${bad} not`) : null,
    w.compensations ? h('span', { class: 'warn-text' }, ` · ↺ ${w.compensations} compensations`) : null);
}
