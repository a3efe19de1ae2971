import { Inbox } from './inbox.js';
import type { InboxState } from './state.js';
import type { Message, MessageSummary } from './types.js';
export { Inbox } from './inbox.js';
export { MIN_POLL_INTERVAL, REPLACED_PAUSE, DEFAULT_WAIT_TIMEOUT, DEFAULT_UNREACHABLE_AFTER, MIN_TIMEOUT } from './internal.js';
/** What the logger is told, by importance: `warn` is something the caller should know. */
export type LogLevel = 'debug' | 'info' | 'warn';
export interface ClientOptions {
    /** The API's base URL with its version prefix, e.g. `http://127.0.0.1:8080/v1`. */
    baseUrl: string;
    /** Per-request timeout in milliseconds (not the event stream's); default 30 000. */
    requestTimeout?: number;
    /** Attempts of a single call, the first included; default 6. Waits and event streams have no cap. */
    maxAttempts?: number;
    /** The first backoff's ceiling in ms (default 200); it doubles up to maxDelay (default 5000), full jitter. */
    baseDelay?: number;
    maxDelay?: number;
    /** waitForMessage's polling interval when the stream is unavailable; never under 5000 ms. */
    pollInterval?: number;
    /** How long opening the event stream may take (default 10 000 ms) and how long it may stay silent (default 65 000 ms). */
    streamOpenTimeout?: number;
    streamIdleTimeout?: number;
    /**
     * The timeout of a wait (waitForMessage, waitForMessages, events) that is
     * given none, in milliseconds (at least 100); default 20 000.
     */
    waitTimeout?: number;
    /**
     * A wait (or events()) whose every attempt has failed at the transport
     * level (refused, reset, no answer) for this long, in milliseconds, ends
     * early with UnreachableError; default 10 000.
     */
    unreachableAfter?: number;
    /**
     * A `Retry-After` longer than this (ms; default 10 000) is not waited: the
     * error is thrown (waits and event streams go on with their own backoff).
     */
    maxRetryAfter?: number;
    userAgent?: string;
    /**
     * Told about retries and reconnects (`debug`, `info`) and about what the
     * caller should know (`warn`: the service ended this inbox's event stream
     * because another program opened one on it). Never a cookie. Default:
     * warnings go to `console.warn`, the rest is dropped; pass `() => {}` to
     * silence it.
     */
    logger?: (event: string, fields: Record<string, unknown>, level: LogLevel) => void;
    /** The fetch to use; default the global one. */
    fetch?: typeof fetch;
}
export interface CallOptions {
    /** Ends the call at once, with the signal's reason, whatever it is doing. */
    signal?: AbortSignal;
    /**
     * The whole call's budget in milliseconds, retries included: when the next
     * retry's wait would pass it, the last error is thrown instead (an
     * AbortSignal has no deadline a client could read).
     */
    timeout?: number;
}
export interface CreateInboxOptions extends CallOptions {
    /** Initial lifetime in whole minutes, 1 to 10; the service's default (10) when absent. */
    lifetimeMinutes?: number;
    /**
     * On a creation limit (429 CREATION_RATE_LIMITED, ACTIVE_INBOX_LIMIT,
     * GLOBAL_CREATION_LIMIT), wait out its Retry-After (or poll every second
     * when it gives none, as for the active cap) and try again, within
     * `timeout` (default the client's waitTimeout, 20 s) or until the signal;
     * then the CreationLimitError. Default false: it is thrown at once.
     */
    waitForCapacity?: boolean;
    /**
     * A time no wait of this inbox runs past (epoch milliseconds, a Date, or a
     * function giving one, read at each wait): typically the test runner's own
     * deadline, so that the client's WaitTimeoutError, which says why, comes
     * before the runner's timeout. The Playwright fixture sets it.
     */
    deadline?: number | Date | (() => number | Date | undefined);
}
export interface ListOptions extends CallOptions {
    /** Page size, 1 to 100; default 20. */
    limit?: number;
    offset?: number;
}
export interface Page {
    items: MessageSummary[];
    limit: number;
    offset: number;
    hasMore: boolean;
}
/** Which messages a wait may return (clients/SCENARIOS.md). */
export type Since = 'unseen' | 'now' | Date | {
    messageId: string;
} | (string & {});
export interface WaitOptions extends CallOptions {
    /** A regular expression the subject must match. */
    subject?: RegExp | string;
    /** A regular expression the From header must match. */
    from?: RegExp | string;
    /** A regular expression text_body must match. */
    text?: RegExp | string;
    /** A predicate on the full message (bodies included). */
    match?: (message: Message) => boolean;
    /**
     * The recipient: only messages sent to this address (a tagged address of
     * the inbox, `addressFor(tag)`, or the inbox's own), compared without
     * regard to case. A Recipient's waits set it.
     */
    to?: string;
    /**
     * `'unseen'` (default): not yet returned by a wait or message() of this
     * Inbox; `'now'`: not in the inbox when the wait started, that is when its
     * first list is answered (a request-rate 429 or an outage delays that:
     * trigger the mail after the wait started, or pass a message id or a time
     * taken before triggering it); a message id
     * (a string or `{messageId}`): received after that message; a Date:
     * received strictly after it (the server's clock).
     */
    since?: Since;
    /**
     * In milliseconds (at least 100: a smaller value throws a RangeError);
     * default the client's waitTimeout, 20 000. Past it: WaitTimeoutError.
     */
    timeout?: number;
}
export interface ExpectNoMessageOptions extends WaitOptions {
    /** The window in milliseconds (at least 100) in which no matching, new message may arrive. */
    within: number;
}
export interface EventsOptions extends CallOptions {
    /**
     * In milliseconds (at least 100); default the client's waitTimeout, 20 000:
     * at it the iteration ends by throwing WaitTimeoutError.
     */
    timeout?: number;
    /** Only the messages sent to this address (compared without regard to case). */
    to?: string;
}
export interface InboxEvent {
    type: 'message.received';
    message: MessageSummary;
    /** Found by the list after a (re)connect rather than announced by the stream. */
    missed: boolean;
}
/** Talks to one service; each Inbox made from it has a cookie jar of its own. */
export declare class Mayfly {
    #private;
    constructor(options: ClientOptions);
    get baseUrl(): string;
    /**
     * Creates an inbox and selects it in a new cookie jar. Never retried but
     * when nothing was done (a request-rate 429, 503 REQUEST_PROTECTION, a
     * refused connection); a creation limit throws CreationLimitError at once.
     */
    createInbox(options?: CreateInboxOptions): Promise<Inbox>;
    /**
     * An Inbox from a saved state (Inbox.state(), or the state of the Go or
     * Python client: one JSON format, an object or its JSON text). No request
     * is made. The state's base must be this client's.
     */
    restore(state: InboxState | string, options?: {
        deadline?: CreateInboxOptions['deadline'];
    }): Inbox;
}
/** createClient(options) is `new Mayfly(options)`. */
export declare function createClient(options: ClientOptions): Mayfly;
