// The audit log (admins): a page of entries at a time, filtered by action, user and
// outcome, and the hash chain's check, run when asked (it reads the whole chain) and
// kept for the browser tab.

import { get, query, ApiError } from './api.js';
import { h, fill, link, badge, time, table, section } from './dom.js';

export const name = 'audit';
export const title = 'Audit';

const PAGE = 50;
const ACTIONS = ['submit', 'cancel', 'retry', 'task_change', 'clean', 'workflow_submit', 'workflow_restart', 'workflow_cancel', 'workflow_rollback', 'test_env_create', 'test_env_run', 'test_env_delete', 'pause', 'resume', 'signal', 'input', 'queue_change', 'schedule_add', 'schedule_change', 'schedule_run', 'notify_add', 'notify_change', 'token_create', 'token_revoke', 'events_trim', 'audit_compact', 'shutdown'];

/** Where the last check of the chain is kept for this tab. */
const CHECKED = 'orch.audit.verified';

export async function render(main, _params, ctx) {
  const p = ctx.params;
  const filters = { action: p.get('action') || '', uid: p.get('uid') || '', ok: p.get('ok') || '' };
  const before = p.get('before') || '';
  const select = h('select', { id: 'a-action', name: 'action', 'data-filter': true },
    h('option', { value: '' }, 'every action'),
    ACTIONS.map((a) => h('option', { value: a, selected: a === filters.action }, a)));
  const uid = h('input', { id: 'a-uid', name: 'uid', type: 'number', min: 0, inputmode: 'numeric', value: filters.uid, placeholder: 'any' });
  const outcome = h('select', { id: 'a-ok', name: 'ok' },
    h('option', { value: '' }, 'any outcome'),
    h('option', { value: 'true', selected: filters.ok === 'true' }, 'carried out'),
    h('option', { value: 'false', selected: filters.ok === 'false' }, 'refused or failed'));
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter the audit log' },
    h('label', { for: 'a-action' }, 'Action'), select,
    h('label', { for: 'a-uid' }, 'User id'), uid,
    h('label', { for: 'a-ok' }, 'Outcome'), outcome,
    h('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.navigate(`/ui/audit${query(Object.fromEntries(new FormData(form)))}`);
  });
  const chain = h('div', { id: 'audit-chain' });
  const entries = h('div', { id: 'audit-table' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  fill(main, h('h1', {}, 'Audit log'), section('Hash chain', chain), form, entries, pager);
  drawChain(chain, JSON.parse(sessionStorage.getItem(CHECKED) || 'null'), ctx);
  const list = await get(`/audit${query({ ...filters, before, limit: PAGE })}`, ctx.signal);
  fill(entries, table(['#', 'When', 'Who', 'Action', 'Outcome', 'Parameters'], list.map((e) => h('tr', { 'data-seq': e.seq },
    h('td', {}, String(e.seq)),
    h('td', {}, time(e.at)),
    h('td', {}, link(`/ui/audit${query({ uid: e.actor.uid })}`, `uid ${e.actor.uid}`), ` · ${e.actor.interface}`),
    h('td', {}, e.action),
    h('td', {}, badge(e.ok ? 'succeeded' : 'failed'), ' ', e.outcome),
    h('td', {}, h('details', {}, h('summary', {}, 'show'), h('pre', { class: 'json' }, JSON.stringify(e.params, null, 2)))))), 'No entry.'));
  const last = list[list.length - 1];
  fill(pager,
    before ? link(`/ui/audit${query(filters)}`, '⇤ Newest') : null,
    list.length === PAGE && last.seq > 1 ? link(`/ui/audit${query({ ...filters, before: last.seq })}`, 'Older →') : null);
  main.dataset.loaded = 'true';
}

/** The last check's result (of this tab), and the button that checks the chain now. */
function drawChain(el, checked, ctx) {
  const button = h('button', { type: 'button', 'data-action': 'verify', onclick: async () => {
    button.disabled = true;
    fill(state, 'Checking every entry of the chain…');
    try {
      const report = await get('/audit/verify', ctx.signal);
      const result = { report, at: new Date().toISOString() };
      sessionStorage.setItem(CHECKED, JSON.stringify(result));
      drawChain(el, result, ctx);
      el.querySelector('[data-action="verify"]').focus();
    } catch (e) {
      if (ctx.signal.aborted) return;
      fill(state, e instanceof ApiError ? e.message : String(e));
      button.disabled = false;
    }
  } }, checked ? 'Check again' : 'Check the chain');
  const state = checked ? result(checked) : h('p', { id: 'chain-state', class: 'muted' }, 'Not checked in this tab yet: the check reads every entry, archived segments included.');
  fill(el, state, h('div', { class: 'actions' }, button));
}

function result({ report, at }) {
  const when = [' (checked ', time(at), ')'];
  return report.intact
    ? h('p', { id: 'chain-state', 'data-intact': 'true' }, badge('succeeded'), ` Intact: ${report.entries} entries checked${report.segments.length ? `, ${report.segments.length} archived segments (${report.archived} entries) included` : ''}.`, ...when)
    : h('p', { id: 'chain-state', 'data-intact': 'false' }, badge('failed'), ` Broken at entry ${report.bad_seq ?? '?'}: ${report.problem || 'the hashes do not match'}.`, ...when);
}
