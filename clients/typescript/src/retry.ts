// The retry rules of clients/SCENARIOS.md ("Retries"), one pure function:
// what failed (an answer or a transport error), the kind of request, the
// attempt and the time left give the wait before the next attempt, or
// undefined: give up (the error is returned). test/retry.test.js runs every
// case of clients/testdata/retry.json against it.

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

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = { baseMs: 200, capMs: 5000, maxAttempts: 6, maxRetryAfterMs: 10_000, jitterMs: 250 };

/** The codes of the creation limits: never retried. */
export const CREATION_LIMIT_CODES: ReadonlySet<string> = new Set(['CREATION_RATE_LIMITED', 'ACTIVE_INBOX_LIMIT', 'GLOBAL_CREATION_LIMIT']);

/** Retry-After in seconds when it is a whole number of seconds, else undefined (as if absent). */
export function retryAfterSeconds(value: string | null | undefined): number | undefined {
  const v = (value ?? '').trim();
  return /^\d+$/.test(v) ? Number(v) : undefined;
}

/** Full jitter over 2^(attempt-1)·base, capped; random gives [0, 1). */
export function backoff(attempt: number, base: number, cap: number, random: () => number = Math.random): number {
  return random() * Math.min(cap, base * 2 ** Math.min(attempt - 1, 30));
}

/**
 * The wait in ms before the next attempt after `attempt` (1: the first)
 * failed with `f`, or undefined: give up. remainingMs is the time left before
 * the caller's deadline (undefined: none): no retry outlives it.
 */
export function retryDelay(
  f: Failure, kind: RequestKind, attempt: number, remainingMs: number | undefined,
  policy: RetryPolicy = DEFAULT_RETRY_POLICY, random: () => number = Math.random,
): number | undefined {
  if (kind !== 'wait' && attempt >= policy.maxAttempts) return undefined;
  const wait = delay(f, kind, attempt, policy, random);
  if (wait === undefined || (remainingMs !== undefined && wait >= remainingMs)) return undefined;
  return wait;
}

function delay(f: Failure, kind: RequestKind, attempt: number, p: RetryPolicy, random: () => number): number | undefined {
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
    if (CREATION_LIMIT_CODES.has(f.code ?? '')) return undefined;
    return (ra ?? 1) * 1000 + random() * p.jitterMs; // refused before anything was done: every kind
  }
  if (status === 503 && f.code === 'REQUEST_PROTECTION') return (ra ?? 1) * 1000 + random() * p.jitterMs;
  if ((status === 500 || status === 503) && safe) {
    return Math.max((ra ?? 0) * 1000, backoff(attempt, p.baseMs, p.capMs, random));
  }
  return undefined;
}
