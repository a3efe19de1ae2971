// The client: one Mayfly service, inboxes each with a cookie jar of its own.
// The rules (retries, the gone error, waiting, events) are the shared
// contract of clients/SCENARIOS.md. The parts, a file each (the same in the
// three clients): inbox.ts, internal.ts (the inbox's shared private state),
// recipient.ts, shared.ts, transport.ts, retry.ts, cookies.ts, state.ts,
// sse.ts, events.ts, wait.ts, errors.ts, helpers.ts, playwright.ts.

import { CookieJar } from './cookies.js';
import { CreationLimitError, MayflyError } from './errors.js';
import { Inbox } from './inbox.js';
import { DEFAULT_UNREACHABLE_AFTER, DEFAULT_WAIT_TIMEOUT, MIN_POLL_INTERVAL, checkTimeout } from './internal.js';
import type { Resolved } from './internal.js';
import { fromStateCookie, parseState } from './state.js';
import type { InboxState } from './state.js';
import { sleep } from './transport.js';
import type { Message, MessageSummary } from './types.js';

export { Inbox } from './inbox.js';
export { MIN_POLL_INTERVAL, REPLACED_PAUSE, DEFAULT_WAIT_TIMEOUT, DEFAULT_UNREACHABLE_AFTER, MIN_TIMEOUT } from './internal.js';

/** What the logger is told, by importance: `warn` is something the caller should know. */
export type LogLevel = 'debug' | 'info' | 'warn';

/** The default logger: warnings to console.warn, the rest dropped. */
function defaultLogger(event: string, fields: Record<string, unknown>, level: LogLevel): void {
  if (level === 'warn') console.warn(`mayfly: ${event}`, fields);
}

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
export type Since = 'unseen' | 'now' | Date | { messageId: string } | (string & {}); // (string & {}) keeps the literals' completion

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
export class Mayfly {
  readonly #o: Resolved;

  constructor(options: ClientOptions) {
    let u: URL;
    try {
      u = new URL(options.baseUrl);
    } catch {
      throw new MayflyError(`mayfly: base URL ${JSON.stringify(options.baseUrl)}: want http(s)://host/v1`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      throw new MayflyError(`mayfly: base URL ${JSON.stringify(options.baseUrl)}: want http(s)://host/v1`);
    }
    checkTimeout('waitTimeout', options.waitTimeout);
    checkTimeout('requestTimeout', options.requestTimeout);
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== 'function') throw new MayflyError('mayfly: no global fetch (Node 18 or later is needed)');
    this.#o = {
      base: u.toString().replace(/\/+$/, ''),
      requestTimeout: options.requestTimeout ?? 30_000,
      maxAttempts: Math.max(1, options.maxAttempts ?? 6),
      baseDelay: options.baseDelay ?? 200,
      maxDelay: options.maxDelay ?? 5000,
      pollInterval: Math.max(MIN_POLL_INTERVAL, options.pollInterval ?? MIN_POLL_INTERVAL),
      streamOpenTimeout: options.streamOpenTimeout ?? 10_000,
      streamIdleTimeout: options.streamIdleTimeout ?? 65_000,
      waitTimeout: options.waitTimeout ?? DEFAULT_WAIT_TIMEOUT,
      unreachableAfter: options.unreachableAfter ?? DEFAULT_UNREACHABLE_AFTER,
      maxRetryAfter: options.maxRetryAfter ?? 10_000,
      policy: {
        baseMs: options.baseDelay ?? 200,
        capMs: options.maxDelay ?? 5000,
        maxAttempts: Math.max(1, options.maxAttempts ?? 6),
        maxRetryAfterMs: options.maxRetryAfter ?? 10_000,
        jitterMs: 250,
      },
      userAgent: options.userAgent ?? 'mayfly-ts-client/1',
      log: options.logger ?? defaultLogger,
      fetch: f.bind(globalThis),
    };
  }

  get baseUrl(): string {
    return this.#o.base;
  }

  /**
   * Creates an inbox and selects it in a new cookie jar. Never retried but
   * when nothing was done (a request-rate 429, 503 REQUEST_PROTECTION, a
   * refused connection); a creation limit throws CreationLimitError at once.
   */
  async createInbox(options: CreateInboxOptions = {}): Promise<Inbox> {
    checkTimeout('timeout', options.timeout);
    const body = options.lifetimeMinutes === undefined ? {} : { lifetime_minutes: options.lifetimeMinutes };
    const make = () => new Inbox(this.#o, new CookieJar(this.#o.base), options.deadline);
    if (!options.waitForCapacity) {
      const inbox = make();
      await inbox._create(body, options);
      return inbox;
    }
    const until = Date.now() + (options.timeout ?? this.#o.waitTimeout);
    for (;;) {
      const inbox = make();
      try {
        await inbox._create(body, { signal: options.signal, timeout: Math.max(1, until - Date.now()) });
        return inbox;
      } catch (err) {
        if (!(err instanceof CreationLimitError)) throw err;
        // Retry-After when the limit gives one (the creation windows), else a poll every second (the active cap).
        const wait = err.retryAfter !== undefined ? err.retryAfter * 1000 + Math.random() * 250 : 1000;
        if (Date.now() + wait >= until) throw err;
        this.#o.log('creation limit: waiting for capacity', { code: err.code, wait }, 'info');
        await sleep(wait, options.signal);
      }
    }
  }

  /**
   * An Inbox from a saved state (Inbox.state(), or the state of the Go or
   * Python client: one JSON format, an object or its JSON text). No request
   * is made. The state's base must be this client's.
   */
  restore(state: InboxState | string, options: { deadline?: CreateInboxOptions['deadline'] } = {}): Inbox {
    const st = parseState(state);
    let base: string;
    try {
      base = new URL(st.base).toString().replace(/\/+$/, '');
    } catch {
      throw new MayflyError(`mayfly: restore: the state's base ${JSON.stringify(st.base)} is not a URL`);
    }
    if (base !== this.#o.base) {
      throw new MayflyError(`mayfly: restore: the state is for ${base}, this client talks to ${this.#o.base}`);
    }
    const jar = new CookieJar(this.#o.base);
    for (const c of st.cookies) jar.put(fromStateCookie(c));
    const inbox = new Inbox(this.#o, jar, options.deadline);
    inbox._restore(st);
    return inbox;
  }
}

/** createClient(options) is `new Mayfly(options)`. */
export function createClient(options: ClientOptions): Mayfly {
  return new Mayfly(options);
}
