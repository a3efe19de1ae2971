"use strict";
// Waits and matchers: waitForMessage, waitForMessages and expectNoMessage
// of an Inbox (and of a Recipient, scoped by `to`), on the inbox's shared
// state; they follow the inbox with events.ts.
Object.defineProperty(exports, "__esModule", { value: true });
exports.waitFor = waitFor;
exports.expectNoMessage = expectNoMessage;
const errors_js_1 = require("./errors.js");
const events_js_1 = require("./events.js");
const internal_js_1 = require("./internal.js");
const retry_js_1 = require("./retry.js");
const transport_js_1 = require("./transport.js");
/**
 * The first `count` messages that match `options` and are new in the sense
 * of its `since`, oldest first (marked returned): Inbox.waitForMessage and
 * waitForMessages. Its timeout's WaitTimeoutError says `what` was missing.
 */
async function waitFor(c, count, options, what) {
    const watch = new internal_js_1.Watch(c.o.base, c.o.unreachableAfter);
    watch.want = count;
    const got = await guard(c, (0, internal_js_1.waitTimeout)(c, options.timeout, (0, internal_js_1.scopeDeadline)(options)), options.signal, watch, what, (signal) => waitLoop(c, options, signal, count, watch, true));
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
async function expectNoMessage(c, options) {
    (0, internal_js_1.checkTimeout)('within', options?.within);
    if (options?.within === undefined)
        throw new RangeError('mayfly: expectNoMessage: within (milliseconds) is required');
    (0, internal_js_1.checkTimeout)('timeout', options.timeout);
    const watch = new internal_js_1.Watch(c.o.base, c.o.unreachableAfter);
    // A shorter timeout or the inbox's deadline ends it before the window does: the wait timeout, not success.
    const window = Math.min(options.within, options.timeout ?? Infinity, (0, internal_js_1.deadlineLeft)(c.deadline), (0, internal_js_1.deadlineLeft)((0, internal_js_1.scopeDeadline)(options)));
    let got;
    try {
        got = await guard(c, window, options.signal, watch, 'no matching message', (signal) => waitLoop(c, options, signal, 1, watch, false));
    }
    catch (err) {
        if (!(err instanceof errors_js_1.WaitTimeoutError))
            throw err;
        if (window < options.within) {
            throw new errors_js_1.WaitTimeoutError(`mayfly: expectNoMessage: its timeout or the inbox's deadline came ${window} ms in, before the end of the ${options.within} ms window`);
        }
        if (watch.failingSince !== undefined) {
            throw new errors_js_1.UnreachableError(`mayfly: expectNoMessage: the service was unreachable at the end of the ${options.within} ms window ` +
                `(for ${((Date.now() - watch.failingSince) / 1000).toFixed(1)} s; last error: ${watch.lastError}): the absence is not shown`, Date.now() - watch.failingSince);
        }
        return;
    }
    const m = got[0];
    throw new errors_js_1.UnexpectedMessageError(`mayfly: expectNoMessage: a matching message arrived within ${options.within} ms: ${JSON.stringify(m.subject)} from ${JSON.stringify(m.from)} (id ${m.id})`, m);
}
/**
 * Runs a wait: takes the inbox's stream, ends it at its timeout with
 * WaitTimeoutError (explained by the watch) or at once on the caller's
 * signal, and keeps the watch where the inbox's calls report to it.
 */
async function guard(c, timeout, user, watch, what, run) {
    (0, transport_js_1.alive)(c);
    (0, events_js_1.takeStream)(c);
    const ctl = new AbortController();
    watch.signal = ctl.signal;
    watch.abort = (err) => ctl.abort(err);
    c.watch = watch;
    const timer = timeout < internal_js_1.MAX_TIMER
        ? setTimeout(() => ctl.abort(new errors_js_1.WaitTimeoutError(`mayfly: ${watch.got > 0 ? `${watch.got} of ${watch.want} matching messages` : what} within ${timeout} ms; ${watch.explain()}`)), timeout)
        : undefined;
    const onAbort = () => ctl.abort(user?.reason);
    if (user?.aborted)
        ctl.abort(user.reason);
    user?.addEventListener('abort', onAbort, { once: true });
    try {
        return await run(ctl.signal);
    }
    catch (err) {
        if (ctl.signal.aborted)
            throw ctl.signal.reason; // the caller's reason, or the wait timeout
        throw err;
    }
    finally {
        clearTimeout(timer);
        user?.removeEventListener('abort', onAbort);
        watch.close();
        if (c.watch === watch)
            c.watch = undefined;
        c.streaming = false;
    }
}
async function waitLoop(c, options, signal, count, watch, mark) {
    // A copy without g and y: test() must not carry lastIndex from one message to the next.
    const re = (p) => p === undefined ? undefined : typeof p === 'string' ? new RegExp(p) : new RegExp(p.source, p.flags.replace(/[gy]/g, ''));
    const subject = re(options.subject);
    const from = re(options.from);
    const text = re(options.text);
    const to = options.to?.toLowerCase();
    const since = options.since ?? 'unseen';
    const anchor = typeof since === 'object' && !(since instanceof Date) ? since.messageId
        : typeof since === 'string' && since !== 'unseen' && since !== 'now' ? since : undefined;
    const after = since instanceof Date ? since.getTime() : undefined;
    const notNew = new Set(); // 'now': there at the start; anchor: the anchor and older
    const rejected = new Set(); // looked at, did not match
    const taken = new Set(); // matched, kept for the answer
    const found = [];
    let anchorFound = false;
    const qualifies = (m) => {
        if (rejected.has(m.id) || notNew.has(m.id) || taken.has(m.id))
            return false;
        if (since === 'unseen')
            return !c.returned.has(m.id);
        if (after !== undefined)
            return Date.parse(m.received_at) > after;
        return true;
    };
    const reject = (m) => {
        rejected.add(m.id);
        watch.arrived.push(m.subject);
    };
    const consider = async (m) => {
        if (!qualifies(m))
            return undefined;
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
        let full;
        for (let attempt = 1; full === undefined || full.status === 'pending';) {
            if (full !== undefined)
                await (0, transport_js_1.sleep)(c.o.pollInterval, signal);
            try {
                full = await (0, transport_js_1.getMessage)(c, m.id, signal, Infinity);
            }
            catch (err) {
                if (signal.aborted)
                    throw signal.reason;
                if (err instanceof errors_js_1.MayflyError && err.status === 404 && err.code === 'MESSAGE_NOT_FOUND') {
                    rejected.add(m.id);
                    return undefined;
                }
                if (err instanceof errors_js_1.InboxGoneError || !(0, transport_js_1.transient)(err))
                    throw err;
                full = undefined;
                await (0, transport_js_1.sleep)((0, retry_js_1.backoff)(attempt++, 500, 5000) + 100, signal);
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
    for await (const step of (0, events_js_1.follow)(c, signal, since === 'now' || anchor !== undefined, true)) {
        let items;
        if (step.kind === 'list') {
            if (step.initial && since === 'now') {
                for (const m of step.items)
                    notNew.add(m.id);
                continue;
            }
            if (anchor !== undefined) {
                const k = step.items.findIndex((m) => m.id === anchor);
                if (k >= 0) {
                    anchorFound = true;
                    for (const m of step.items.slice(k))
                        notNew.add(m.id);
                }
                else if (!anchorFound) {
                    throw new errors_js_1.MayflyError(`mayfly: GET ${c.o.base}/messages: since: message ${anchor} is not in the inbox`, { code: 'MESSAGE_NOT_FOUND' });
                }
            }
            items = [...step.items].reverse(); // oldest first
        }
        else {
            items = [step.item];
        }
        for (const m of items) {
            const got = await consider(m);
            if (got === undefined)
                continue;
            taken.add(got.id);
            found.push(got);
            watch.got = found.length;
            if (found.length >= count) {
                found.sort((a, b) => Date.parse(a.received_at) - Date.parse(b.received_at));
                if (mark)
                    for (const f of found)
                        c.returned.add(f.id);
                return found;
            }
        }
    }
    throw new errors_js_1.MayflyError('mayfly: the wait ended without a message'); // follow only ends by throwing
}
