// The retry rules of clients/SCENARIOS.md ("Retries"), one pure function:
// what failed (an answer or a transport error), the kind of request, the
// attempt and the time left give the wait before the next attempt, or
// undefined: give up (the error is returned). test/retry.test.js runs every
// case of clients/testdata/retry.json against it.
export const DEFAULT_RETRY_POLICY = { baseMs: 200, capMs: 5000, maxAttempts: 6, maxRetryAfterMs: 10_000, jitterMs: 250 };
/** The codes of the creation limits: never retried. */
export const CREATION_LIMIT_CODES = new Set(['CREATION_RATE_LIMITED', 'ACTIVE_INBOX_LIMIT', 'GLOBAL_CREATION_LIMIT']);
/** Retry-After in seconds when it is a whole number of seconds, else undefined (as if absent). */
export function retryAfterSeconds(value) {
    const v = (value ?? '').trim();
    return /^\d+$/.test(v) ? Number(v) : undefined;
}
/** Full jitter over 2^(attempt-1)·base, capped; random gives [0, 1). */
export function backoff(attempt, base, cap, random = Math.random) {
    return random() * Math.min(cap, base * 2 ** Math.min(attempt - 1, 30));
}
/**
 * The wait in ms before the next attempt after `attempt` (1: the first)
 * failed with `f`, or undefined: give up. remainingMs is the time left before
 * the caller's deadline (undefined: none): no retry outlives it.
 */
export function retryDelay(f, kind, attempt, remainingMs, policy = DEFAULT_RETRY_POLICY, random = Math.random) {
    if (kind !== 'wait' && attempt >= policy.maxAttempts)
        return undefined;
    const wait = delay(f, kind, attempt, policy, random);
    if (wait === undefined || (remainingMs !== undefined && wait >= remainingMs))
        return undefined;
    return wait;
}
function delay(f, kind, attempt, p, random) {
    const safe = kind === 'read' || kind === 'wait';
    if (f.transport !== undefined) {
        return f.transport === 'refused' || safe ? backoff(attempt, p.baseMs, p.capMs, random) : undefined;
    }
    const status = f.status ?? 0;
    const ra = retryAfterSeconds(f.retryAfter);
    if (ra !== undefined && ra * 1000 > p.maxRetryAfterMs && !(status === 429 && CREATION_LIMIT_CODES.has(f.code ?? ''))) {
        return undefined; // not waited, whatever the status
    }
    if (status === 429) {
        if (CREATION_LIMIT_CODES.has(f.code ?? ''))
            return undefined;
        return (ra ?? 1) * 1000 + random() * p.jitterMs; // refused before anything was done: every kind
    }
    if (status === 503 && f.code === 'REQUEST_PROTECTION')
        return (ra ?? 1) * 1000 + random() * p.jitterMs;
    if ((status === 500 || status === 503) && safe) {
        return Math.max((ra ?? 0) * 1000, backoff(attempt, p.baseMs, p.capMs, random));
    }
    return undefined;
}
