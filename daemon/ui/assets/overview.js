// The overview: tasks by status, the queue, what runs now, the last hour's throughput
// and failures, the nodes of a cluster and the test environments alive; redrawn as the
// event stream says things changed.

import { get, follow, ApiError } from './api.js';
import { h, svg, fill, link, badge, time, section, throttle } from './dom.js';

export const name = 'overview';
export const title = 'Overview';

const ORDER = ['running', 'queued', 'blocked', 'delayed', 'retry_waiting', 'stashed', 'succeeded', 'failed', 'cancelled', 'dependency_failed'];

export async function render(main, _params, ctx) {
  const counts = h('div', { class: 'tiles', id: 'counts' });
  const activity = h('div', { id: 'activity' });
  const running = h('div', { id: 'running' });
  const failures = h('div', { id: 'failures' });
  const nodes = h('div', { id: 'nodes' });
  const environments = h('div', { id: 'environments' });
  fill(main,
    h('h1', {}, 'Overview'),
    counts,
    h('div', { class: 'grid' },
      section('Last hour', activity),
      section('Running now', running),
      section('Recent failures', failures),
      section('Test environments', environments),
      section('Nodes', nodes)));

  const draw = async () => {
    const [health, queue, hour, live, failed, envList] = await Promise.all([
      get('/health', ctx.signal),
      get('/queue', ctx.signal),
      get('/activity', ctx.signal),
      get('/tasks?status=running&limit=10', ctx.signal),
      get('/tasks?status=failed&limit=5', ctx.signal),
      get('/test/environments?alive=true', ctx.signal),
    ]);
    drawCounts(counts, health, queue);
    drawActivity(activity, hour);
    fill(running, taskList(live, 'Nothing runs.'));
    fill(failures, taskList(failed, 'No task failed.'));
    drawEnvs(environments, envList);
    await drawNodes(nodes, health, ctx.signal);
    main.dataset.loaded = 'true';
  };
  await draw();
  const redraw = throttle(() => draw().catch((e) => ctx.signal.aborted || ctx.notify(e.message)), 2000);
  follow({}, redraw, ctx.signal, ctx.live);
  // The minute buckets move on even when nothing happens.
  const timer = setInterval(redraw, 30000);
  ctx.signal.addEventListener('abort', () => clearInterval(timer));
}

function drawCounts(el, health, queue) {
  const c = health.counts;
  const tile = (label, value, href, tone = '') => link(href,
    h('span', { class: `tile ${tone}` }, h('span', { class: 'value' }, String(value)), h('span', { class: 'label' }, label)));
  const depth = c.queued + c.blocked + c.delayed + c.retry_waiting;
  const tiles = [tile('queue depth', depth, '/ui/tasks?status=queued', 'wait'), tile('running', c.running, '/ui/tasks?status=running', 'run')];
  for (const status of ORDER) {
    if (status === 'running') continue;
    tiles.push(tile(status.replaceAll('_', ' '), c[status] ?? 0, `/ui/tasks?status=${status}`));
  }
  const paused = queue.paused ? h('p', { class: 'warn' }, '⏸ The queue is paused: no task starts until it is resumed.') : null;
  fill(el, ...tiles);
  if (paused) el.append(paused);
  el.dataset.total = String(Object.values(c).reduce((a, b) => a + b, 0));
}

function drawActivity(el, hour) {
  const minutes = hour.minutes;
  const done = minutes.map((m) => m.succeeded + m.failed);
  const highest = Math.max(1, ...done);
  const width = 300;
  const height = 60;
  const step = width / Math.max(1, minutes.length - 1);
  const points = done.map((v, i) => `${(i * step).toFixed(1)},${(height - (v / highest) * (height - 4) - 2).toFixed(1)}`).join(' ');
  const failedBars = minutes.map((m, i) => m.failed
    ? svg('rect', { x: (i * step - 1.5).toFixed(1), y: height - 6, width: 3, height: 6, class: 'bad-fill' })
    : null);
  const total = done.reduce((a, b) => a + b, 0);
  fill(el,
    svg('svg', { viewBox: `0 0 ${width} ${height}`, class: 'spark', role: 'img', 'aria-label': `Tasks finished per minute over the last hour: ${total} in all, at most ${highest} in a minute` },
      svg('polyline', { points, class: 'line' }), ...failedBars),
    h('p', {},
      h('strong', { id: 'finished-hour' }, String(total)), ' finished, ',
      h('strong', { id: 'failed-hour', class: hour.failed_last_hour ? 'bad-text' : '' }, String(hour.failed_last_hour)), ' failed (✗ marks the minutes), ',
      h('strong', {}, String(minutes.reduce((a, m) => a + m.submitted, 0))), ' submitted'),
    new Date(hour.counted_since) > new Date(minutes[0].at)
      ? h('p', { class: 'muted' }, 'Counted since ', time(hour.counted_since), ' (the daemon has not seen the whole hour).')
      : null);
}

function taskList(list, empty) {
  if (!list.length) return h('p', { class: 'muted' }, empty);
  return h('ul', { class: 'plain' }, list.map((t) => h('li', {},
    badge(t.state.status), ' ', link(`/ui/tasks/${t.id}`, `#${t.id}`), ' ',
    h('span', { class: 'mono' }, summary(t)))));
}

function summary(task) {
  const kind = task.spec.kind;
  const text = kind.type === 'command' ? [kind.program, ...(kind.args || [])].join(' ') : kind.type === 'nu' ? kind.code : kind.path;
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

/** The environments that have containers (the daemon bounds how many may exist): how
 * many, how many of them failed (kept for inspection until deleted), and the newest. */
function drawEnvs(el, alive) {
  const failed = alive.filter((e) => e.state.status === 'failed').length;
  fill(el,
    h('p', {}, h('strong', { id: 'envs-alive' }, String(alive.length)), ' with containers',
      failed ? [', ', h('strong', { id: 'envs-failed', class: 'bad-text' }, String(failed)), ' of them failed'] : null,
      ' · ', link('/ui/envs', 'all environments')),
    alive.length ? h('ul', { class: 'plain' }, alive.slice(0, 5).map((e) => h('li', {}, badge(e.state.status), ' ', link(`/ui/envs/${e.id}`, `${e.name} (#${e.id})`)))) : null);
}

async function drawNodes(el, health, signal) {
  if (health.storage !== 'postgres') {
    fill(el, h('p', { class: 'muted' }, `One daemon on its embedded store (${health.storage}).`));
    return;
  }
  try {
    const cluster = await get('/cluster', signal);
    const leader = cluster.leader && cluster.leader.node;
    fill(el, h('ul', { class: 'plain' }, (cluster.nodes || []).map((n) => h('li', {},
      h('strong', {}, n.name), n.name === leader ? ' (leader)' : '', ` — ${n.role}, ${n.parallel} slots on ${n.host}; heartbeat `, time(n.heartbeat_at)))));
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    fill(el, h('p', { class: 'muted' }, e.message));
  }
}
