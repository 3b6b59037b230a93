// The audit log (admins): a page of entries at a time, filtered by action, and the
// hash chain's check.

import { get, query } from './api.js';
import { h, fill, link, badge, time, table, section } from './dom.js';

export const name = 'audit';
export const title = 'Audit';

const PAGE = 50;
const ACTIONS = ['submit', 'cancel', 'retry', 'task_change', 'clean', 'workflow_submit', 'workflow_restart', 'workflow_cancel', 'workflow_rollback', 'test_env_create', 'test_env_run', 'test_env_delete', 'pause', 'resume', 'signal', 'input', 'queue_change', 'schedule_add', 'schedule_change', 'schedule_run', 'notify_add', 'notify_change', 'token_create', 'token_revoke', 'events_trim', 'audit_compact', 'shutdown'];

export async function render(main, _params, ctx) {
  const action = ctx.params.get('action') || '';
  const before = ctx.params.get('before') || '';
  const select = h('select', { id: 'a-action', name: 'action', 'data-filter': true },
    h('option', { value: '' }, 'every action'),
    ACTIONS.map((a) => h('option', { value: a, selected: a === action }, a)));
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter the audit log' },
    h('label', { for: 'a-action' }, 'Action'), select, h('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.navigate(`/ui/audit${query({ action: select.value })}`);
  });
  const chain = h('div', { id: 'audit-chain' }, h('p', { class: 'muted' }, 'Checking the chain…'));
  const entries = h('div', { id: 'audit-table' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  fill(main, h('h1', {}, 'Audit log'), section('Hash chain', chain), form, entries, pager);
  const list = await get(`/audit${query({ action, before, limit: PAGE })}`, ctx.signal);
  fill(entries, table(['#', 'When', 'Who', 'Action', 'Outcome', 'Parameters'], list.map((e) => h('tr', { 'data-seq': e.seq },
    h('td', {}, String(e.seq)),
    h('td', {}, time(e.at)),
    h('td', {}, `uid ${e.actor.uid} · ${e.actor.interface}`),
    h('td', {}, e.action),
    h('td', {}, badge(e.ok ? 'succeeded' : 'failed'), ' ', e.outcome),
    h('td', {}, h('details', {}, h('summary', {}, 'show'), h('pre', { class: 'json' }, JSON.stringify(e.params, null, 2)))))), 'No entry.'));
  const last = list[list.length - 1];
  fill(pager,
    before ? link(`/ui/audit${query({ action })}`, '⇤ Newest') : null,
    list.length === PAGE && last.seq > 1 ? link(`/ui/audit${query({ action, before: last.seq })}`, 'Older →') : null);
  main.dataset.loaded = 'true';
  const report = await get('/audit/verify', ctx.signal);
  fill(chain, report.intact
    ? h('p', { id: 'chain-state', 'data-intact': 'true' }, badge('succeeded'), ` Intact: ${report.entries} entries checked${report.segments.length ? `, ${report.segments.length} archived segments (${report.archived} entries) included` : ''}.`)
    : h('p', { id: 'chain-state', 'data-intact': 'false' }, badge('failed'), ` Broken at entry ${report.bad_seq ?? '?'}: ${report.problem || 'the hashes do not match'}.`));
}
