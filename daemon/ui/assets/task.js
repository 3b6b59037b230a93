// One task: its state, attempts (typed outcomes, durations), parameters (secrets are
// redacted by the daemon for roles below admin), dependencies both ways, a live tail of
// its log, and the actions its state allows the signed-in role.

import { get, post, may, follow, ApiError } from './api.js';
import { followLog } from './logtail.js';
import { h, fill, link, badge, time, duration, describe, table, section, throttle, keepingFocus, refocusAction, serial } from './dom.js';

export const name = 'tasks';
export const title = 'Task';

export async function render(main, [idText], ctx) {
  const id = Number(idText);
  const head = h('div', { id: 'task-head' });
  const actions = h('div', { class: 'actions', id: 'task-actions' });
  const facts = h('div', { id: 'task-facts' });
  const attempts = h('div', { id: 'task-attempts' });
  const deps = h('div', { id: 'task-deps' });
  const params = h('div', { id: 'task-params' });
  const logBox = h('pre', { id: 'task-log', class: 'log', tabindex: '0', 'aria-label': 'The task\'s log', 'aria-live': 'off' });
  const logState = h('p', { class: 'muted', id: 'task-log-state' });
  fill(main, head, actions,
    h('div', { class: 'grid' }, section('Task', facts), section('Dependencies', deps)),
    section('Attempts', attempts),
    section('Log', logState, logBox),
    section('Parameters and environment', params));

  let task = null;
  const draw = serial(() => keepingFocus(main, async () => {
    task = await get(`/tasks/${id}`, ctx.signal);
    document.title = `#${id} · orchestrator`;
    drawHead(head, task);
    drawActions(actions, task, ctx, () => draw());
    drawFacts(facts, task);
    drawAttempts(attempts, task);
    drawParams(params, task);
    main.dataset.loaded = 'true';
    main.dataset.status = task.state.status;
  }));
  await draw();
  await drawDeps(deps, task, ctx.signal);
  const redraw = throttle(() => draw().catch((e) => ctx.signal.aborted || ctx.notify(e.message)), 300);
  follow({ task: id }, redraw, ctx.signal, ctx.live);
  followLog(`/tasks/${id}/logs`, logBox, logState, ctx.signal, {
    words: (page) => (page.complete
      ? (page.size ? `The whole log (${page.size} bytes); the task is over.` : 'The task wrote nothing.')
      : '▶ Following the log…'),
    stopAtEnd: true,
    pauseMs: () => 1000,
  });
}

function drawHead(el, task) {
  const step = task.spec.workflow;
  fill(el,
    h('h1', {}, `Task #${task.id} `, badge(task.state.status)),
    h('p', { class: 'mono wrap' }, describe(task.spec)),
    step ? h('p', {}, step.rollback ? 'Compensation of step ' : 'Step ', h('strong', {}, step.step), ' of ', link(`/ui/workflows/${step.workflow}`, `workflow #${step.workflow}`)) : null);
}

function drawActions(el, task, ctx, redraw) {
  fill(el);
  if (!may('operator')) return;
  const status = task.state.status;
  const act = (label, path, what) => h('button', {
    type: 'button', 'data-action': label.toLowerCase(),
    onclick: async (event) => {
      event.target.disabled = true;
      try {
        await post(path);
        ctx.notify(what, 'ok');
        await redraw();
        refocusAction(el, label.toLowerCase());
      } catch (e) {
        ctx.notify(e instanceof ApiError ? e.message : String(e));
        event.target.disabled = false;
      }
    },
  }, label);
  const final = ['succeeded', 'failed', 'cancelled', 'dependency_failed'].includes(status);
  if (!final) el.append(act('Cancel', `/tasks/${task.id}/cancel`, `Task #${task.id} cancelled.`));
  if (['failed', 'cancelled', 'dependency_failed'].includes(status)) {
    el.append(act('Retry', `/tasks/${task.id}/retry`, `Task #${task.id} queued again.`));
  }
}

function drawFacts(el, task) {
  const s = task.spec;
  const state = task.state;
  const rows = [
    ['Status', badge(state.status)],
    ['Submitted', time(task.submitted_at)],
    ['Why', state.reason ? outcome(state.reason) : (state.dependency ? link(`/ui/tasks/${state.dependency}`, `dependency #${state.dependency} did not succeed`) : null)],
    ['Waiting on', state.waiting_on ? state.waiting_on.map((d) => [link(`/ui/tasks/${d}`, `#${d}`), ' ']) : null],
    ['Next attempt', state.retry_at ? [`#${state.next_attempt} at `, time(state.retry_at)] : null],
    ['Until', state.until ? time(state.until) : null],
    ['Paused since', state.paused_at ? time(state.paused_at) : null],
    ['Label', s.label], ['Group', s.group || 'default'], ['Priority', s.priority],
    ['Retries', `${s.retries} (backoff ${duration(s.backoff.initial_ms)} → ${duration(s.backoff.max_ms)})`],
    ['Timeout', s.timeout_ms ? duration(s.timeout_ms) : null],
    ['Start no earlier than', s.not_before ? time(s.not_before) : null],
    ['Runs on', s.on && s.on.length ? s.on.join(', ') : null],
    ['Working directory', s.cwd ? h('span', { class: 'mono' }, s.cwd) : null],
  ].filter(([, value]) => value !== null && value !== undefined && value !== '');
  fill(el, h('dl', { class: 'facts' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));
}

/** An attempt's outcome, by its type. */
export function outcome(o) {
  if (!o) return h('span', { class: 'muted' }, 'running');
  switch (o.type) {
    case 'exited': return h('span', { class: o.code === 0 ? 'ok-text' : 'bad-text' }, `exit code ${o.code}`);
    case 'signalled': return h('span', { class: 'bad-text' }, `killed by signal ${o.signal}`);
    case 'timed_out': return h('span', { class: 'bad-text' }, `timed out after ${duration(o.after_ms)}`);
    case 'spawn_failed': return h('span', { class: 'bad-text' }, `could not start: ${o.error}`);
    case 'interrupted': return h('span', { class: 'warn-text' }, 'interrupted (the daemon stopped)');
    case 'cancelled': return h('span', { class: 'muted' }, 'cancelled');
    default: return JSON.stringify(o);
  }
}

function drawAttempts(el, task) {
  const rows = (task.attempts || []).map((a) => h('tr', {},
    h('td', {}, String(a.number)),
    h('td', {}, time(a.started_at)),
    h('td', {}, time(a.finished_at)),
    h('td', {}, a.finished_at ? duration(new Date(a.finished_at) - new Date(a.started_at)) : h('span', { class: 'run-text' }, '▶ running')),
    h('td', {}, outcome(a.outcome)),
    h('td', {}, a.node || '')));
  fill(el, table(['#', 'Started', 'Finished', 'Took', 'Outcome', 'Node'], rows, 'No attempt yet.'));
}

function drawParams(el, task) {
  const params = task.spec.params;
  const env = task.spec.env || {};
  fill(el,
    h('h3', {}, 'Parameters'),
    params && Object.keys(params).length ? h('pre', { class: 'json', id: 'task-params-json' }, JSON.stringify(params, null, 2)) : h('p', { class: 'muted' }, 'None.'),
    h('h3', {}, 'Environment'),
    Object.keys(env).length
      ? h('dl', { class: 'facts mono' }, Object.entries(env).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]))
      : h('p', { class: 'muted' }, 'None beyond the daemon\'s.'),
    may('admin') ? null : h('p', { class: 'muted' }, 'Secrets are shown only to admins (redacted here).'));
}

async function drawDeps(el, task, signal) {
  const listOf = async (ids) => {
    const shown = ids.slice(0, 20);
    const rows = await Promise.all(shown.map(async (dep) => {
      try {
        const t = await get(`/tasks/${dep}`, signal);
        return h('li', {}, badge(t.state.status), ' ', link(`/ui/tasks/${dep}`, `#${dep}`), ' ', h('span', { class: 'mono' }, describe(t.spec)));
      } catch (e) {
        return h('li', {}, link(`/ui/tasks/${dep}`, `#${dep}`), h('span', { class: 'muted' }, ` (${e.message})`));
      }
    }));
    if (ids.length > shown.length) rows.push(h('li', { class: 'muted' }, `and ${ids.length - shown.length} more`));
    return rows.length ? h('ul', { class: 'plain' }, rows) : h('p', { class: 'muted' }, 'None.');
  };
  const after = task.spec.after || [];
  const soft = task.spec.soft_after || [];
  const dependants = await get(`/tasks/${task.id}/dependants`, signal);
  const theirs = dependants.tasks.map((t) => h('li', {}, badge(t.state.status), ' ', link(`/ui/tasks/${t.id}`, `#${t.id}`), ' ', h('span', { class: 'mono' }, describe(t.spec))));
  fill(el,
    h('h3', {}, 'Waits for'), await listOf(after),
    soft.length ? [h('h3', {}, 'Waits for the end of'), await listOf(soft)] : null,
    h('h3', {}, 'Needed by'),
    theirs.length ? h('ul', { class: 'plain', id: 'dependants' }, theirs) : h('p', { class: 'muted', id: 'dependants' }, 'No task depends on it.'),
    dependants.complete ? null : h('p', { class: 'muted' }, `Looked at the tasks up to #${dependants.searched_through}.`));
}
