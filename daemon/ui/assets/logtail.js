// A live tail of a log read by pages (`GET /tasks/{id}/logs`, `GET
// /test/environments/{id}/logs`: `?tail=N` first, then `?offset=`): what is on screen is
// bounded, and the page is scrolled along only when the reader was at its end.

import { get } from './api.js';
import { fill } from './dom.js';

/** How much of the log's end the tail shows at first. */
const TAIL = 64 * 1024;
/** How much text the tail keeps on screen. */
const KEEP = 256 * 1024;

/** Follows the log at `path` into `box`, saying in `state` where it is, until `signal`
 * aborts. `words(page)` is what `state` says once the log is read to its end (`page`:
 * the daemon's last page, whose `complete` says nothing more will be written); it stops
 * there when `stopAtEnd`, else it looks again after `pauseMs(page)` (or at once when
 * `wake` of the returned handle is called). */
export function followLog(path, box, state, signal, { words, stopAtEnd, pauseMs }) {
  let offset = null;
  let text = '';
  // A wake-up asked for while a page is read is kept for the next pause.
  let woken = false;
  let wakeUp = () => { woken = true; };
  const pause = (ms) => new Promise((resolve) => {
    if (woken || signal.aborted) { woken = false; resolve(); return; }
    const done = () => { clearTimeout(timer); signal.removeEventListener('abort', done); wakeUp = () => { woken = true; }; resolve(); };
    const timer = setTimeout(done, ms);
    wakeUp = done;
    signal.addEventListener('abort', done);
  });
  const run = async () => {
    while (!signal.aborted) {
      let page;
      try {
        page = await get(`${path}${offset === null ? `?tail=${TAIL}` : `?offset=${offset}`}`, signal);
      } catch (e) {
        if (signal.aborted) return;
        fill(state, e.message);
        if (stopAtEnd) return;
        await pause(5000);
        continue;
      }
      if (offset === null && page.offset > 0) text = `… (${page.offset} bytes before)\n`;
      offset = page.next_offset;
      if (page.text) {
        const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
        text = (text + page.text).slice(-KEEP);
        fill(box, text);
        if (atEnd) box.scrollTop = box.scrollHeight;
      }
      if (page.next_offset < page.size) continue;
      box.dataset.size = String(page.size);
      box.dataset.complete = String(page.complete);
      fill(state, words(page));
      if (page.complete && stopAtEnd) return;
      await pause(pauseMs(page));
    }
  };
  run();
  return { wake: () => wakeUp() };
}
