// The error classes. Every error the client throws for the API is a
// MayflyError or a subclass; cancellation throws the AbortSignal's reason
// (an AbortError DOMException unless the caller chose another), as fetch does.

import type { Message } from './types.js';
import { retryAfterSeconds } from './retry.js';

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
export class MayflyError extends Error {
  /** The HTTP status; undefined when no answer was read (a network error, a local check). */
  readonly status: number | undefined;
  /** The stable error code (`error.code`), e.g. `MAILBOX_SESSION_INVALID`. */
  readonly code: string | undefined;
  readonly requestId: string | undefined;
  readonly details: Record<string, unknown> | undefined;
  /** Seconds the service asked to wait before trying again (Retry-After), if it said. */
  readonly retryAfter: number | undefined;

  constructor(message: string, init: MayflyErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'MayflyError';
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.details = init.details;
    this.retryAfter = init.retryAfter;
  }
}

/** A creation limit (per-IP windows, active inboxes, global): never retried; retryAfter says how long to wait. */
export class CreationLimitError extends MayflyError {
  constructor(message: string, init: MayflyErrorInit = {}) {
    super(message, init);
    this.name = 'CreationLimitError';
  }
}

/** The request rate (429 RATE_LIMITED) still refused the call after every attempt. */
export class RateLimitedError extends MayflyError {
  constructor(message: string, init: MayflyErrorInit = {}) {
    super(message, init);
    this.name = 'RateLimitedError';
  }
}

/**
 * A wait's own timeout (waitForMessage, waitForMessages, events) passed. The
 * message says why nothing matched: the server unreachable (the last
 * transport error and for how long), N messages arrived and none matched (the
 * first one's subject), or no message arrived.
 */
export class WaitTimeoutError extends MayflyError {
  constructor(message: string, init: MayflyErrorInit = {}) {
    super(message, init);
    this.name = 'WaitTimeoutError';
  }
}

/** A second event stream (events() or waitForMessage) on one Inbox while one runs. */
export class StreamBusyError extends MayflyError {
  constructor(message = 'mayfly: an event stream of this inbox is already open') {
    super(message);
    this.name = 'StreamBusyError';
  }
}

/**
 * The service no longer accepts a session: a 401. On a call made without an
 * inbox's cookies (creation) it is this class; any 401 on a call made with
 * them means the inbox is gone: InboxGoneError, a subclass.
 */
export class SessionInvalidError extends MayflyError {
  constructor(message = 'mayfly: session invalid', init: MayflyErrorInit = {}) {
    super(message, init);
    this.name = 'SessionInvalidError';
  }
}

/**
 * The inbox expired, was deleted (by this client or otherwise) or its session
 * was revoked: any 401 on a call made with the inbox's cookies, or 404
 * MAILBOX_NOT_FOUND on select. It cannot be recovered: create a new inbox.
 * From then on every method but delete() throws it without sending a request.
 * A SessionInvalidError too (the same in the three clients).
 */
export class InboxGoneError extends SessionInvalidError {
  constructor(message = 'mayfly: inbox expired or deleted', init: MayflyErrorInit = {}) {
    super(message, init);
    this.name = 'InboxGoneError';
  }
}

/**
 * Every attempt of a wait (or of an event stream) failed at the transport
 * level (connection refused or reset, no answer) for the client's
 * unreachableAfter (10 s) in a row: the wait ends early with this error,
 * naming the URL and the last transport error.
 */
export class UnreachableError extends MayflyError {
  /** How long, in milliseconds, every attempt had failed. */
  readonly unreachableFor: number;
  constructor(message: string, unreachableFor: number, init: MayflyErrorInit = {}) {
    super(message, init);
    this.name = 'UnreachableError';
    this.unreachableFor = unreachableFor;
  }
}

/** expectNoMessage() saw a matching message within its window; `received` is that message. */
export class UnexpectedMessageError extends MayflyError {
  readonly received: Message;
  constructor(message: string, received: Message) {
    super(message);
    this.name = 'UnexpectedMessageError';
    this.received = received;
  }
}

export { CREATION_LIMIT_CODES } from './retry.js';

/** Retry-After as seconds: a whole number of seconds; anything else is as if absent (clients/SCENARIOS.md, Retries). */
export function parseRetryAfter(value: string | null): number | undefined {
  return retryAfterSeconds(value);
}

/** The way out of a creation limit, in the three clients' words. */
export const CREATION_LIMIT_WAY_OUT =
  "a test suite can share one inbox and give each test its own address (a shared inbox and tagged addresses: see the client's README)";

/**
 * What a creation limit's message adds (clients/SCENARIOS.md, "A
 * creation-limit error explains itself"): the window (the service's
 * details.window, else read from Retry-After: up to 60 s the minute, up to
 * 3600 s the hour, else the day), the active-inbox cap or the global cap; the
 * wait when Retry-After came; the way out.
 */
export function explainCreationLimit(code: string | undefined, retryAfter: number | undefined, details?: Record<string, unknown>): string {
  let what: string;
  const window = typeof details?.['window'] === 'string' ? details['window'] : undefined;
  if (code === 'ACTIVE_INBOX_LIMIT') {
    what = 'the active-inbox cap is reached (live inboxes of this IP or network: delete one or wait for one to expire)';
  } else if (code === 'GLOBAL_CREATION_LIMIT') {
    what = "the service's global cap on creations is reached";
  } else if (window !== undefined) {
    what = `this IP's creations of the ${window} are spent`;
  } else if (retryAfter === undefined) {
    what = "this IP's creation window is spent";
  } else {
    what = `this IP's creations of the ${retryAfter <= 60 ? 'minute' : retryAfter <= 3600 ? 'hour' : 'day'} are spent`;
  }
  const wait = retryAfter === undefined ? '' : `; retry in ${Math.ceil(retryAfter)} s`;
  return `${what}${wait}; ${CREATION_LIMIT_WAY_OUT}`;
}
