// Test environments: a page of them at a time (newest first), creation from a taskserv or
// a topology, and one environment's nodes and containers, readiness probes, test results
// and a tail of its log, with run and delete for operators; both redrawn as its `env`
// events arrive.

import { get, post, del, may, follow, request, query, ApiError } from './api.js';
import { followLog } from './logtail.js';
import { h, fill, link, badge, time, duration, table, section, throttle, keepingFocus, refocusAction, serial } from './dom.js';

export const name = 'envs';
export const title = 'Test environments';

/** Environments per page. */
const PAGE = 50;

export async function render(main, [idText], ctx) {
  if (idText) return one(main, Number(idText), ctx);
  const before = ctx.params.get('before') || '';
  const alive = ctx.params.get('alive') === 'true';
  const list = h('div', { id: 'env-table' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages of environments' });
  const create = h('div', { id: 'env-create' });
  const which = h('p', {}, alive
    ? ['Only those with containers. ', link('/ui/envs', 'Show deleted ones too')]
    : ['Deleted ones too. ', link('/ui/envs?alive=true', 'Only those with containers')]);
  fill(main, h('h1', {}, 'Test environments'), may('operator') ? section('Create', create) : null, section('Environments', which, list, pager));
  const draw = serial(() => keepingFocus(main, async () => {
    const { data: envs, headers } = await request(`/test/environments${query({ before, limit: PAGE, alive: alive || '' })}`, { signal: ctx.signal });
    fill(list, table(['Environment', 'Status', 'Kind', 'Nodes', 'Created', 'Expires'], envs.map((e) => h('tr', { 'data-env': e.id },
      h('td', {}, link(`/ui/envs/${e.id}`, `#${e.id} ${e.name}`)),
      h('td', {}, badge(e.state.status), e.state.stage ? h('span', { class: 'muted' }, ` ${e.state.stage}`) : null),
      h('td', {}, e.kind),
      h('td', {}, String(e.nodes.length)),
      h('td', {}, time(e.created_at)),
      h('td', {}, time(e.expires_at)))), 'No test environment.'));
    const next = headers.get('x-next-before');
    fill(pager,
      before ? link(`/ui/envs${query({ alive: alive || '' })}`, '⇤ Newest') : null,
      next ? link(`/ui/envs${query({ alive: alive || '', before: next })}`, 'Older →') : null);
    main.dataset.loaded = 'true';
  }));
  if (may('operator')) await creationForm(create, ctx);
  await draw();
  const redraw = throttle(() => draw().catch((e) => ctx.signal.aborted || ctx.notify(e.message)), 1000);
  follow({ type: 'env' }, redraw, ctx.signal, ctx.live);
}

/** The form: one taskserv in a container, or a cluster from a topology. */
async function creationForm(el, ctx) {
  const [taskservs, topologies] = await Promise.all([
    get('/extensions/taskservs', ctx.signal).catch(() => ({ taskservs: [] })),
    get('/test/topologies', ctx.signal).catch(() => ({ topologies: [] })),
  ]);
  const names = (taskservs.taskservs || []).map((t) => t.name).sort();
  const what = h('select', { id: 'env-what', name: 'what' },
    h('optgroup', { label: 'One taskserv' }, names.map((n) => h('option', { value: `single:${n}` }, n))),
    h('optgroup', { label: 'A topology' }, (topologies.topologies || []).map((t) => h('option', { value: `topology:${t.name}` }, `${t.name} (${t.nodes.length} nodes)`))));
  const start = h('input', { type: 'checkbox', id: 'env-start', checked: true });
  const form = h('form', { class: 'filters' },
    h('label', { for: 'env-what' }, 'From'), what,
    h('label', { class: 'check' }, start, ' start it (install, wait until ready)'),
    h('button', { type: 'submit' }, 'Create'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const [kind, value] = what.value.split(/:(.*)/s);
    const env = kind === 'single'
      ? { type: 'single', taskserv: value }
      : { type: 'cluster', name: value, topology: (topologies.topologies || []).find((t) => t.name === value) };
    const button = form.querySelector('button');
    button.disabled = true;
    ctx.notify(`Creating ${value}…`, 'ok');
    try {
      const created = await post('/test/environments/create', { env, auto_start: start.checked });
      ctx.notify(`Test environment #${created.id} is ${created.state.status}.`, created.state.status === 'failed' ? 'bad' : 'ok');
      ctx.navigate(`/ui/envs/${created.id}`);
    } catch (e) {
      ctx.notify(e instanceof ApiError ? e.message : String(e));
      button.disabled = false;
    }
  });
  fill(el, names.length || (topologies.topologies || []).length ? form : h('p', { class: 'muted' }, 'No taskserv or topology is installed.'));
}

/** Whether tests may run on an environment in `state` (as the daemon decides: created,
 * ready, or again after failed tests). */
function runnable(state) {
  return ['created', 'ready'].includes(state.status) || (state.status === 'failed' && state.stage === 'tests');
}

async function one(main, id, ctx) {
  const head = h('div', { id: 'env-head' });
  const actions = h('div', { class: 'actions', id: 'env-actions' });
  const nodes = h('div', { id: 'env-nodes' });
  const probes = h('div', { id: 'env-probes' });
  const results = h('div', { id: 'env-results' });
  const log = h('pre', { class: 'log', id: 'env-log', tabindex: '0', 'aria-label': 'The environment\'s log', 'aria-live': 'off' });
  const logState = h('p', { class: 'muted', id: 'env-log-state' });
  fill(main, head, actions, section('Nodes and containers', nodes),
    h('div', { class: 'grid' }, section('Readiness probes', probes), section('Test results', results)),
    section('Log', logState, log));
  const draw = serial(() => keepingFocus(main, async () => {
    const env = await get(`/test/environments/${id}`, ctx.signal);
    document.title = `${env.name} #${env.id} · orchestrator`;
    main.dataset.status = env.state.status;
    fill(head,
      h('h1', {}, `${env.name} `, h('span', { class: 'muted' }, `#${env.id} `), badge(env.state.status),
        env.state.stage && env.state.status === 'starting' ? h('span', { class: 'muted', id: 'env-stage' }, ` ${env.state.stage}`) : null),
      h('p', {}, `${env.kind} · network ${env.network || '—'} · created `, time(env.created_at), ' · expires ', time(env.expires_at)),
      env.state.error ? h('p', { class: 'bad-text' }, `${env.state.stage}: ${env.state.error}`) : null);
    fill(actions);
    if (may('operator')) {
      const button = (label, run) => {
        const action = label.toLowerCase().replaceAll(' ', '-');
        return h('button', { type: 'button', 'data-action': action, onclick: async (event) => {
          event.target.disabled = true;
          try {
            await run();
            await draw();
            refocusAction(actions, action);
          } catch (e) {
            ctx.notify(e instanceof ApiError ? e.message : String(e));
            event.target.disabled = false;
          }
        } }, label);
      };
      if (runnable(env.state)) {
        actions.append(button('Run tests', async () => { const r = await post(`/test/environments/${id}/run`); ctx.notify(`Tests: ${r.results.filter((t) => t.passed).length} of ${r.results.length} passed.`, 'ok'); }));
      }
      if (!['deleted', 'deleting'].includes(env.state.status)) {
        actions.append(button('Delete', async () => { await del(`/test/environments/${id}`); ctx.notify(`Test environment #${id} deleted.`, 'ok'); }));
      }
    }
    fill(nodes, table(['Node', 'Role', 'Taskservs', 'Container', 'Image'], env.nodes.map((n) => h('tr', {},
      h('td', {}, n.name), h('td', {}, n.role), h('td', {}, n.taskservs.join(', ')),
      h('td', { class: 'mono' }, n.container), h('td', { class: 'mono' }, n.image))), 'No node yet.'));
    fill(probes, table(['Node', 'Taskserv', 'Ready', 'Tries', 'Took'], env.probes.map((p) => h('tr', {},
      h('td', {}, p.node), h('td', {}, p.taskserv), h('td', {}, badge(p.ok ? 'succeeded' : 'failed')), h('td', {}, String(p.attempts)), h('td', {}, duration(p.duration_ms)))), 'No probe yet.'));
    fill(results, table(['Node', 'Taskserv', 'Result', 'Exit', 'Took'], env.results.map((r) => h('tr', { 'data-result': r.taskserv },
      h('td', {}, r.node), h('td', {}, r.taskserv), h('td', {}, badge(r.passed ? 'succeeded' : 'failed')), h('td', {}, String(r.exit_code)), h('td', {}, duration(r.duration_ms)))), 'No test has run.'));
    main.dataset.loaded = 'true';
  }));
  await draw();
  const redraw = throttle(() => draw().catch((e) => ctx.signal.aborted || ctx.notify(e.message)), 500);
  // While the daemon works on it, the log is looked at every second; otherwise when an
  // event says it changed (or every minute).
  const tailer = followLog(`/test/environments/${id}/logs`, log, logState, ctx.signal, {
    words: (page) => (page.complete
      ? (page.size ? `The log so far (${page.size} bytes); nothing is at work on the environment.` : 'Nothing logged yet.')
      : '▶ Following the log…'),
    stopAtEnd: false,
    pauseMs: (page) => (page.complete ? 60000 : 1000),
  });
  follow({ task: id, type: 'env' }, () => { redraw(); tailer.wake(); }, ctx.signal, ctx.live);
}
