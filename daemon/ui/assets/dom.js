// Small helpers shared by the views: building elements (text only, never markup from
// the daemon), statuses shown by colour *and* icon, times and durations.

/** An element: h('a', {href: '/ui/'}, 'text', child...). Attributes starting with `on`
 * are listeners; `class` and `dataset` are set as such. Text is always text. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (value === true) {
      el.setAttribute(key, '');
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

/** An SVG element, as `h` makes HTML ones. */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces what `el` holds. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A link inside the dashboard (followed without reloading the page). */
export function link(href, ...children) {
  return h('a', { href, 'data-link': true }, ...children);
}

/** How each status is shown: an icon beside its colour, so that colour is never alone. */
const STATUS = {
  blocked: ['⧖', 'wait'],
  delayed: ['⏲', 'wait'],
  stashed: ['⏸', 'wait'],
  queued: ['…', 'wait'],
  retry_waiting: ['↻', 'warn'],
  running: ['▶', 'run'],
  succeeded: ['✓', 'ok'],
  failed: ['✗', 'bad'],
  cancelled: ['⊘', 'off'],
  dependency_failed: ['⤼', 'off'],
  removed: ['∅', 'off'],
  rolling_back: ['↺', 'warn'],
  rolled_back: ['↶', 'off'],
  rollback_failed: ['✗', 'bad'],
  starting: ['▶', 'run'],
  created: ['○', 'wait'],
  ready: ['✓', 'ok'],
  testing: ['▶', 'run'],
  deleting: ['⌫', 'warn'],
  deleted: ['∅', 'off'],
};

/** The icon and tone of a status. */
export function statusLook(status) {
  return STATUS[status] || ['?', 'off'];
}

/** A status as a badge: icon and words, coloured by its tone. */
export function badge(status) {
  const name = status || 'removed';
  const [icon, tone] = statusLook(name);
  return h('span', { class: `badge ${tone}`, 'data-status': name },
    h('span', { 'aria-hidden': 'true' }, icon), ' ', name.replaceAll('_', ' '));
}

/** A time as the reader's local time, with the exact instant on hover. */
export function time(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const at = new Date(iso);
  return h('time', { datetime: iso, title: at.toISOString() }, at.toLocaleString());
}

/** Milliseconds in words (`1.2 s`, `3 min 4 s`). */
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** What a task runs, in one line. */
export function describe(spec) {
  const kind = spec && spec.kind;
  if (!kind) return '';
  switch (kind.type) {
    case 'command': return [kind.program, ...(kind.args || [])].join(' ');
    case 'nu': return `nu: ${kind.code}`;
    case 'nu_file': return `nu ${kind.path}`;
    default: return JSON.stringify(kind);
  }
}

/** A task's times: first start, last end, and how long its attempts took. */
export function taskTimes(task) {
  const attempts = task.attempts || [];
  const first = attempts[0];
  const last = attempts[attempts.length - 1];
  const started = first ? new Date(first.started_at).getTime() : null;
  const ended = last && last.finished_at ? new Date(last.finished_at).getTime() : null;
  return { started, ended };
}

/** A table: column heads and rows of cells; an empty one says so. */
export function table(heads, rows, empty = 'Nothing to show.') {
  if (!rows.length) return h('p', { class: 'muted empty' }, empty);
  // Each cell names its column, for the narrow layout (a card per row).
  for (const row of rows) {
    [...row.children].forEach((cell, i) => cell.setAttribute('data-label', heads[i] || ''));
  }
  return h('div', { class: 'scroll' },
    h('table', {},
      h('thead', {}, h('tr', {}, heads.map((head) => h('th', { scope: 'col' }, head)))),
      h('tbody', {}, rows)));
}

/** A titled section. */
export function section(title, ...children) {
  return h('section', { class: 'card' }, h('h2', {}, title), ...children);
}

/** Calls `fn` at most once per `ms`: the first call at once, and the last one of those
 * that came meanwhile (with its arguments) when the time is up. */
export function throttle(fn, ms) {
  let timer = null;
  let pending = null;
  const tick = () => {
    timer = null;
    if (pending) {
      const args = pending;
      pending = null;
      fn(...args);
      timer = setTimeout(tick, ms);
    }
  };
  return (...args) => {
    if (timer) { pending = args; return; }
    fn(...args);
    timer = setTimeout(tick, ms);
  };
}

/** What finds `el` again after its view is drawn anew: its id, or the attribute that
 * names what it is for (an action, a step, a link's target). */
function focusKey(el) {
  if (el.id) return `#${CSS.escape(el.id)}`;
  for (const name of ['data-action', 'data-step', 'data-entry', 'href']) {
    const value = el.getAttribute(name);
    if (value !== null) return `${el.localName}[${name}="${CSS.escape(value)}"]`;
  }
  return null;
}

/** `fn` (which draws a view) run one call at a time: a call waits for the one before to
 * end, so that two drawings of a view never interleave (one would replace what the
 * other drew, and the focus it gave back). */
export function serial(fn) {
  let last = Promise.resolve();
  return (...args) => {
    const next = last.then(() => fn(...args));
    last = next.catch(() => {});
    return next;
  };
}

/** After an action's button (`data-action` = `action`) redrew its view, gives the focus
 * back to that button if the view still offers it, else to the first action `bar`
 * offers: a disabled button loses the focus, and a keyboard user would start again from
 * the top of the page. */
export function refocusAction(bar, action) {
  const again = bar.querySelector(`button[data-action="${CSS.escape(action)}"]:not([disabled])`)
    || bar.querySelector('button[data-action]:not([disabled])');
  if (again) again.focus({ preventScroll: true });
}

/** Runs `redraw` (which replaces what `root` holds) and gives the keyboard focus back to
 * the element that had it inside `root`, as drawn anew, so that a live update does not
 * throw a keyboard user back to the top of the page. */
export async function keepingFocus(root, redraw) {
  const active = document.activeElement;
  const key = active && active !== root && root.contains(active) ? focusKey(active) : null;
  try {
    return await redraw();
  } finally {
    if (key && !root.contains(document.activeElement)) {
      const again = root.querySelector(key);
      if (again && !again.disabled) again.focus({ preventScroll: true });
    }
  }
}
