// The dashboard's shell: sign-in, the views by URL (each view has one, so every page is
// a deep link), the navigation, the theme, and the notices views raise.

import { session, signIn, signOut, may, whenSignedOut, ApiError } from './api.js';
import { h, fill } from './dom.js';
import * as overview from './overview.js';
import * as tasks from './tasks.js';
import * as task from './task.js';
import * as workflows from './workflows.js';
import * as workflow from './workflow.js';
import * as envs from './envs.js';
import * as audit from './audit.js';

/** The views: a path pattern, the view, and the role it needs. */
const ROUTES = [
  [/^\/ui\/?$/, overview, 'viewer'],
  [/^\/ui\/tasks\/?$/, tasks, 'viewer'],
  [/^\/ui\/tasks\/(\d+)$/, task, 'viewer'],
  [/^\/ui\/workflows\/?$/, workflows, 'viewer'],
  [/^\/ui\/workflows\/(\d+)$/, workflow, 'viewer'],
  [/^\/ui\/envs\/?$/, envs, 'viewer'],
  [/^\/ui\/envs\/(\d+)$/, envs, 'viewer'],
  [/^\/ui\/audit\/?$/, audit, 'admin'],
];

const main = document.getElementById('main');
const notice = document.getElementById('notice');
let current = null;

/** Shows a message above the view (an error, or what an action did). */
export function notify(message, tone = 'bad') {
  notice.hidden = !message;
  notice.className = `notice ${tone}`;
  fill(notice, message || '');
}

/** Goes to `url` inside the dashboard. */
export function navigate(url, replace = false) {
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  show();
}

/** The live indicator: whether the event stream is connected. */
function live(connected) {
  const el = document.getElementById('live');
  el.dataset.state = connected ? 'on' : 'off';
  fill(el, connected ? '● live' : '○ reconnecting');
}

/** Renders the view the URL names. */
function show() {
  if (current) current.abort();
  current = new AbortController();
  notify('');
  const path = location.pathname;
  if (!session.token || path.startsWith('/ui/signin')) {
    if (session.token) { history.replaceState(null, '', nextOf(path)); return show(); }
    return showSignIn();
  }
  shell();
  const route = ROUTES.find(([pattern]) => pattern.test(path));
  if (!route) {
    fill(main, h('h1', {}, 'Not found'), h('p', {}, 'No view has this address. ', h('a', { href: '/ui/', 'data-link': true }, 'Overview')));
    return;
  }
  const [pattern, view, role] = route;
  const match = path.match(pattern);
  if (!may(role)) {
    fill(main, h('h1', {}, 'Not for this role'), h('p', {}, `This view needs the ${role} role; you are signed in as ${session.role}.`));
    return;
  }
  for (const a of document.querySelectorAll('#nav a')) {
    const here = a.dataset.view === view.name;
    if (here) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  document.title = `${view.title} · orchestrator`;
  // This view's own signal: by the time a request it made fails, `current` may be the
  // next view's.
  const { signal } = current;
  const ctx = { signal, notify, navigate, live, params: new URLSearchParams(location.search) };
  fill(main);
  view.render(main, match.slice(1), ctx).catch((error) => {
    if (signal.aborted) return;
    notify(error instanceof ApiError ? error.message : `The view failed: ${error.message}`);
  });
}

/** Where to go once signed in: the view asked for (a deep link), or the overview. */
function nextOf(path) {
  if (!path.startsWith('/ui/signin')) return path + location.search;
  const next = new URLSearchParams(location.search).get('next');
  return next && next.startsWith('/ui/') && !next.startsWith('/ui/signin') ? next : '/ui/';
}

/** The header as the signed-in role sees it. */
function shell() {
  const nav = document.getElementById('nav');
  nav.hidden = false;
  for (const a of nav.querySelectorAll('[data-role]')) a.hidden = !may(a.dataset.role);
  fill(document.getElementById('who'), h('span', { class: 'muted' }, 'signed in as '), h('strong', { 'data-role-name': session.role }, `${session.name} (${session.role})`));
  document.getElementById('signout').hidden = false;
}

/** The sign-in form: a token, checked with the daemon, kept for this browser session. */
function showSignIn() {
  document.getElementById('nav').hidden = true;
  document.getElementById('signout').hidden = true;
  fill(document.getElementById('who'));
  fill(document.getElementById('live'));
  document.title = 'Sign in · orchestrator';
  const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const error = h('p', { class: 'error', role: 'alert' });
  const form = h('form', { class: 'card signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in'),
    h('p', { class: 'muted' }, 'Give a token of the daemon (tokens.json in its data directory, or one an admin made with POST /auth/tokens). It is kept for this browser tab only.'),
    h('label', { for: 'token' }, 'Token'), input,
    h('button', { type: 'submit' }, 'Sign in'), error);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    fill(error);
    try {
      await signIn(input.value.trim());
      history.replaceState(null, '', nextOf(location.pathname));
      show();
    } catch (e) {
      fill(error, e.status === 401 ? 'The daemon does not know this token.' : e.message);
      input.focus();
    }
  });
  fill(main, form);
  input.focus();
}

/** Links with `data-link` are followed without reloading. */
document.addEventListener('click', (event) => {
  const a = event.target.closest('a[data-link]');
  if (!a || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  navigate(a.getAttribute('href'));
});

/** Keys: `g` then o/t/w/e/a goes to a view; `/` finds the view's filter. */
let pendingG = false;
document.addEventListener('keydown', (event) => {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(event.target.tagName);
  if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.key === '/') {
    const filter = main.querySelector('[data-filter]');
    if (filter) { event.preventDefault(); filter.focus(); }
    return;
  }
  if (pendingG) {
    pendingG = false;
    const to = { o: '/ui/', t: '/ui/tasks', w: '/ui/workflows', e: '/ui/envs', a: '/ui/audit' }[event.key];
    if (to) { event.preventDefault(); navigate(to); }
    return;
  }
  pendingG = event.key === 'g';
});

window.addEventListener('popstate', show);
document.getElementById('signout').addEventListener('click', () => { signOut(); navigate('/ui/signin'); });
whenSignedOut(() => {
  navigate(`/ui/signin?next=${encodeURIComponent(location.pathname + location.search)}`, true);
  notify('The daemon no longer takes this token: sign in again.');
});

const THEME = 'orch.theme';
function applyTheme() {
  const chosen = localStorage.getItem(THEME);
  if (chosen) document.documentElement.dataset.theme = chosen;
  else delete document.documentElement.dataset.theme;
}
document.getElementById('theme').addEventListener('click', () => {
  const dark = document.documentElement.dataset.theme
    ? document.documentElement.dataset.theme === 'dark'
    : matchMedia('(prefers-color-scheme: dark)').matches;
  localStorage.setItem(THEME, dark ? 'light' : 'dark');
  applyTheme();
});
applyTheme();
show();
