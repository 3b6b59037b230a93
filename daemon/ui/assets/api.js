// The daemon's REST API as the dashboard uses it: the token kept for the browser
// session (never in a URL), errors as the daemon words them, and the event stream
// (`GET /events`, server-sent events) read through fetch so that it carries the token.

const KEY = 'orch.session';

/** Who is signed in: the token, its name and role (from `GET /whoami`). */
export const session = JSON.parse(sessionStorage.getItem(KEY) || 'null') || {};

const RANK = { viewer: 1, operator: 2, admin: 3 };

/** Whether the signed-in token's role is at least `role`. */
export function may(role) {
  return (RANK[session.role] || 0) >= RANK[role];
}

/** An answer that is not a success: the status and the daemon's message. */
export class ApiError extends Error {
  constructor(status, kind, message, field) {
    super(message);
    this.status = status;
    this.kind = kind;
    this.field = field;
  }
}

/** Called when the daemon no longer takes the token (it was revoked). */
let onSignedOut = () => {};
export function whenSignedOut(fn) { onSignedOut = fn; }

/** Checks `token` with the daemon and keeps it for this browser session. */
export async function signIn(token) {
  const answer = await fetch('/whoami', { headers: { Authorization: `Bearer ${token}` } });
  if (!answer.ok) throw await failure(answer);
  const who = await answer.json();
  Object.assign(session, { token, name: who.token, role: who.role });
  sessionStorage.setItem(KEY, JSON.stringify(session));
  return session;
}

/** Forgets the token. */
export function signOut() {
  for (const key of Object.keys(session)) delete session[key];
  sessionStorage.removeItem(KEY);
}

async function failure(answer) {
  let body = null;
  try { body = await answer.json(); } catch { /* not JSON */ }
  const error = body && body.error;
  return new ApiError(answer.status, error ? error.kind : 'http',
    error ? error.message : `${answer.status} ${answer.statusText}`, error && error.field);
}

/** A request; resolves to `{data, headers}`. */
export async function request(path, { method = 'GET', body, signal } = {}) {
  const headers = { Authorization: `Bearer ${session.token || ''}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const answer = await fetch(path, {
    method, headers, signal,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (answer.status === 401) {
    signOut();
    onSignedOut();
    throw await failure(answer);
  }
  if (!answer.ok) throw await failure(answer);
  const type = answer.headers.get('content-type') || '';
  const data = type.includes('json') ? await answer.json() : await answer.text();
  return { data, headers: answer.headers };
}

/** A GET's data. */
export async function get(path, signal) {
  return (await request(path, { signal })).data;
}

/** A POST's data. */
export async function post(path, body) {
  return (await request(path, { method: 'POST', body })).data;
}

/** A DELETE's data. */
export async function del(path) {
  return (await request(path, { method: 'DELETE' })).data;
}

/** A query string from the set values of `params`. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') q.set(key, value);
  }
  const text = q.toString();
  return text ? `?${text}` : '';
}

/** Follows `GET /events` (with `filter`: `{task}`, `{workflow}`, `{type}`) and calls
 * `onEvent(event)` for each; reconnects after a drop from the last event seen, and calls
 * `onState(live)` as the stream comes and goes. When the events after the last one seen
 * are gone (the event retention removed them while the stream was down), it follows from
 * now on and calls `onEvent(null)`: what the view shows must be read again. Stops when
 * `signal` aborts. */
export function follow(filter, onEvent, signal, onState = () => {}) {
  let since = null;
  let wait = 500;
  const run = async () => {
    while (!signal.aborted) {
      try {
        const path = `/events${query({ ...filter, since })}`;
        const answer = await fetch(path, {
          headers: { Authorization: `Bearer ${session.token || ''}`, Accept: 'text/event-stream' },
          signal,
        });
        if (answer.status === 401) { signOut(); onSignedOut(); return; }
        if (!answer.ok || !answer.body) {
          const error = await failure(answer);
          if (error.field === 'since' && since !== null) {
            since = null;
            onEvent(null);
            continue;
          }
          throw error;
        }
        onState(true);
        wait = 500;
        const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const event = parse(block);
            if (event) {
              since = event.seq;
              onEvent(event);
            }
          }
        }
      } catch (error) {
        if (signal.aborted) return;
      }
      onState(false);
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 10000);
    }
  };
  run();
}

/** One server-sent event's data, as the daemon's JSON event. */
function parse(block) {
  const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart());
  if (!data.length) return null;
  try { return JSON.parse(data.join('\n')); } catch { return null; }
}
