// Test environments: the list, creation from a taskserv or a topology, and one
// environment's nodes and containers, readiness probes, test results and log, with run
// and delete for operators.

import { get, post, del, may, follow, ApiError } from './api.js';
import { h, fill, link, badge, time, duration, table, section, throttle } from './dom.js';

export const name = 'envs';
export const title = 'Test environments';

export async function render(main, [idText], ctx) {
  if (idText) return one(main, Number(idText), ctx);
  const list = h('div', { id: 'env-table' });
  const create = h('div', { id: 'env-create' });
  fill(main, h('h1', {}, 'Test environments'), may('operator') ? section('Create', create) : null, section('Environments', list));
  const draw = async () => {
    const envs = await get('/test/environments', ctx.signal);
    fill(list, table(['Environment', 'Status', 'Kind', 'Nodes', 'Created', 'Expires'], envs.map((e) => h('tr', { 'data-env': e.id },
      h('td', {}, link(`/ui/envs/${e.id}`, `#${e.id} ${e.name}`)),
      h('td', {}, badge(e.state.status), e.state.stage ? h('span', { class: 'muted' }, ` ${e.state.stage}`) : null),
      h('td', {}, e.kind),
      h('td', {}, String(e.nodes.length)),
      h('td', {}, time(e.created_at)),
      h('td', {}, time(e.expires_at)))), 'No test environment.'));
    main.dataset.loaded = 'true';
  };
  if (may('operator')) await creationForm(create, ctx);
  await draw();
  const redraw = throttle(() => draw().catch((e) => ctx.signal.aborted || ctx.notify(e.message)), 1000);
  follow({}, (event) => { if (event.kind.type.startsWith('env_')) redraw(); }, ctx.signal, ctx.live);
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

async function one(main, id, ctx) {
  const head = h('div', { id: 'env-head' });
  const actions = h('div', { class: 'actions', id: 'env-actions' });
  const nodes = h('div', { id: 'env-nodes' });
  const probes = h('div', { id: 'env-probes' });
  const results = h('div', { id: 'env-results' });
  const log = h('pre', { class: 'log', id: 'env-log', tabindex: '0', 'aria-label': 'The environment\'s log' });
  fill(main, head, actions, section('Nodes and containers', nodes),
    h('div', { class: 'grid' }, section('Readiness probes', probes), section('Test results', results)),
    section('Log', log));
  const draw = async () => {
    const env = await get(`/test/environments/${id}`, ctx.signal);
    document.title = `${env.name} #${env.id} · orchestrator`;
    main.dataset.status = env.state.status;
    fill(head,
      h('h1', {}, `${env.name} `, h('span', { class: 'muted' }, `#${env.id} `), badge(env.state.status)),
      h('p', {}, `${env.kind} · network ${env.network || '—'} · created `, time(env.created_at), ' · expires ', time(env.expires_at)),
      env.state.error ? h('p', { class: 'bad-text' }, `${env.state.stage}: ${env.state.error}`) : null);
    fill(actions);
    const alive = !['deleted', 'deleting'].includes(env.state.status);
    if (may('operator') && alive) {
      const button = (label, run) => h('button', { type: 'button', 'data-action': label.toLowerCase().replaceAll(' ', '-'), onclick: async (event) => {
        event.target.disabled = true;
        try { await run(); await draw(); } catch (e) { ctx.notify(e instanceof ApiError ? e.message : String(e)); event.target.disabled = false; }
      } }, label);
      actions.append(
        button('Run tests', async () => { const r = await post(`/test/environments/${id}/run`); ctx.notify(`Tests: ${r.results.filter((t) => t.passed).length} of ${r.results.length} passed.`, 'ok'); }),
        button('Delete', async () => { await del(`/test/environments/${id}`); ctx.notify(`Test environment #${id} deleted.`, 'ok'); }));
    }
    fill(nodes, table(['Node', 'Role', 'Taskservs', 'Container', 'Image'], env.nodes.map((n) => h('tr', {},
      h('td', {}, n.name), h('td', {}, n.role), h('td', {}, n.taskservs.join(', ')),
      h('td', { class: 'mono' }, n.container), h('td', { class: 'mono' }, n.image))), 'No node yet.'));
    fill(probes, table(['Node', 'Taskserv', 'Ready', 'Tries', 'Took'], env.probes.map((p) => h('tr', {},
      h('td', {}, p.node), h('td', {}, p.taskserv), h('td', {}, badge(p.ok ? 'succeeded' : 'failed')), h('td', {}, String(p.attempts)), h('td', {}, duration(p.duration_ms)))), 'No probe yet.'));
    fill(results, table(['Node', 'Taskserv', 'Result', 'Exit', 'Took'], env.results.map((r) => h('tr', {},
      h('td', {}, r.node), h('td', {}, r.taskserv), h('td', {}, badge(r.passed ? 'succeeded' : 'failed')), h('td', {}, String(r.exit_code)), h('td', {}, duration(r.duration_ms)))), 'No test has run.'));
    try {
      const text = await get(`/test/environments/${id}/logs`, ctx.signal);
      fill(log, typeof text === 'string' ? text.slice(-256 * 1024) : JSON.stringify(text));
    } catch (e) {
      fill(log, e.message);
    }
    main.dataset.loaded = 'true';
  };
  await draw();
  const redraw = throttle(() => draw().catch((e) => ctx.signal.aborted || ctx.notify(e.message)), 1000);
  follow({ task: id }, redraw, ctx.signal, ctx.live);
}
