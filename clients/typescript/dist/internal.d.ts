import type { CookieJar } from './cookies.js';
import type { InboxGoneError } from './errors.js';
import type { LogLevel } from './client.js';
import type { RetryPolicy } from './retry.js';
import type { Mailbox } from './types.js';
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
/** Throws a RangeError for a timeout (milliseconds) under MIN_TIMEOUT or not a number. */
export declare function checkTimeout(name: string, ms: number | undefined): void;
/** setTimeout's longest delay; a longer timer would fire at once. */
export declare const MAX_TIMER: number;
/** The client's options, resolved (the defaults filled in). */
export interface Resolved {
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
/** An inbox's private state, shared by the parts of the client that work on it. */
export interface InboxCore {
    readonly o: Resolved;
    /** The inbox's own cookie jar. */
    readonly jar: CookieJar;
    /** The inbox as last seen (creation, select, current, extend). */
    mailbox: Mailbox | undefined;
    /** Set once the inbox is gone: every call but delete() throws it. */
    gone: InboxGoneError | undefined;
    /** An event stream (a wait or events()) runs: one at a time. */
    streaming: boolean;
    /** Ids returned by a wait or message(): what `since: 'unseen'` leaves out. */
    readonly returned: Set<string>;
    /** createInbox's `deadline`: no wait of the inbox runs past it. */
    readonly deadline: Deadline | undefined;
    /** The running wait's watch (what its attempts met), when one runs. */
    watch: Watch | undefined;
}
/** A time no wait runs past: epoch milliseconds, a Date, or a function giving one (read at each wait). */
export type Deadline = number | Date | (() => number | Date | undefined);
/**
 * The key of a wait's own deadline in its options (a Recipient's: the test's
 * deadline, where the inbox is shared by the tests of a worker). A symbol, so
 * it is no public option.
 */
export declare const SCOPE_DEADLINE: unique symbol;
/** The deadline a Recipient put in a wait's options, if any. */
export declare function scopeDeadline(options: object): Deadline | undefined;
/** The timeout of a wait in ms: the caller's (checked) or the client's, never past the inbox's deadline. */
export declare function waitTimeout(c: InboxCore, timeout: number | undefined, scope?: Deadline): number;
/** Milliseconds until d, Infinity without one. */
export declare function deadlineLeft(d: Deadline | undefined): number;
/**
 * What a running wait met, for its errors: whether its attempts fail at the
 * transport level (and since when; past `after` ms it aborts the wait with
 * UnreachableError), the subjects of the new messages that did not match,
 * how many matched.
 */
export declare class Watch {
    #private;
    signal: AbortSignal | undefined;
    abort: ((err: Error) => void) | undefined;
    failingSince: number | undefined;
    lastError: string | undefined;
    readonly arrived: string[];
    got: number;
    want: number;
    constructor(base: string, after: number);
    ok(): void;
    fail(err: Error): void;
    close(): void;
    /** Why nothing matched: the service unreachable, messages that did not match, or none at all. */
    /** That the service is unreachable now, since when and the last error; undefined when the last attempt got an answer. */
    unreachable(): string | undefined;
    explain(): string;
}
