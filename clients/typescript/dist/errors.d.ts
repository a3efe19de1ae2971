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
/**
 * The inbox expired, was deleted (by this client or otherwise) or its session
 * was revoked: any 401 on a call made with the inbox's cookies, or 404
 * MAILBOX_NOT_FOUND on select. It cannot be recovered: create a new inbox.
 * From then on every method throws it without sending a request.
 */
export declare class InboxGoneError extends MayflyError {
    constructor(message?: string, init?: MayflyErrorInit);
}
/** A creation limit (per-IP windows, active inboxes, global): never retried; retryAfter says how long to wait. */
export declare class CreationLimitError extends MayflyError {
    constructor(message: string, init?: MayflyErrorInit);
}
/** The request rate (429 RATE_LIMITED) still refused the call after every attempt. */
export declare class RateLimitedError extends MayflyError {
    constructor(message: string, init?: MayflyErrorInit);
}
/** waitForMessage's own timeout passed without a matching message. */
export declare class WaitTimeoutError extends MayflyError {
    constructor(message: string, init?: MayflyErrorInit);
}
/** A second event stream (events() or waitForMessage) on one Inbox while one runs. */
export declare class StreamBusyError extends MayflyError {
    constructor(message?: string);
}
/**
 * A 401 on a call made without an inbox's cookies (creation). Any 401 on a
 * call made with them means the inbox is gone: InboxGoneError.
 */
export declare class SessionInvalidError extends MayflyError {
    constructor(message: string, init?: MayflyErrorInit);
}
export declare const CREATION_LIMIT_CODES: ReadonlySet<string>;
/** Retry-After as seconds: delta-seconds or an HTTP date. */
export declare function parseRetryAfter(value: string | null, now?: number): number | undefined;
