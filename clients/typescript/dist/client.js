// The client: one Mayfly service, inboxes each with a cookie jar of its own.
// The rules (retries, the gone error, waiting, events) are the shared
// contract of clients/SCENARIOS.md. The parts, a file each (the same in the
// three clients): inbox.ts, internal.ts (the inbox's shared private state),
// recipient.ts, shared.ts, transport.ts, retry.ts, cookies.ts, state.ts,
// sse.ts, events.ts, wait.ts, errors.ts, helpers.ts, playwright.ts.
import { CookieJar } from './cookies.js';
import { CreationLimitError, MayflyError } from './errors.js';
import { Inbox } from './inbox.js';
import { DEFAULT_UNREACHABLE_AFTER, DEFAULT_WAIT_TIMEOUT, MIN_POLL_INTERVAL, checkTimeout } from './internal.js';
import { fromStateCookie, parseState } from './state.js';
import { sleep } from './transport.js';
export { Inbox } from './inbox.js';
export { MIN_POLL_INTERVAL, REPLACED_PAUSE, DEFAULT_WAIT_TIMEOUT, DEFAULT_UNREACHABLE_AFTER, MIN_TIMEOUT } from './internal.js';
/** The default logger: warnings to console.warn, the rest dropped. */
function defaultLogger(event, fields, level) {
    if (level === 'warn')
        console.warn(`mayfly: ${event}`, fields);
}
/** Talks to one service; each Inbox made from it has a cookie jar of its own. */
export class Mayfly {
    #o;
    constructor(options) {
        let u;
        try {
            u = new URL(options.baseUrl);
        }
        catch {
            throw new MayflyError(`mayfly: base URL ${JSON.stringify(options.baseUrl)}: want http(s)://host/v1`);
        }
        if (u.protocol !== 'http:' && u.protocol !== 'https:') {
            throw new MayflyError(`mayfly: base URL ${JSON.stringify(options.baseUrl)}: want http(s)://host/v1`);
        }
        checkTimeout('waitTimeout', options.waitTimeout);
        checkTimeout('requestTimeout', options.requestTimeout);
        const f = options.fetch ?? globalThis.fetch;
        if (typeof f !== 'function')
            throw new MayflyError('mayfly: no global fetch (Node 18 or later is needed)');
        this.#o = {
            base: u.toString().replace(/\/+$/, ''),
            requestTimeout: options.requestTimeout ?? 30_000,
            maxAttempts: Math.max(1, options.maxAttempts ?? 6),
            baseDelay: options.baseDelay ?? 200,
            maxDelay: options.maxDelay ?? 5000,
            pollInterval: Math.max(MIN_POLL_INTERVAL, options.pollInterval ?? MIN_POLL_INTERVAL),
            streamOpenTimeout: options.streamOpenTimeout ?? 10_000,
            streamIdleTimeout: options.streamIdleTimeout ?? 65_000,
            waitTimeout: options.waitTimeout ?? DEFAULT_WAIT_TIMEOUT,
            unreachableAfter: options.unreachableAfter ?? DEFAULT_UNREACHABLE_AFTER,
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
        checkTimeout('timeout', options.timeout);
        const body = options.lifetimeMinutes === undefined ? {} : { lifetime_minutes: options.lifetimeMinutes };
        const make = () => new Inbox(this.#o, new CookieJar(this.#o.base), options.deadline);
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
                if (!(err instanceof CreationLimitError))
                    throw err;
                // Retry-After when the limit gives one (the creation windows), else a poll every second (the active cap).
                const wait = err.retryAfter !== undefined ? err.retryAfter * 1000 + Math.random() * 250 : 1000;
                if (Date.now() + wait >= until)
                    throw err;
                this.#o.log('creation limit: waiting for capacity', { code: err.code, wait }, 'info');
                await sleep(wait, options.signal);
            }
        }
    }
    /**
     * An Inbox from a saved state (Inbox.state(), or the state of the Go or
     * Python client: one JSON format, an object or its JSON text). No request
     * is made. The state's base must be this client's.
     */
    restore(state, options = {}) {
        const st = parseState(state);
        let base;
        try {
            base = new URL(st.base).toString().replace(/\/+$/, '');
        }
        catch {
            throw new MayflyError(`mayfly: restore: the state's base ${JSON.stringify(st.base)} is not a URL`);
        }
        if (base !== this.#o.base) {
            throw new MayflyError(`mayfly: restore: the state is for ${base}, this client talks to ${this.#o.base}`);
        }
        const jar = new CookieJar(this.#o.base);
        for (const c of st.cookies)
            jar.put(fromStateCookie(c));
        const inbox = new Inbox(this.#o, jar, options.deadline);
        inbox._restore(st);
        return inbox;
    }
}
/** createClient(options) is `new Mayfly(options)`. */
export function createClient(options) {
    return new Mayfly(options);
}
