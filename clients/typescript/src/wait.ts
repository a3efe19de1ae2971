// Waits and matchers: waitForMessage, waitForMessages and expectNoMessage
// of an Inbox (and of a Recipient, scoped by `to`), on the inbox's shared
// state; they follow the inbox with events.ts.

import { InboxGoneError, MayflyError, UnexpectedMessageError, UnreachableError, WaitTimeoutError } from './errors.js';
import type { ExpectNoMessageOptions, WaitOptions } from './client.js';
import { follow, takeStream } from './events.js';
import { MAX_TIMER, Watch, checkTimeout, deadlineLeft, scopeDeadline, waitTimeout } from './internal.js';
import type { InboxCore } from './internal.js';
import { backoff } from './retry.js';
import { alive, getMessage, sleep, transient } from './transport.js';
import type { Message, MessageSummary } from './types.js';

/**
 * The first `count` messages that match `options` and are new in the sense
 * of its `since`, oldest first (marked returned): Inbox.waitForMessage and
 * waitForMessages. Its timeout's WaitTimeoutError says `what` was missing.
 */
export async function waitFor(c: InboxCore, count: number, options: WaitOptions, what: string): Promise<Message[]> {
  const watch = new Watch(c.o.base, c.o.unreachableAfter);
  watch.want = count;
  const got = await guard(c, waitTimeout(c, options.timeout, scopeDeadline(options)), options.signal, watch, what, (signal) =>
    waitLoop(c, options, signal, count, watch, true));
  return got;
}

/**
 * Succeeds when no message that matches and is new in the sense of `since`
 * (default 'unseen') arrives within `within` milliseconds: the honest
 * "no second email" assertion. A matching message fails it at once with
 * UnexpectedMessageError (`received` is the message; it is not marked
 * returned). A server unreachable at the end of the window cannot prove the
 * absence: UnreachableError.
 */
export async function expectNoMessage(c: InboxCore, options: ExpectNoMessageOptions): Promise<void> {
  checkTimeout('within', options?.within);
  if (options?.within === undefined) throw new RangeError('mayfly: expectNoMessage: within (milliseconds) is required');
  checkTimeout('timeout', options.timeout);
  const watch = new Watch(c.o.base, c.o.unreachableAfter);
  // A shorter timeout or the inbox's deadline ends it before the window does: the wait timeout, not success.
  const window = Math.min(options.within, options.timeout ?? Infinity, deadlineLeft(c.deadline), deadlineLeft(scopeDeadline(options)));
  let got: Message[];
  try {
    got = await guard(c, window, options.signal, watch, 'no matching message', (signal) =>
      waitLoop(c, options, signal, 1, watch, false));
  } catch (err) {
    if (!(err instanceof WaitTimeoutError)) throw err;
    if (window < options.within) {
      throw new WaitTimeoutError(
        `mayfly: expectNoMessage: its timeout or the inbox's deadline came ${window} ms in, before the end of the ${options.within} ms window`,
      );
    }
    if (watch.failingSince !== undefined) {
      throw new UnreachableError(
        `mayfly: expectNoMessage: the service was unreachable at the end of the ${options.within} ms window ` +
          `(for ${((Date.now() - watch.failingSince) / 1000).toFixed(1)} s; last error: ${watch.lastError}): the absence is not shown`,
        Date.now() - watch.failingSince,
      );
    }
    return;
  }
  const m = got[0]!;
  throw new UnexpectedMessageError(
    `mayfly: expectNoMessage: a matching message arrived within ${options.within} ms: ${JSON.stringify(m.subject)} from ${JSON.stringify(m.from)} (id ${m.id})`,
    m,
  );
}

/**
 * Runs a wait: takes the inbox's stream, ends it at its timeout with
 * WaitTimeoutError (explained by the watch) or at once on the caller's
 * signal, and keeps the watch where the inbox's calls report to it.
 */
async function guard<T>(
  c: InboxCore,
  timeout: number, user: AbortSignal | undefined, watch: Watch, what: string, run: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  alive(c);
  takeStream(c);
  const ctl = new AbortController();
  watch.signal = ctl.signal;
  watch.abort = (err) => ctl.abort(err);
  c.watch = watch;
  const timer = timeout < MAX_TIMER
    ? setTimeout(() => ctl.abort(new WaitTimeoutError(`mayfly: ${watch.got > 0 ? `${watch.got} of ${watch.want} matching messages` : what} within ${timeout} ms; ${watch.explain()}`)), timeout)
    : undefined;
  const onAbort = () => ctl.abort(user?.reason);
  if (user?.aborted) ctl.abort(user.reason);
  user?.addEventListener('abort', onAbort, { once: true });
  try {
    return await run(ctl.signal);
  } catch (err) {
    if (ctl.signal.aborted) throw ctl.signal.reason; // the caller's reason, or the wait timeout
    throw err;
  } finally {
    clearTimeout(timer);
    user?.removeEventListener('abort', onAbort);
    watch.close();
    if (c.watch === watch) c.watch = undefined;
    c.streaming = false;
  }
}

async function waitLoop(c: InboxCore, options: WaitOptions, signal: AbortSignal, count: number, watch: Watch, mark: boolean): Promise<Message[]> {
  // A copy without g and y: test() must not carry lastIndex from one message to the next.
  const re = (p: RegExp | string | undefined) =>
    p === undefined ? undefined : typeof p === 'string' ? new RegExp(p) : new RegExp(p.source, p.flags.replace(/[gy]/g, ''));
  const subject = re(options.subject);
  const from = re(options.from);
  const text = re(options.text);
  const to = options.to?.toLowerCase();
  const since = options.since ?? 'unseen';
  const anchor = typeof since === 'object' && !(since instanceof Date) ? since.messageId
    : typeof since === 'string' && since !== 'unseen' && since !== 'now' ? since : undefined;
  const after = since instanceof Date ? since.getTime() : undefined;
  const notNew = new Set<string>(); // 'now': there at the start; anchor: the anchor and older
  const rejected = new Set<string>(); // looked at, did not match
  const taken = new Set<string>(); // matched, kept for the answer
  const found: Message[] = [];
  let anchorFound = false;

  const qualifies = (m: MessageSummary) => {
    if (rejected.has(m.id) || notNew.has(m.id) || taken.has(m.id)) return false;
    if (since === 'unseen') return !c.returned.has(m.id);
    if (after !== undefined) return Date.parse(m.received_at) > after;
    return true;
  };
  const reject = (m: { id: string; subject: string }) => {
    rejected.add(m.id);
    watch.arrived.push(m.subject);
  };
  const consider = async (m: MessageSummary): Promise<Message | undefined> => {
    if (!qualifies(m)) return undefined;
    if (to !== undefined && (m.to ?? '').toLowerCase() !== to) {
      rejected.add(m.id); // another recipient's: not read, not counted as arrived
      return undefined;
    }
    if (m.status !== 'pending' && ((subject && !subject.test(m.subject)) || (from && !from.test(m.from)))) {
      reject(m);
      return undefined;
    }
    // Read until it has its bodies; an outage (or a Retry-After too long to
    // wait) is outlived like the wait's, a message deleted meanwhile passed over.
    let full: Message | undefined;
    for (let attempt = 1; full === undefined || full.status === 'pending'; ) {
      if (full !== undefined) await sleep(c.o.pollInterval, signal);
      try {
        full = await getMessage(c, m.id, signal, Infinity);
      } catch (err) {
        if (signal.aborted) throw signal.reason;
        if (err instanceof MayflyError && err.status === 404 && err.code === 'MESSAGE_NOT_FOUND') {
          rejected.add(m.id);
          return undefined;
        }
        if (err instanceof InboxGoneError || !transient(err)) throw err;
        full = undefined;
        await sleep(backoff(attempt++, 500, 5000) + 100, signal);
      }
    }
    const ok = (!subject || subject.test(full.subject)) && (!from || from.test(full.from)) &&
      (!text || text.test(full.text_body)) && (!options.match || options.match(full));
    if (!ok) {
      reject(full);
      return undefined;
    }
    return full;
  };

  for await (const step of follow(c, signal, since === 'now' || anchor !== undefined, true)) {
    let items: MessageSummary[];
    if (step.kind === 'list') {
      if (step.initial && since === 'now') {
        for (const m of step.items) notNew.add(m.id);
        continue;
      }
      if (anchor !== undefined) {
        const k = step.items.findIndex((m) => m.id === anchor);
        if (k >= 0) {
          anchorFound = true;
          for (const m of step.items.slice(k)) notNew.add(m.id);
        } else if (!anchorFound) {
          throw new MayflyError(`mayfly: GET ${c.o.base}/messages: since: message ${anchor} is not in the inbox`, { code: 'MESSAGE_NOT_FOUND' });
        }
      }
      items = [...step.items].reverse(); // oldest first
    } else {
      items = [step.item];
    }
    for (const m of items) {
      const got = await consider(m);
      if (got === undefined) continue;
      taken.add(got.id);
      found.push(got);
      watch.got = found.length;
      if (found.length >= count) {
        found.sort((a, b) => Date.parse(a.received_at) - Date.parse(b.received_at));
        if (mark) for (const f of found) c.returned.add(f.id);
        return found;
      }
    }
  }
  throw new MayflyError('mayfly: the wait ended without a message'); // follow only ends by throwing
}

