import type { Message } from './types.js';
export interface MayflyErrorInit {
    status?: number;
    code?: string;
    requestId?: string;
    details?: Record<string, unknown>;
    /** Seconds the service asked to wait (Retry-After). */
    retryAfter?: number;
    cause?: unknown;
}
/** The base of every error of the client: an API error answer or a client-side failure. */
export declare class MayflyError extends Error {
    /** The HTTP status; undefined when no answer was read (a network error, a local check). */
    readonly status: number | undefined;
    /** The stable error code (`error.code`), e.g. `MAILBOX_SESSION_INVALID`. */
    readonly code: string | undefined;
    readonly requestId: string | undefined;
    readonly details: Record<string, unknown> | undefined;
    /** Seconds the service asked to wait before trying again (Retry-After), if it said. */
    readonly retryAfter: number | undefined;
    constructor(message: string, init?: MayflyErrorInit);
}
/** A creation limit (per-IP windows, active inboxes, global): never retried; retryAfter says how long to wait. */
export declare class CreationLimitError extends MayflyError {
    constructor(message: string, init?: MayflyErrorInit);
}
/** The request rate (429 RATE_LIMITED) still refused the call after every attempt. */
export declare class RateLimitedError extends MayflyError {
    constructor(message: string, init?: MayflyErrorInit);
}
/**
 * A wait's own timeout (waitForMessage, waitForMessages, events) passed. The
 * message says why nothing matched: the server unreachable (the last
 * transport error and for how long), N messages arrived and none matched (the
 * first one's subject), or no message arrived.
 */
export declare class WaitTimeoutError extends MayflyError {
    constructor(message: string, init?: MayflyErrorInit);
}
/** A second event stream (events() or waitForMessage) on one Inbox while one runs. */
export declare class StreamBusyError extends MayflyError {
    constructor(message?: string);
}
/**
 * The service no longer accepts a session: a 401. On a call made without an
 * inbox's cookies (creation) it is this class; any 401 on a call made with
 * them means the inbox is gone: InboxGoneError, a subclass.
 */
export declare class SessionInvalidError extends MayflyError {
    constructor(message?: string, init?: MayflyErrorInit);
}
/**
 * The inbox expired, was deleted (by this client or otherwise) or its session
 * was revoked: any 401 on a call made with the inbox's cookies, or 404
 * MAILBOX_NOT_FOUND on select. It cannot be recovered: create a new inbox.
 * From then on every method but delete() throws it without sending a request.
 * A SessionInvalidError too (the same in the three clients).
 */
export declare class InboxGoneError extends SessionInvalidError {
    constructor(message?: string, init?: MayflyErrorInit);
}
/**
 * Every attempt of a wait (or of an event stream) failed at the transport
 * level (connection refused or reset, no answer) for the client's
 * unreachableAfter (10 s) in a row: the wait ends early with this error,
 * naming the URL and the last transport error.
 */
export declare class UnreachableError extends MayflyError {
    /** How long, in milliseconds, every attempt had failed. */
    readonly unreachableFor: number;
    constructor(message: string, unreachableFor: number, init?: MayflyErrorInit);
}
/** expectNoMessage() saw a matching message within its window; `received` is that message. */
export declare class UnexpectedMessageError extends MayflyError {
    readonly received: Message;
    constructor(message: string, received: Message);
}
export { CREATION_LIMIT_CODES } from './retry.js';
/** Retry-After as seconds: a whole number of seconds; anything else is as if absent (clients/SCENARIOS.md, Retries). */
export declare function parseRetryAfter(value: string | null): number | undefined;
/** The way out of a creation limit, in the three clients' words. */
export declare const CREATION_LIMIT_WAY_OUT = "a test suite can share one inbox and give each test its own address (a shared inbox and tagged addresses: see the client's README)";
/**
 * What a creation limit's message adds (clients/SCENARIOS.md, "A
 * creation-limit error explains itself"): the window (the service's
 * details.window, else read from Retry-After: up to 60 s the minute, up to
 * 3600 s the hour, else the day), the active-inbox cap or the global cap; the
 * wait when Retry-After came; the way out.
 */
export declare function explainCreationLimit(code: string | undefined, retryAfter: number | undefined, details?: Record<string, unknown>): string;
