import { CookieJar } from './cookies.js';
import type { RetryPolicy } from './retry.js';
import type { InboxState } from './state.js';
import { Recipient } from './recipient.js';
import type { Mailbox, Message, MessageSummary } from './types.js';
/** The API's floor for polling the message list, in milliseconds. */
export declare const MIN_POLL_INTERVAL = 5000;
/**
 * How long a follower whose event stream the service ended because another
 * stream took over the inbox (`: replaced by a newer stream on this inbox`)
 * polls the message list before opening the stream again, in milliseconds.
 */
export declare const REPLACED_PAUSE = 60000;
/** A wait's timeout when the caller gives none, in milliseconds (the same 20 s in the three clients). */
export declare const DEFAULT_WAIT_TIMEOUT = 20000;
/** How long every attempt of a wait may fail at the transport level before it ends with UnreachableError, in ms. */
export declare const DEFAULT_UNREACHABLE_AFTER = 10000;
/** The smallest timeout taken: a smaller one is most likely seconds given where milliseconds are meant. */
export declare const MIN_TIMEOUT = 100;
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
interface Resolved {
    base: string;
    requestTimeout: number;
    maxAttempts: number;
    baseDelay: number;
    maxDelay: number;
    pollInterval: number;
    streamOpenTimeout: number;
    streamIdleTimeout: number;
    waitTimeout: number;
    unreachableAfter: number;
    maxRetryAfter: number;
    policy: RetryPolicy;
    userAgent: string;
    log: (event: string, fields: Record<string, unknown>, level: LogLevel) => void;
    fetch: typeof fetch;
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
/** One inbox with the cookie jar that gives access to it. One event stream at a time. */
export declare class Inbox {
    #private;
    /** @internal use Mayfly.createInbox or Mayfly.restore */
    constructor(o: Resolved, jar: CookieJar, deadline?: CreateInboxOptions['deadline']);
    /** Whether the inbox is gone (deleted, expired, its session revoked): every method but delete() then throws InboxGoneError. */
    get gone(): boolean;
    /**
     * The inbox's saved state (one JSON format with the Go and Python
     * clients): the mailbox, the cookie jar and the ids already returned.
     * Mayfly.restore() makes an Inbox of it in another process. It holds the
     * cookie values: keep it as secret as they are.
     */
    state(): InboxState;
    /** @internal */
    _restore(st: InboxState): void;
    /** The inbox as last seen (creation, select, current, extend). */
    get mailbox(): Mailbox;
    get id(): string;
    get address(): string;
    /**
     * The tagged address `<local>+<tag>@<domain>` of this inbox: its mail lands
     * here, with `to` set to it. No request; a RangeError for a tag that is not
     * 1 to 64 of A-Z a-z 0-9 . _ - or makes the local part longer than 64.
     */
    addressFor(tag: string): string;
    /** A Recipient: the tagged address of `tag`, whose waits and events see only the mail sent to it. */
    recipient(tag: string): Recipient;
    /** @internal */
    _create(body: object, opts: CallOptions): Promise<void>;
    /** Opens a new session with the scoped cookie (replaces the jar's service_session). */
    select(options?: CallOptions): Promise<Mailbox>;
    /** Reads the inbox (GET /mailboxes/current). */
    current(options?: CallOptions): Promise<Mailbox>;
    /** Asks for minutes (1 to 10) more; the grant never passes max_expires_at. Returns the inbox with its new expiry. */
    extend(minutes: number, options?: CallOptions): Promise<Mailbox>;
    /**
     * Destroys the inbox and its messages; from then on every other method
     * throws InboxGoneError without a request. Idempotent: an inbox already
     * gone (deleted here or elsewhere, expired) is success. Resolves to whether
     * this call deleted it (false: it was gone already; no request is sent when
     * this object knows it).
     */
    delete(options?: CallOptions): Promise<boolean>;
    /** One page of messages, newest first. */
    list(options?: ListOptions): Promise<Page>;
    /** Every page of messages, newest first, fetched as the iteration goes. */
    pages(options?: {
        pageSize?: number;
        signal?: AbortSignal;
    }): AsyncGenerator<Page, void, undefined>;
    /** Every message summary, newest first, a page at a time. */
    messages(options?: {
        pageSize?: number;
        signal?: AbortSignal;
    }): AsyncGenerator<MessageSummary, void, undefined>;
    /** One message with its bodies; it counts as returned for `since: 'unseen'`. */
    message(id: string, options?: CallOptions): Promise<Message>;
    /** Deletes one message. */
    deleteMessage(id: string, options?: CallOptions): Promise<void>;
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
    events(options?: EventsOptions): AsyncGenerator<InboxEvent, void, undefined>;
    /**
     * The first message that matches and is new in the sense of `since`
     * (default 'unseen'), with its bodies (status ready or failed); the oldest
     * when several qualify. Follows the event stream, lists after every
     * (re)connect, polls every 5 s when the stream fails twice in a row (and
     * for a minute, with a warning to the logger, when the service ends the
     * stream because another program opened one on the inbox), and keeps going
     * through restarts, refused connections, 503s and 429s until its timeout
     * (milliseconds; default 20 000): WaitTimeoutError, whose message says why
     * (the server unreachable, N messages arrived and none matched, or none
     * arrived). When every attempt has failed at the transport level for the
     * client's unreachableAfter (10 s), it ends early with UnreachableError.
     * The signal ends it at once with the signal's reason.
     */
    waitForMessage(options?: WaitOptions): Promise<Message>;
    /**
     * The first `count` messages that match and are new in the sense of
     * `since`, oldest first, with their bodies; as waitForMessage, and they
     * count as returned (since 'unseen') once all are there. Its timeout's
     * WaitTimeoutError says how many had come.
     */
    waitForMessages(count: number, options?: WaitOptions): Promise<Message[]>;
    /**
     * Succeeds when no message that matches and is new in the sense of `since`
     * (default 'unseen') arrives within `within` milliseconds: the honest
     * "no second email" assertion. A matching message fails it at once with
     * UnexpectedMessageError (`received` is the message; it is not marked
     * returned). A server unreachable at the end of the window cannot prove the
     * absence: UnreachableError.
     */
    expectNoMessage(options: ExpectNoMessageOptions): Promise<void>;
}
export {};
