/** read: a GET of one call; create: POST /mailboxes; write: POST select, PATCH, DELETE; wait: a request of a wait or an event stream (no attempt cap). */
export type RequestKind = 'read' | 'create' | 'write' | 'wait';
/** A failed attempt: the answer (status, code, the Retry-After header's text), or a transport failure. */
export interface Failure {
    status?: number;
    code?: string;
    /** The Retry-After header as sent (a whole number of seconds counts; anything else is as if absent). */
    retryAfter?: string | null;
    /** refused: nothing was sent; reset or timeout: after sending. */
    transport?: 'refused' | 'reset' | 'timeout';
}
export interface RetryPolicy {
    /** The first backoff's ceiling, ms (doubling, full jitter). */
    baseMs: number;
    /** The backoff's cap, ms. */
    capMs: number;
    /** Attempts of one call (waits have no cap). */
    maxAttempts: number;
    /** A longer Retry-After is not waited: the error is returned. */
    maxRetryAfterMs: number;
    /** Up to this much is added to a Retry-After wait. */
    jitterMs: number;
}
export declare const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy>;
/** The codes of the creation limits: never retried. */
export declare const CREATION_LIMIT_CODES: ReadonlySet<string>;
/** Retry-After in seconds when it is a whole number of seconds, else undefined (as if absent). */
export declare function retryAfterSeconds(value: string | null | undefined): number | undefined;
/** Full jitter over 2^(attempt-1)·base, capped; random gives [0, 1). */
export declare function backoff(attempt: number, base: number, cap: number, random?: () => number): number;
/**
 * The wait in ms before the next attempt after `attempt` (1: the first)
 * failed with `f`, or undefined: give up. remainingMs is the time left before
 * the caller's deadline (undefined: none): no retry outlives it.
 */
export declare function retryDelay(f: Failure, kind: RequestKind, attempt: number, remainingMs: number | undefined, policy?: RetryPolicy, random?: () => number): number | undefined;
