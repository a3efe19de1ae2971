// What the parts of the client share and the caller never sees: the
// resolved options, an inbox's private state (one object that inbox.ts,
// transport.ts, events.ts and wait.ts all work on), the running wait's
// watch, the constants and the timeout check.

import type { CookieJar } from './cookies.js';
import type { InboxGoneError } from './errors.js';
import { UnreachableError } from './errors.js';
import type { LogLevel } from './client.js';
import type { RetryPolicy } from './retry.js';
import type { Mailbox } from './types.js';

/** The API's floor for polling the message list, in milliseconds. */
export const MIN_POLL_INTERVAL = 5000;

/**
 * How long a follower whose event stream the service ended because another
 * stream took over the inbox (`: replaced by a newer stream on this inbox`)
 * polls the message list before opening the stream again, in milliseconds.
 */
export const REPLACED_PAUSE = 60_000;

/** A wait's timeout when the caller gives none, in milliseconds (the same 20 s in the three clients). */
export const DEFAULT_WAIT_TIMEOUT = 20_000;

/** How long every attempt of a wait may fail at the transport level before it ends with UnreachableError, in ms. */
export const DEFAULT_UNREACHABLE_AFTER = 10_000;

/** The smallest timeout taken: a smaller one is most likely seconds given where milliseconds are meant. */
export const MIN_TIMEOUT = 100;

/** Throws a RangeError for a timeout (milliseconds) under MIN_TIMEOUT or not a number. */
export function checkTimeout(name: string, ms: number | undefined): void {
  if (ms === undefined) return;
  if (typeof ms !== 'number' || Number.isNaN(ms) || ms < MIN_TIMEOUT) {
    throw new RangeError(
      `mayfly: ${name} is in milliseconds and must be at least ${MIN_TIMEOUT}: got ${String(ms)} (did you mean ${String(ms)} s = ${Number(ms) * 1000} ms?)`,
    );
  }
}

/** setTimeout's longest delay; a longer timer would fire at once. */
export const MAX_TIMER = 2 ** 31 - 1;

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
export const SCOPE_DEADLINE: unique symbol = Symbol('mayfly.scopeDeadline');

/** The deadline a Recipient put in a wait's options, if any. */
export function scopeDeadline(options: object): Deadline | undefined {
  return (options as { [SCOPE_DEADLINE]?: Deadline })[SCOPE_DEADLINE];
}

/** The timeout of a wait in ms: the caller's (checked) or the client's, never past the inbox's deadline. */
export function waitTimeout(c: InboxCore, timeout: number | undefined, scope?: Deadline): number {
  checkTimeout('timeout', timeout);
  return Math.min(timeout ?? c.o.waitTimeout, deadlineLeft(c.deadline), deadlineLeft(scope));
}

/** Milliseconds until d, Infinity without one. */
export function deadlineLeft(d: Deadline | undefined): number {
  const v = typeof d === 'function' ? d() : d;
  return v === undefined ? Infinity : Math.max(0, (v instanceof Date ? v.getTime() : v) - Date.now());
}

/**
 * What a running wait met, for its errors: whether its attempts fail at the
 * transport level (and since when; past `after` ms it aborts the wait with
 * UnreachableError), the subjects of the new messages that did not match,
 * how many matched.
 */
export class Watch {
  signal: AbortSignal | undefined;
  abort: ((err: Error) => void) | undefined;
  failingSince: number | undefined;
  lastError: string | undefined;
  readonly arrived: string[] = [];
  got = 0;
  want = 1;
  readonly #base: string;
  readonly #after: number;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(base: string, after: number) {
    this.#base = base;
    this.#after = after;
  }

  ok(): void {
    this.failingSince = undefined;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  fail(err: Error): void {
    this.lastError = err.message.replace(/^mayfly: /, '');
    if (this.failingSince !== undefined) return;
    const since = Date.now();
    this.failingSince = since;
    if (this.#after < MAX_TIMER) {
      this.#timer = setTimeout(() => {
        if (this.failingSince !== since) return;
        const s = ((Date.now() - since) / 1000).toFixed(1);
        this.abort?.(new UnreachableError(
          `mayfly: the service at ${this.#base} has been unreachable for ${s} s: every attempt failed (last error: ${this.lastError})`,
          Date.now() - since,
        ));
      }, this.#after);
    }
  }

  close(): void {
    clearTimeout(this.#timer);
  }

  /** Why nothing matched: the service unreachable, messages that did not match, or none at all. */
  /** That the service is unreachable now, since when and the last error; undefined when the last attempt got an answer. */
  unreachable(): string | undefined {
    if (this.failingSince === undefined) return undefined;
    return `the service at ${this.#base} has been unreachable for ${((Date.now() - this.failingSince) / 1000).toFixed(1)} s (last error: ${this.lastError})`;
  }

  explain(): string {
    const u = this.unreachable();
    if (u !== undefined) return u;
    const n = this.arrived.length;
    if (n > 0) return `${n} message${n === 1 ? '' : 's'} arrived, none matched (first: ${JSON.stringify(this.arrived[0])})`;
    return this.got > 0 ? 'no other message arrived' : 'no message arrived';
  }
}
