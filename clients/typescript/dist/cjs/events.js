"use strict";
// The event stream (GET /events) and its reconnects: following an inbox
// (the stream, a list after every (re)connect, polling when the stream fails
// or another program took it over) and Inbox.events().
Object.defineProperty(exports, "__esModule", { value: true });
exports.events = events;
exports.follow = follow;
exports.takeStream = takeStream;
const errors_js_1 = require("./errors.js");
const internal_js_1 = require("./internal.js");
const retry_js_1 = require("./retry.js");
const sse_js_1 = require("./sse.js");
const cookies_js_1 = require("./cookies.js");
const transport_js_1 = require("./transport.js");
/** The comment the service ends a replaced stream with (after the colon and a space). */
const REPLACED_COMMENT = 'replaced';
/**
 * The new messages as they arrive (GET /events), across reconnects: after
 * every (re)connect the list is read and what the stream missed is yielded
 * (missed: true). When the service ends the stream because another
 * program opened one on this inbox, it warns (the logger), polls the list
 * every 5 s for a minute, then opens the stream again. Ends with
 * InboxGoneError when the inbox expires or is deleted, with
 * WaitTimeoutError at its `timeout` (default the client's waitTimeout,
 * 20 s), with UnreachableError when the service has been unreachable for
 * unreachableAfter (10 s); breaking out of the loop or the signal closes
 * the stream.
 */
async function* events(c, options = {}) {
    const timeout = (0, internal_js_1.waitTimeout)(c, options.timeout, (0, internal_js_1.scopeDeadline)(options));
    const to = options.to?.toLowerCase();
    (0, transport_js_1.alive)(c);
    takeStream(c);
    const watch = new internal_js_1.Watch(c.o.base, c.o.unreachableAfter);
    const ctl = new AbortController();
    watch.signal = ctl.signal;
    watch.abort = (err) => ctl.abort(err);
    c.watch = watch;
    const timer = timeout < internal_js_1.MAX_TIMER
        ? setTimeout(() => {
            const why = watch.unreachable() ?? `${yielded} message${yielded === 1 ? '' : 's'} yielded`;
            ctl.abort(new errors_js_1.WaitTimeoutError(`mayfly: events(): its timeout of ${timeout} ms passed; ${why}`));
        }, timeout)
        : undefined;
    const user = options.signal;
    const onAbort = () => ctl.abort(user?.reason);
    if (user?.aborted)
        ctl.abort(user.reason);
    user?.addEventListener('abort', onAbort, { once: true });
    const seen = new Set();
    let yielded = 0;
    try {
        for await (const step of follow(c, ctl.signal, false, false)) {
            const items = step.kind === 'list' ? [...step.items].reverse() : [step.item];
            for (const m of items) {
                if (seen.has(m.id))
                    continue;
                seen.add(m.id);
                if (step.kind === 'list' && step.initial)
                    continue; // there before events() began
                if (to !== undefined && (m.to ?? '').toLowerCase() !== to)
                    continue; // another recipient's
                yielded++;
                yield { type: 'message.received', message: m, missed: step.kind === 'list' };
            }
        }
    }
    catch (err) {
        if (ctl.signal.aborted)
            throw ctl.signal.reason; // the caller's reason, or the timeout
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
/**
 * Follows the inbox: an optional list first (initial: true), then the event
 * stream with a list after every (re)connect, reconnecting with backoff.
 * With fallback, after two failed opens in a row it polls the list every
 * poll interval instead. When the service ends the stream because another
 * stream took the inbox over, it warns, polls the list every poll interval
 * for REPLACED_PAUSE, then opens the stream again. It ends only by throwing
 * (gone, the signal, an error that is not transient).
 */
async function* follow(c, signal, preList, fallback) {
    let lastList = 0;
    const listAll = async () => {
        const all = [];
        for (let offset = 0;; offset += 100) {
            const p = await (0, transport_js_1.listPage)(c, 100, offset, signal, Infinity);
            all.push(...p.items);
            if (!p.hasMore || p.items.length === 0)
                break;
        }
        lastList = Date.now(); // after the answer: the next poll is ≥ the interval after it on the server too
        return all;
    };
    /** Rethrows what a follower does not outlive. */
    const fatal = (err) => {
        if (signal.aborted)
            throw signal.reason;
        if (err instanceof errors_js_1.InboxGoneError || !(0, transport_js_1.transient)(err))
            throw err;
    };
    /** A list at the next poll interval, or undefined when it failed (transiently) or `until` came first. */
    const pollOnce = async (until) => {
        const wait = Math.max(0, c.o.pollInterval - (Date.now() - lastList));
        if (Date.now() + wait >= until) {
            await (0, transport_js_1.sleep)(Math.max(0, until - Date.now()), signal);
            return undefined;
        }
        await (0, transport_js_1.sleep)(wait, signal);
        try {
            return await listAll();
        }
        catch (err) {
            fatal(err);
            lastList = Date.now(); // a failed list waits for the next interval
            c.o.log('listing the messages failed; trying again', { err: String(err), in: c.o.pollInterval }, 'info');
            return undefined;
        }
    };
    if (preList || !fallback) {
        // "Started" (since 'now') is when this list is answered: retried across outages and 429s.
        let items;
        for (let attempt = 1; items === undefined; attempt++) {
            try {
                items = await listAll();
            }
            catch (err) {
                fatal(err);
                c.o.log('listing the messages failed; trying again', { err: String(err) }, 'info');
                await (0, transport_js_1.sleep)((0, retry_js_1.backoff)(attempt, 500, 5000) + 100, signal);
            }
        }
        yield { kind: 'list', items, initial: true };
    }
    let failures = 0;
    for (let attempt = 0;; attempt++) {
        if (fallback && failures >= 2) {
            c.o.log('stream unavailable; polling', { every: c.o.pollInterval }, 'info');
            for (;;) {
                const items = await pollOnce(Infinity);
                if (items !== undefined)
                    yield { kind: 'list', items, initial: false };
            }
        }
        const opened = Date.now();
        let heard = false;
        let replaced = false;
        let stream;
        let openError;
        try {
            stream = await openStream(c, signal).catch((err) => {
                openError = err;
                throw err;
            });
            yield { kind: 'list', items: await listAll(), initial: false };
            for await (const ev of stream.events()) {
                heard = true;
                if (ev === undefined)
                    continue; // a line, not an event: the stream is alive
                yield { kind: 'event', item: (0, transport_js_1.fill)(c, ev) };
            }
        }
        catch (err) {
            if (err instanceof StreamReplaced) {
                replaced = true;
            }
            else {
                fatal(err);
                c.o.log('event stream ended', { err: String(err) }, 'info');
            }
        }
        finally {
            stream?.close();
        }
        if (replaced) {
            // Another program follows this inbox: do not take the stream back at
            // once (it would do the same), poll for a while instead.
            c.o.log('the service ended the event stream: another client opened one on this inbox (one stream per inbox); ' +
                'polling the message list meanwhile', { every: c.o.pollInterval, for: internal_js_1.REPLACED_PAUSE }, 'warn');
            const until = Date.now() + internal_js_1.REPLACED_PAUSE;
            while (Date.now() < until) {
                const items = await pollOnce(until);
                if (items !== undefined)
                    yield { kind: 'list', items, initial: false };
            }
            attempt = -1; // the loop's increment makes it 0
            failures = 0;
            continue;
        }
        if (stream !== undefined && heard)
            failures = 0;
        else
            failures++;
        if (!(fallback && failures >= 2)) {
            if (Date.now() - opened > 60_000)
                attempt = 0;
            // After a stream that was open ends, the first reconnect waits the
            // stream's last retry: (the service jitters it per stream, so a
            // restarted node's streams come back spread out) plus up to 250 ms;
            // a 503 with Retry-After waits that; else the backoff.
            let wait = (0, retry_js_1.backoff)(attempt + 1, 500, fallback ? 5000 : 30_000);
            if (stream !== undefined && stream.retry !== undefined)
                wait = stream.retry + Math.random() * 250;
            else if (openError instanceof errors_js_1.MayflyError && openError.status === 503 && openError.retryAfter !== undefined &&
                openError.retryAfter * 1000 <= c.o.policy.maxRetryAfterMs)
                wait = openError.retryAfter * 1000;
            await (0, transport_js_1.sleep)(wait, signal);
            // Is it alive? A gone inbox ends the stream for good.
            if (stream !== undefined) {
                try {
                    await current(c, { signal });
                }
                catch (err) {
                    fatal(err);
                }
            }
        }
    }
}
async function openStream(c, signal) {
    (0, transport_js_1.alive)(c);
    const ctl = new AbortController();
    const onAbort = () => ctl.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const url = c.o.base + '/events';
    const openTimer = setTimeout(() => ctl.abort(new Error(`no answer within ${c.o.streamOpenTimeout} ms`)), c.o.streamOpenTimeout);
    const done = () => {
        clearTimeout(openTimer);
        signal.removeEventListener('abort', onAbort);
        ctl.abort();
    };
    let res;
    try {
        res = await c.o.fetch(url, { method: 'GET', headers: (0, transport_js_1.headers)(c, url, 'text/event-stream'), signal: ctl.signal, redirect: 'manual' });
    }
    catch (err) {
        done();
        if (signal.aborted)
            throw signal.reason;
        const e = new transport_js_1.NetworkError('GET', url, err, (0, transport_js_1.refused)(err));
        (0, transport_js_1.failed)(c, signal, e);
        throw e;
    }
    clearTimeout(openTimer);
    (0, transport_js_1.answered)(c, signal);
    c.jar.store(url, (0, cookies_js_1.setCookieValues)(res.headers));
    if (res.status !== 200) {
        const err = await (0, transport_js_1.errorOf)(c, res, 'GET', url, '/events');
        done();
        throw err;
    }
    if (!(res.headers.get('content-type') ?? '').toLowerCase().startsWith('text/event-stream') || res.body === null) {
        done();
        throw new errors_js_1.MayflyError(`mayfly: GET ${url}: ${res.status}: the event stream answered with something else (${res.headers.get('content-type') ?? 'no content type'})`);
    }
    return new Stream(res.body, c.o.streamIdleTimeout, ctl, done);
}
function takeStream(c) {
    if (c.streaming)
        throw new errors_js_1.StreamBusyError();
    c.streaming = true;
}
/** GET /mailboxes/current: is the inbox alive? (a gone inbox ends a follower for good) */
async function current(c, options) {
    const out = await (0, transport_js_1.call)(c, 'GET', '/mailboxes/current', undefined, 'read', options);
    c.mailbox = out.mailbox;
}
/** The service ended the stream: a newer stream on the same inbox took over. */
class StreamReplaced extends errors_js_1.MayflyError {
    constructor() {
        super('mayfly: the service ended the event stream: another client opened one on this inbox (one stream per inbox)');
        this.name = 'MayflyError';
    }
}
/** One open event stream: yields the message summaries of message.received events (undefined for any other line). */
class Stream {
    #body;
    #idle;
    #ctl;
    #done;
    #replaced = false;
    #parser = new sse_js_1.SSEParser({
        onComment: (text) => {
            if (text.trimStart().startsWith(REPLACED_COMMENT))
                this.#replaced = true;
        },
    });
    constructor(body, idle, ctl, done) {
        this.#body = body;
        this.#idle = idle;
        this.#ctl = ctl;
        this.#done = done;
    }
    /** The stream's last retry: field in ms, once read (undefined when it sent none). */
    get retry() {
        return this.#parser.retry;
    }
    async *events() {
        const reader = this.#body.getReader();
        const decoder = new TextDecoder();
        const parser = this.#parser;
        let timer = setTimeout(() => this.#ctl.abort(new errors_js_1.MayflyError('mayfly: the event stream went silent')), this.#idle);
        try {
            for (;;) {
                const { done, value } = await reader.read();
                if (done)
                    return;
                clearTimeout(timer);
                timer = setTimeout(() => this.#ctl.abort(new errors_js_1.MayflyError('mayfly: the event stream went silent')), this.#idle);
                const evs = parser.push(decoder.decode(value, { stream: true }));
                yield undefined;
                for (const ev of evs) {
                    if (ev.event !== 'message.received')
                        continue;
                    let m;
                    try {
                        m = JSON.parse(ev.data);
                    }
                    catch {
                        m = undefined;
                    }
                    if (m && typeof m.id === 'string' && m.id !== '')
                        yield m;
                }
                if (this.#replaced)
                    throw new StreamReplaced();
            }
        }
        finally {
            clearTimeout(timer);
            reader.releaseLock();
        }
    }
    close() {
        this.#done();
    }
}
