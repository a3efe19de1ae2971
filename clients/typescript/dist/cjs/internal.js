"use strict";
// What the parts of the client share and the caller never sees: the
// resolved options, an inbox's private state (one object that inbox.ts,
// transport.ts, events.ts and wait.ts all work on), the running wait's
// watch, the constants and the timeout check.
Object.defineProperty(exports, "__esModule", { value: true });
exports.Watch = exports.SCOPE_DEADLINE = exports.MAX_TIMER = exports.MIN_TIMEOUT = exports.DEFAULT_UNREACHABLE_AFTER = exports.DEFAULT_WAIT_TIMEOUT = exports.REPLACED_PAUSE = exports.MIN_POLL_INTERVAL = void 0;
exports.checkTimeout = checkTimeout;
exports.scopeDeadline = scopeDeadline;
exports.waitTimeout = waitTimeout;
exports.deadlineLeft = deadlineLeft;
const errors_js_1 = require("./errors.js");
/** The API's floor for polling the message list, in milliseconds. */
exports.MIN_POLL_INTERVAL = 5000;
/**
 * How long a follower whose event stream the service ended because another
 * stream took over the inbox (`: replaced by a newer stream on this inbox`)
 * polls the message list before opening the stream again, in milliseconds.
 */
exports.REPLACED_PAUSE = 60_000;
/** A wait's timeout when the caller gives none, in milliseconds (the same 20 s in the three clients). */
exports.DEFAULT_WAIT_TIMEOUT = 20_000;
/** How long every attempt of a wait may fail at the transport level before it ends with UnreachableError, in ms. */
exports.DEFAULT_UNREACHABLE_AFTER = 10_000;
/** The smallest timeout taken: a smaller one is most likely seconds given where milliseconds are meant. */
exports.MIN_TIMEOUT = 100;
/** Throws a RangeError for a timeout (milliseconds) under MIN_TIMEOUT or not a number. */
function checkTimeout(name, ms) {
    if (ms === undefined)
        return;
    if (typeof ms !== 'number' || Number.isNaN(ms) || ms < exports.MIN_TIMEOUT) {
        throw new RangeError(`mayfly: ${name} is in milliseconds and must be at least ${exports.MIN_TIMEOUT}: got ${String(ms)} (did you mean ${String(ms)} s = ${Number(ms) * 1000} ms?)`);
    }
}
/** setTimeout's longest delay; a longer timer would fire at once. */
exports.MAX_TIMER = 2 ** 31 - 1;
/**
 * The key of a wait's own deadline in its options (a Recipient's: the test's
 * deadline, where the inbox is shared by the tests of a worker). A symbol, so
 * it is no public option.
 */
exports.SCOPE_DEADLINE = Symbol('mayfly.scopeDeadline');
/** The deadline a Recipient put in a wait's options, if any. */
function scopeDeadline(options) {
    return options[exports.SCOPE_DEADLINE];
}
/** The timeout of a wait in ms: the caller's (checked) or the client's, never past the inbox's deadline. */
function waitTimeout(c, timeout, scope) {
    checkTimeout('timeout', timeout);
    return Math.min(timeout ?? c.o.waitTimeout, deadlineLeft(c.deadline), deadlineLeft(scope));
}
/** Milliseconds until d, Infinity without one. */
function deadlineLeft(d) {
    const v = typeof d === 'function' ? d() : d;
    return v === undefined ? Infinity : Math.max(0, (v instanceof Date ? v.getTime() : v) - Date.now());
}
/**
 * What a running wait met, for its errors: whether its attempts fail at the
 * transport level (and since when; past `after` ms it aborts the wait with
 * UnreachableError), the subjects of the new messages that did not match,
 * how many matched.
 */
class Watch {
    signal;
    abort;
    failingSince;
    lastError;
    arrived = [];
    got = 0;
    want = 1;
    #base;
    #after;
    #timer;
    constructor(base, after) {
        this.#base = base;
        this.#after = after;
    }
    ok() {
        this.failingSince = undefined;
        clearTimeout(this.#timer);
        this.#timer = undefined;
    }
    fail(err) {
        this.lastError = err.message.replace(/^mayfly: /, '');
        if (this.failingSince !== undefined)
            return;
        const since = Date.now();
        this.failingSince = since;
        if (this.#after < exports.MAX_TIMER) {
            this.#timer = setTimeout(() => {
                if (this.failingSince !== since)
                    return;
                const s = ((Date.now() - since) / 1000).toFixed(1);
                this.abort?.(new errors_js_1.UnreachableError(`mayfly: the service at ${this.#base} has been unreachable for ${s} s: every attempt failed (last error: ${this.lastError})`, Date.now() - since));
            }, this.#after);
        }
    }
    close() {
        clearTimeout(this.#timer);
    }
    /** Why nothing matched: the service unreachable, messages that did not match, or none at all. */
    /** That the service is unreachable now, since when and the last error; undefined when the last attempt got an answer. */
    unreachable() {
        if (this.failingSince === undefined)
            return undefined;
        return `the service at ${this.#base} has been unreachable for ${((Date.now() - this.failingSince) / 1000).toFixed(1)} s (last error: ${this.lastError})`;
    }
    explain() {
        const u = this.unreachable();
        if (u !== undefined)
            return u;
        const n = this.arrived.length;
        if (n > 0)
            return `${n} message${n === 1 ? '' : 's'} arrived, none matched (first: ${JSON.stringify(this.arrived[0])})`;
        return this.got > 0 ? 'no other message arrived' : 'no message arrived';
    }
}
exports.Watch = Watch;
