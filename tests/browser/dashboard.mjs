// Drives the dashboard in the distribution's headless Chromium (playwright-core, no
// browser download) through one scenario against a running daemon, and exits non-zero
// with the reason when a check fails. tests/tests/dashboard.rs prepares the daemon and
// the data, then runs:
//
//   node tests/browser/dashboard.mjs SCENARIO
//
// with ORCH_URL (http://127.0.0.1:PORT), ORCH_TOKENS (JSON: role → token), ORCH_DATA
// (JSON: what the scenario works on) and ORCH_SHOTS (a directory for screenshots).
// bench/dashboard.sh runs the `render` scenario for its timings.

import { chromium } from 'playwright-core';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const url = process.env.ORCH_URL;
const tokens = JSON.parse(process.env.ORCH_TOKENS || '{}');
const data = JSON.parse(process.env.ORCH_DATA || '{}');
const shots = process.env.ORCH_SHOTS;
const scenario = process.argv[2];
const WAIT = 30000;

function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

/** Signs in through the form as `role`, on whatever page is loaded. */
async function signIn(page, role) {
  await page.locator('#token').fill(tokens[role]);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#who').getByText(`(${role})`).waitFor({ timeout: WAIT });
}

async function open(browser, { width = 1280, height = 800, dark = false } = {}) {
  const context = await browser.newContext({ viewport: { width, height }, colorScheme: dark ? 'dark' : 'light' });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error' && !/40[13]|status of 40/.test(m.text())) problems.push(`console: ${m.text()}`); });
  return { context, page, problems };
}

async function loaded(page) {
  await page.locator('main[data-loaded="true"]').waitFor({ timeout: WAIT });
}

async function shot(page, name) {
  if (!shots) return;
  mkdirSync(shots, { recursive: true });
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

/** Each role signs in; what it is offered follows its role; a forged action is refused. */
async function roles(browser) {
  for (const role of ['viewer', 'operator', 'admin']) {
    const { context, page, problems } = await open(browser);
    // A deep link before signing in: the form, then the view asked for.
    await page.goto(`${url}/ui/tasks/${data.running}`);
    await page.locator('#token').waitFor({ timeout: WAIT });
    await signIn(page, role);
    await loaded(page);
    check(new URL(page.url()).pathname === `/ui/tasks/${data.running}`, `${role} lands on the deep link, not ${page.url()}`);
    const cancel = await page.locator('[data-action="cancel"]').count();
    check(cancel === (role === 'viewer' ? 0 : 1), `${role} sees ${cancel} cancel buttons`);
    const audit = await page.locator('#nav a[data-view="audit"]').isVisible();
    check(audit === (role === 'admin'), `${role} sees the audit view: ${audit}`);
    if (role === 'viewer') {
      check(await page.locator('button[data-action]').count() === 0, 'the viewer sees no action button');
      const status = await page.evaluate(async ([id, token]) => {
        const answer = await fetch(`/tasks/${id}/cancel`, { method: 'POST', headers: { Authorization: `Bearer ${token}` } });
        return answer.status;
      }, [data.running, tokens.viewer]);
      check(status === 403, `a viewer's forged cancel answers ${status}`);
      const still = await page.evaluate(async ([id, token]) => {
        const answer = await fetch(`/tasks/${id}`, { headers: { Authorization: `Bearer ${token}` } });
        return (await answer.json()).state.status;
      }, [data.running, tokens.viewer]);
      check(still === 'running', `the task is ${still} after the forged cancel`);
      await page.goto(`${url}/ui/audit`);
      await page.getByText('Not for this role').waitFor({ timeout: WAIT });
      // No action anywhere: a workflow's page with a step chosen, the environments.
      await page.goto(`${url}/ui/workflows/${data.workflow}?step=a`);
      await loaded(page);
      await page.locator('#workflow-step').getByText('Step a').waitFor({ timeout: WAIT });
      check(await page.locator('button[data-action]').count() === 0, 'the viewer sees no action on a workflow');
      await page.goto(`${url}/ui/envs`);
      await loaded(page);
      check(await page.locator('#env-create').count() === 0, 'the viewer is offered no creation');
    }
    // Every view loads from its own address.
    for (const path of ['/ui/', '/ui/tasks', `/ui/tasks?status=running`, '/ui/workflows', `/ui/workflows/${data.workflow}`, '/ui/envs', ...(role === 'admin' ? ['/ui/audit'] : [])]) {
      await page.goto(`${url}${path}`);
      await loaded(page);
    }
    check(!problems.length, `${role}: ${problems.join('; ')}`);
    await context.close();
  }
}

/** Whether the focused element is the button of `action`, and not the one marked before
 * (the view was drawn anew meanwhile). */
async function focusedAnew(page, action) {
  return page.evaluate((a) => {
    const el = document.activeElement;
    return Boolean(el && el.dataset.action === a && !el.dataset.marked);
  }, action);
}

/** An operator cancels a running task from its page with the keyboard, and sees it
 * cancelled; the task's progress redraws the page meanwhile without taking the focus
 * away from the button. */
async function cancel(browser) {
  const { context, page, problems } = await open(browser);
  await page.goto(`${url}/ui/signin`);
  await signIn(page, 'operator');
  await page.goto(`${url}/ui/tasks/${data.running}`);
  await loaded(page);
  await page.locator('main[data-status="running"]').waitFor({ timeout: WAIT });
  const button = page.locator('[data-action="cancel"]');
  await button.focus();
  await button.evaluate((el) => { el.dataset.marked = 'yes'; });
  // The task reports progress ten times a second: the page is drawn anew meanwhile.
  await page.waitForFunction(() => !document.querySelector('[data-action="cancel"][data-marked]'), null, { timeout: WAIT });
  check(await focusedAnew(page, 'cancel'), 'the focus stays on the cancel button across redraws');
  await page.keyboard.press('Enter');
  await page.locator('#task-head [data-status="cancelled"]').waitFor({ timeout: WAIT });
  await page.locator('#notice').getByText('cancelled').waitFor({ timeout: WAIT });
  check(await page.locator('[data-action="retry"]').count() === 1, 'a cancelled task offers a retry');
  check(!problems.length, problems.join('; '));
  await context.close();
}

/** The log tail follows a task that writes as it runs. */
async function logTail(browser) {
  const { context, page, problems } = await open(browser);
  await page.goto(`${url}/ui/signin`);
  await signIn(page, 'viewer');
  await page.goto(`${url}/ui/tasks/${data.writer}`);
  await loaded(page);
  const log = page.locator('#task-log');
  await log.getByText('line 3').waitFor({ timeout: WAIT });
  const early = (await log.textContent()).split('\n').filter((l) => l.startsWith('line ')).length;
  check(early < data.lines, `the tail followed the task as it wrote (saw ${early} of ${data.lines} lines at first)`);
  await log.getByText(`line ${data.lines}`).waitFor({ timeout: WAIT });
  await page.locator('#task-log[data-complete="true"]').waitFor({ timeout: WAIT });
  const lines = (await log.textContent()).split('\n').filter((l) => l.startsWith('line '));
  check(lines.length === data.lines, `the tail shows ${lines.length} lines, each once (${data.lines} written)`);
  check(!problems.length, problems.join('; '));
  await context.close();
}

/** A workflow goes from running to rolled back in the graph, without a reload. */
async function rollback(browser) {
  const { context, page, problems } = await open(browser);
  await page.goto(`${url}/ui/signin`);
  await signIn(page, 'viewer');
  await page.goto(`${url}/ui/workflows/${data.workflow}`);
  await loaded(page);
  await page.evaluate(() => { window.stillTheSamePage = true; });
  const node = (step) => page.locator(`#workflow-graph a[data-step="${step}"]`);
  await node(data.slow).and(page.locator('[data-status="running"]')).waitFor({ timeout: WAIT });
  await shot(page, 'workflow-running');
  // The slow step waits for this file, then fails: the workflow rolls back.
  writeFileSync(data.gate, '');
  await page.locator('main[data-status="rolled_back"]').waitFor({ timeout: 60000 });
  await node(data.slow).and(page.locator('[data-status="failed"]')).waitFor({ timeout: WAIT });
  const lane = page.locator('#workflow-graph a[data-step^="rollback:"]');
  await lane.first().waitFor({ timeout: WAIT });
  await lane.and(page.locator('[data-status="succeeded"]')).first().waitFor({ timeout: WAIT });
  check(await page.evaluate(() => window.stillTheSamePage === true), 'the page was reloaded');
  check(await page.locator('#workflow-gantt rect[data-bar]').count() >= 3, 'the timeline has the steps and the compensation');
  // Keyboard: a step is reached with Tab and chosen with Enter.
  await node(data.slow).focus();
  await page.keyboard.press('Enter');
  await page.locator('#workflow-step').getByText(`Step ${data.slow}`).waitFor({ timeout: WAIT });
  check(new URL(page.url()).searchParams.get('step') === data.slow, 'the chosen step is in the address');
  await shot(page, 'workflow-rolled-back');
  check(!problems.length, problems.join('; '));
  await context.close();
}

/** An operator restarts a failed workflow from its failed step. */
async function restart(browser) {
  const { context, page, problems } = await open(browser);
  await page.goto(`${url}/ui/signin`);
  await signIn(page, 'operator');
  await page.goto(`${url}/ui/workflows/${data.failed_workflow}?step=${data.failed_step}`);
  await loaded(page);
  await page.locator('[data-action="restart-from-this-step"]').click();
  await page.waitForURL((u) => u.pathname !== `/ui/workflows/${data.failed_workflow}` && u.pathname.startsWith('/ui/workflows/'), { timeout: WAIT });
  await loaded(page);
  await page.locator('#workflow-head').getByText(`workflow #${data.failed_workflow}`).waitFor({ timeout: WAIT });
  const steps = await page.locator('#workflow-graph a[data-step]').evaluateAll((els) => els.map((e) => e.dataset.step));
  check(JSON.stringify(steps) === JSON.stringify(data.restarted_steps), `the new workflow has the steps ${steps}`);
  check(!problems.length, problems.join('; '));
  await context.close();
}

/** An operator retries a failed step of a running workflow from its page; the step and
 * the step that needs it then succeed, live. */
async function retryStep(browser) {
  const { context, page, problems } = await open(browser);
  await page.goto(`${url}/ui/signin`);
  await signIn(page, 'operator');
  await page.goto(`${url}/ui/workflows/${data.workflow}?step=${data.flaky}`);
  await loaded(page);
  const node = (step) => page.locator(`#workflow-graph a[data-step="${step}"]`);
  await node(data.flaky).and(page.locator('[data-status="failed"]')).waitFor({ timeout: WAIT });
  await node(data.after).and(page.locator('[data-status="dependency_failed"]')).waitFor({ timeout: WAIT });
  check(await page.locator('main[data-status="running"]').count() === 1, 'the workflow still runs');
  // What made the step fail is fixed; the retry goes through the keyboard.
  writeFileSync(data.marker, '');
  const retry = page.locator('[data-action="retry-step"]');
  await retry.focus();
  await page.keyboard.press('Enter');
  await page.locator('#notice').getByText(`Step ${data.flaky} queued again`).waitFor({ timeout: WAIT });
  await node(data.flaky).and(page.locator('[data-status="succeeded"]')).waitFor({ timeout: WAIT });
  await node(data.after).and(page.locator('[data-status="succeeded"]')).waitFor({ timeout: WAIT });
  writeFileSync(data.gate, '');
  await page.locator('main[data-status="succeeded"]').waitFor({ timeout: WAIT });
  // The waves are the plan's: the gate and the flaky step first, then the one after.
  const waves = await page.locator('#workflow-waves li').evaluateAll((els) => els.map((e) => `${e.dataset.wave}: ${e.textContent}`));
  check(JSON.stringify(waves) === JSON.stringify(data.waves), `the waves are ${JSON.stringify(waves)}`);
  check(!problems.length, problems.join('; '));
  await context.close();
}

/** An operator creates a test environment from the dashboard and sees it go through its
 * stages in the list without a reload, follows its log, runs its tests with the keyboard,
 * a viewer sees no action on it, and the operator deletes it. */
async function environments(browser) {
  const { context, page, problems } = await open(browser);
  await page.goto(`${url}/ui/signin`);
  await signIn(page, 'operator');
  await page.goto(`${url}/ui/envs`);
  await loaded(page);
  await page.evaluate(() => { window.stillTheSamePage = true; });
  await page.locator('#env-what').selectOption(`single:${data.taskserv}`);
  await page.getByRole('button', { name: 'Create' }).click();
  // The list shows it while it is set up: its `env` events redraw the list.
  await page.locator('#env-table tr[data-env] [data-status="starting"]').first().waitFor({ timeout: 60000 });
  check(await page.evaluate(() => window.stillTheSamePage === true), 'the list was reloaded');
  // The creation is answered once it is ready: the view goes to the environment.
  await page.waitForURL((u) => /^\/ui\/envs\/\d+$/.test(u.pathname), { timeout: 120000 });
  await page.locator('main[data-status="ready"]').waitFor({ timeout: WAIT });
  const id = Number(new URL(page.url()).pathname.split('/').pop());
  await page.locator('#env-probes [data-status="succeeded"]').first().waitFor({ timeout: WAIT });
  await page.locator('#env-log').getByText(data.taskserv).first().waitFor({ timeout: WAIT });
  const run = page.locator('[data-action="run-tests"]');
  await run.focus();
  await page.keyboard.press('Enter');
  await page.locator(`#env-results tr[data-result="${data.taskserv}"] [data-status="succeeded"]`).waitFor({ timeout: 120000 });
  await page.locator('#notice').getByText('passed').waitFor({ timeout: WAIT });
  check(await page.evaluate(() => document.activeElement && document.activeElement.dataset.action === 'run-tests'), 'the focus is back on the run button');
  await shot(page, 'environment-ready');
  // A viewer sees it, and no action on it.
  const viewer = await open(browser);
  await viewer.page.goto(`${url}/ui/envs/${id}`);
  await viewer.page.locator('#token').waitFor({ timeout: WAIT });
  await signIn(viewer.page, 'viewer');
  await loaded(viewer.page);
  await viewer.page.locator('main[data-status="ready"]').waitFor({ timeout: WAIT });
  check(await viewer.page.locator('button[data-action]').count() === 0, 'the viewer sees no action on an environment');
  // The viewer's page follows the deletion the operator asks for, without a reload.
  await viewer.page.evaluate(() => { window.stillTheSamePage = true; });
  await page.locator('[data-action="delete"]').click();
  await page.locator('main[data-status="deleted"]').waitFor({ timeout: 120000 });
  await viewer.page.locator('main[data-status="deleted"]').waitFor({ timeout: WAIT });
  check(await viewer.page.evaluate(() => window.stillTheSamePage === true), 'the viewer\'s page was reloaded');
  check(await page.locator('button[data-action]').count() === 0, 'a deleted environment offers no action');
  check(!viewer.problems.length, `viewer: ${viewer.problems.join('; ')}`);
  await viewer.context.close();
  check(!problems.length, problems.join('; '));
  await context.close();
}

/** An admin checks the audit chain when asked, and filters the log by outcome and user. */
async function audit(browser) {
  const { context, page, problems } = await open(browser);
  await page.goto(`${url}/ui/signin`);
  await signIn(page, 'admin');
  await page.goto(`${url}/ui/audit`);
  await loaded(page);
  check(await page.locator('#chain-state[data-intact]').count() === 0, 'the chain is not checked before it is asked for');
  await page.locator('[data-action="verify"]').click();
  await page.locator('#chain-state[data-intact="true"]').waitFor({ timeout: WAIT });
  // Kept for the tab: another visit shows the last check.
  await page.goto(`${url}/ui/audit`);
  await loaded(page);
  await page.locator('#chain-state[data-intact="true"]').waitFor({ timeout: WAIT });
  await page.locator('#a-ok').selectOption('false');
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.waitForURL((u) => u.searchParams.get('ok') === 'false', { timeout: WAIT });
  await loaded(page);
  const refused = await page.locator('#audit-table tr[data-seq]').evaluateAll((rows) => rows.map((r) => r.querySelector('[data-status]').dataset.status));
  check(refused.length === data.refused, `${refused.length} refused entries shown, ${data.refused} made`);
  check(refused.every((s) => s === 'failed'), `only refused entries: ${refused}`);
  await page.goto(`${url}/ui/audit?uid=${data.other_uid}`);
  await loaded(page);
  check(await page.locator('#audit-table tr[data-seq]').count() === 0, `no entry of uid ${data.other_uid}`);
  await page.goto(`${url}/ui/audit?uid=${data.uid}`);
  await loaded(page);
  check(await page.locator('#audit-table tr[data-seq]').count() === data.entries, `every entry is uid ${data.uid}'s`);
  check(!problems.length, problems.join('; '));
  await context.close();
}

/** Every view at 1280×800, light and dark, and at a phone's width. */
async function screenshots(browser) {
  const views = [
    ['overview', '/ui/'], ['tasks', '/ui/tasks'], ['task', `/ui/tasks/${data.task}`],
    ['workflows', '/ui/workflows'], ['workflow', `/ui/workflows/${data.workflow}?step=${data.step}`],
    ['envs', '/ui/envs'], ['audit', '/ui/audit'],
  ];
  for (const [label, size] of [['desktop', { width: 1280, height: 800 }], ['dark', { width: 1280, height: 800, dark: true }], ['phone', { width: 390, height: 844 }]]) {
    const { context, page, problems } = await open(browser, size);
    await page.goto(`${url}/ui/signin`);
    await signIn(page, 'admin');
    for (const [name, path] of views) {
      await page.goto(`${url}${path}`);
      await loaded(page);
      // Nothing runs off the side of the screen.
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      check(overflow <= 1, `${name} at ${label} is ${overflow}px wider than the screen`);
      await shot(page, `${name}-${label}`);
    }
    check(!problems.length, `${label}: ${problems.join('; ')}`);
    await context.close();
  }
}

/** Page weight and time to first render of the overview and the tasks view (for
 * bench/dashboard.sh): prints one JSON line. */
async function render(browser) {
  const { context, page } = await open(browser);
  await page.goto(`${url}/ui/signin`);
  await signIn(page, 'viewer');
  const results = {};
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  let transferred = 0;
  cdp.on('Network.loadingFinished', (e) => { transferred += e.encodedDataLength; });
  for (const [name, path] of [['overview', '/ui/'], ['tasks', '/ui/tasks'], ['workflow', `/ui/workflows/${data.workflow}`]]) {
    const runs = [];
    let bytes = 0;
    for (let i = 0; i < (data.runs || 5); i++) {
      await page.goto('about:blank');
      transferred = 0;
      const start = Date.now();
      await page.goto(`${url}${path}`);
      await loaded(page);
      runs.push(Date.now() - start);
      // What the view asks for after its first drawing (the event stream stays open and
      // is not counted).
      await page.waitForTimeout(500);
      bytes = transferred;
    }
    runs.sort((a, b) => a - b);
    results[name] = { median_ms: runs[Math.floor(runs.length / 2)], min_ms: runs[0], max_ms: runs[runs.length - 1], bytes };
  }
  console.log(JSON.stringify(results));
  await context.close();
}

const SCENARIOS = { roles, cancel, 'log-tail': logTail, rollback, restart, 'retry-step': retryStep, environments, audit, screenshots, render };

const run = SCENARIOS[scenario];
if (!run) {
  console.error(`usage: node dashboard.mjs (${Object.keys(SCENARIOS).join('|')})`);
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
let status = 0;
try {
  await run(browser);
  console.log(`${scenario}: passed`);
} catch (error) {
  console.error(`${scenario}: ${error.stack || error}`);
  status = 1;
} finally {
  await browser.close();
}
process.exit(status);
