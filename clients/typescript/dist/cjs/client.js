"use strict";
// The client: one Mayfly service, inboxes each with a cookie jar of its own.
// The rules (retries, the gone error, waiting, events) are the shared
// contract of clients/SCENARIOS.md. The parts, a file each (the same in the
// three clients): inbox.ts, internal.ts (the inbox's shared private state),
// recipient.ts, shared.ts, transport.ts, retry.ts, cookies.ts, state.ts,
// sse.ts, events.ts, wait.ts, errors.ts, helpers.ts, playwright.ts.
Object.defineProperty(exports, "__esModule", { value: true });
exports.Mayfly = exports.MIN_TIMEOUT = exports.DEFAULT_UNREACHABLE_AFTER = exports.DEFAULT_WAIT_TIMEOUT = exports.REPLACED_PAUSE = exports.MIN_POLL_INTERVAL = exports.Inbox = void 0;
exports.createClient = createClient;
const cookies_js_1 = require("./cookies.js");
const errors_js_1 = require("./errors.js");
const inbox_js_1 = require("./inbox.js");
const internal_js_1 = require("./internal.js");
const state_js_1 = require("./state.js");
const transport_js_1 = require("./transport.js");
var inbox_js_2 = require("./inbox.js");
Object.defineProperty(exports, "Inbox", { enumerable: true, get: function () { return inbox_js_2.Inbox; } });
var internal_js_2 = require("./internal.js");
Object.defineProperty(exports, "MIN_POLL_INTERVAL", { enumerable: true, get: function () { return internal_js_2.MIN_POLL_INTERVAL; } });
Object.defineProperty(exports, "REPLACED_PAUSE", { enumerable: true, get: function () { return internal_js_2.REPLACED_PAUSE; } });
Object.defineProperty(exports, "DEFAULT_WAIT_TIMEOUT", { enumerable: true, get: function () { return internal_js_2.DEFAULT_WAIT_TIMEOUT; } });
Object.defineProperty(exports, "DEFAULT_UNREACHABLE_AFTER", { enumerable: true, get: function () { return internal_js_2.DEFAULT_UNREACHABLE_AFTER; } });
Object.defineProperty(exports, "MIN_TIMEOUT", { enumerable: true, get: function () { return internal_js_2.MIN_TIMEOUT; } });
/** The default logger: warnings to console.warn, the rest dropped. */
function defaultLogger(event, fields, level) {
    if (level === 'warn')
        console.warn(`mayfly: ${event}`, fields);
}
/** Talks to one service; each Inbox made from it has a cookie jar of its own. */
class Mayfly {
    #o;
    constructor(options) {
        let u;
        try {
            u = new URL(options.baseUrl);
        }
        catch {
            throw new errors_js_1.MayflyError(`mayfly: base URL ${JSON.stringify(options.baseUrl)}: want http(s)://host/v1`);
        }
        if (u.protocol !== 'http:' && u.protocol !== 'https:') {
            throw new errors_js_1.MayflyError(`mayfly: base URL ${JSON.stringify(options.baseUrl)}: want http(s)://host/v1`);
        }
        (0, internal_js_1.checkTimeout)('waitTimeout', options.waitTimeout);
        (0, internal_js_1.checkTimeout)('requestTimeout', options.requestTimeout);
        const f = options.fetch ?? globalThis.fetch;
        if (typeof f !== 'function')
            throw new errors_js_1.MayflyError('mayfly: no global fetch (Node 18 or later is needed)');
        this.#o = {
            base: u.toString().replace(/\/+$/, ''),
            requestTimeout: options.requestTimeout ?? 30_000,
            maxAttempts: Math.max(1, options.maxAttempts ?? 6),
            baseDelay: options.baseDelay ?? 200,
            maxDelay: options.maxDelay ?? 5000,
            pollInterval: Math.max(internal_js_1.MIN_POLL_INTERVAL, options.pollInterval ?? internal_js_1.MIN_POLL_INTERVAL),
            streamOpenTimeout: options.streamOpenTimeout ?? 10_000,
            streamIdleTimeout: options.streamIdleTimeout ?? 65_000,
            waitTimeout: options.waitTimeout ?? internal_js_1.DEFAULT_WAIT_TIMEOUT,
            unreachableAfter: options.unreachableAfter ?? internal_js_1.DEFAULT_UNREACHABLE_AFTER,
            maxRetryAfter: options.maxRetryAfter ?? 10_000,
            policy: {
                baseMs: options.baseDelay ?? 200,
                capMs: options.maxDelay ?? 5000,
                maxAttempts: Math.max(1, options.maxAttempts ?? 6),
                maxRetryAfterMs: options.maxRetryAfter ?? 10_000,
                jitterMs: 250,
            },
            userAgent: options.userAgent ?? 'mayfly-ts-client/1',
            log: options.logger ?? defaultLogger,
            fetch: f.bind(globalThis),
        };
    }
    get baseUrl() {
        return this.#o.base;
    }
    /**
     * Creates an inbox and selects it in a new cookie jar. Never retried but
     * when nothing was done (a request-rate 429, 503 REQUEST_PROTECTION, a
     * refused connection); a creation limit throws CreationLimitError at once.
     */
    async createInbox(options = {}) {
        (0, internal_js_1.checkTimeout)('timeout', options.timeout);
        const body = options.lifetimeMinutes === undefined ? {} : { lifetime_minutes: options.lifetimeMinutes };
        const make = () => new inbox_js_1.Inbox(this.#o, new cookies_js_1.CookieJar(this.#o.base), options.deadline);
        if (!options.waitForCapacity) {
            const inbox = make();
            await inbox._create(body, options);
            return inbox;
        }
        const until = Date.now() + (options.timeout ?? this.#o.waitTimeout);
        for (;;) {
            const inbox = make();
            try {
                await inbox._create(body, { signal: options.signal, timeout: Math.max(1, until - Date.now()) });
                return inbox;
            }
            catch (err) {
                if (!(err instanceof errors_js_1.CreationLimitError))
                    throw err;
                // Retry-After when the limit gives one (the creation windows), else a poll every second (the active cap).
                const wait = err.retryAfter !== undefined ? err.retryAfter * 1000 + Math.random() * 250 : 1000;
                if (Date.now() + wait >= until)
                    throw err;
                this.#o.log('creation limit: waiting for capacity', { code: err.code, wait }, 'info');
                await (0, transport_js_1.sleep)(wait, options.signal);
            }
        }
    }
    /**
     * An Inbox from a saved state (Inbox.state(), or the state of the Go or
     * Python client: one JSON format, an object or its JSON text). No request
     * is made. The state's base must be this client's.
     */
    restore(state, options = {}) {
        const st = (0, state_js_1.parseState)(state);
        let base;
        try {
            base = new URL(st.base).toString().replace(/\/+$/, '');
        }
        catch {
            throw new errors_js_1.MayflyError(`mayfly: restore: the state's base ${JSON.stringify(st.base)} is not a URL`);
        }
        if (base !== this.#o.base) {
            throw new errors_js_1.MayflyError(`mayfly: restore: the state is for ${base}, this client talks to ${this.#o.base}`);
        }
        const jar = new cookies_js_1.CookieJar(this.#o.base);
        for (const c of st.cookies)
            jar.put((0, state_js_1.fromStateCookie)(c));
        const inbox = new inbox_js_1.Inbox(this.#o, jar, options.deadline);
        inbox._restore(st);
        return inbox;
    }
}
exports.Mayfly = Mayfly;
/** createClient(options) is `new Mayfly(options)`. */
function createClient(options) {
    return new Mayfly(options);
}
