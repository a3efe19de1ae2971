// The client: one Mayfly service, inboxes each with a cookie jar of its own.
// The rules (retries, the gone error, waiting, events) are the shared
// contract of clients/SCENARIOS.md.

import { CookieJar, setCookieValues } from './cookies.js';
import {
  CREATION_LIMIT_CODES,
  CreationLimitError,
  InboxGoneError,
  MayflyError,
  RateLimitedError,
  SessionInvalidError,
  StreamBusyError,
  UnexpectedMessageError,
  UnreachableError,
  WaitTimeoutError,
  explainCreationLimit,
  parseRetryAfter,
} from './errors.js';
import { SSEParser } from './sse.js';
import { backoff, retryDelay } from './retry.js';
import type { RequestKind, RetryPolicy } from './retry.js';
import { parseState, toStateCookie, fromStateCookie } from './state.js';
import type { InboxState } from './state.js';
import { Recipient, tagAddress } from './recipient.js';
import { SCOPE_DEADLINE, deadlineLeft } from './internal.js';
import type { Deadline } from './internal.js';
import type { Mailbox, Message, MessageSummary } from './types.js';

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
function checkTimeout(name: string, ms: number | undefined): void {
  if (ms === undefined) return;
  if (typeof ms !== 'number' || Number.isNaN(ms) || ms < MIN_TIMEOUT) {
    throw new RangeError(
      `mayfly: ${name} is in milliseconds and must be at least ${MIN_TIMEOUT}: got ${String(ms)} (did you mean ${String(ms)} s = ${Number(ms) * 1000} ms?)`,
    );
  }
}

/** setTimeout's longest delay; a longer timer would fire at once. */
const MAX_TIMER = 2 ** 31 - 1;

/** The comment the service ends a replaced stream with (after the colon and a space). */
const REPLACED_COMMENT = 'replaced';

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

/** One inbox with the cookie jar that gives access to it. One event stream at a time. */
export class Inbox {
  readonly #o: Resolved;
  readonly #jar: CookieJar;
  #mailbox: Mailbox | undefined;
  #gone: InboxGoneError | undefined;
  #streaming = false;
  /** Ids returned by a wait or message(): what `since: 'unseen'` leaves out. */
  readonly #returned = new Set<string>();
  readonly #deadline: Deadline | undefined;
  /** The running wait's watch (what its attempts met), when one runs. */
  #watch: Watch | undefined;

  /** @internal use Mayfly.createInbox or Mayfly.restore */
  constructor(o: Resolved, jar: CookieJar, deadline?: CreateInboxOptions['deadline']) {
    this.#o = o;
    this.#jar = jar;
    this.#deadline = deadline;
  }

  /** Whether the inbox is gone (deleted, expired, its session revoked): every method but delete() then throws InboxGoneError. */
  get gone(): boolean {
    return this.#gone !== undefined;
  }

  /**
   * The inbox's saved state (one JSON format with the Go and Python
   * clients): the mailbox, the cookie jar and the ids already returned.
   * Mayfly.restore() makes an Inbox of it in another process. It holds the
   * cookie values: keep it as secret as they are.
   */
  state(): InboxState {
    const st: InboxState = {
      version: 1,
      base: this.#o.base,
      mailbox: this.mailbox,
      cookies: this.#jar.cookies().map(toStateCookie),
      seen: [...this.#returned],
    };
    if (this.#gone !== undefined) st.gone = true;
    return st;
  }

  /** @internal */
  _restore(st: InboxState): void {
    this.#mailbox = { ...st.mailbox };
    for (const id of st.seen) this.#returned.add(id);
    if (st.gone) {
      this.#gone = new InboxGoneError('mayfly: inbox gone (restored as gone)');
      this.#jar.clear();
    }
  }

  /** The inbox as last seen (creation, select, current, extend). */
  get mailbox(): Mailbox {
    if (this.#mailbox === undefined) throw new MayflyError('mayfly: the inbox was not created');
    return { ...this.#mailbox };
  }

  get id(): string {
    return this.mailbox.id;
  }

  get address(): string {
    return this.mailbox.address;
  }

  /**
   * The tagged address `<local>+<tag>@<domain>` of this inbox: its mail lands
   * here, with `to` set to it. No request; a RangeError for a tag that is not
   * 1 to 64 of A-Z a-z 0-9 . _ - or makes the local part longer than 64.
   */
  addressFor(tag: string): string {
    return tagAddress(this.address, tag);
  }

  /** A Recipient: the tagged address of `tag`, whose waits and events see only the mail sent to it. */
  recipient(tag: string): Recipient {
    return new Recipient(this, tag);
  }

  /** A message or summary with its `to`: the inbox's address when the service sent none (a service older than sub-addressing). */
  #fill<T extends { to?: string }>(m: T): T {
    if (typeof m.to !== 'string' || m.to === '') m.to = this.#mailbox?.address.toLowerCase() ?? '';
    return m;
  }

  /** @internal */
  async _create(body: object, opts: CallOptions): Promise<void> {
    const out = await this.#call<{ mailbox: Mailbox }>('POST', '/mailboxes', body, 'create', opts);
    const id = out.mailbox.id;
    // The scoped cookie is <prefix>_<id without hyphens>; the prefix is the service's.
    const suffix = '_' + id.toLowerCase().replace(/-/g, '');
    if (suffix.length !== 33 || !this.#jar.names().some((n) => n.toLowerCase().endsWith(suffix))) {
      throw new MayflyError(`mayfly: no mailbox-scoped cookie in the creation answer (mailbox ${id})`);
    }
    const selectUrl = `${this.#o.base}/mailboxes/${encodeURIComponent(id)}/select`;
    if (!this.#jar.header(selectUrl).split('; ').some((c) => c.split('=')[0]!.toLowerCase().endsWith(suffix))) {
      throw new MayflyError(
        `mayfly: the mailbox cookie of ${id} is not sent back to ${this.#o.base} (Secure over plain http? ` +
          'run the service with MAYFLY_COOKIE_SECURE=false, or use https)',
      );
    }
    this.#mailbox = out.mailbox;
    await this.select(opts);
  }

  /** Opens a new session with the scoped cookie (replaces the jar's service_session). */
  async select(options: CallOptions = {}): Promise<Mailbox> {
    checkTimeout('timeout', options.timeout);
    this.#alive();
    const path = `/mailboxes/${encodeURIComponent(this.id)}/select`;
    const out = await this.#call<{ mailbox: Mailbox }>('POST', path, undefined, 'write', options);
    this.#mailbox = out.mailbox;
    return this.mailbox;
  }

  /** Reads the inbox (GET /mailboxes/current). */
  async current(options: CallOptions = {}): Promise<Mailbox> {
    checkTimeout('timeout', options.timeout);
    const out = await this.#call<{ mailbox: Mailbox }>('GET', '/mailboxes/current', undefined, 'read', options);
    this.#mailbox = out.mailbox;
    return this.mailbox;
  }

  /** Asks for minutes (1 to 10) more; the grant never passes max_expires_at. Returns the inbox with its new expiry. */
  async extend(minutes: number, options: CallOptions = {}): Promise<Mailbox> {
    checkTimeout('timeout', options.timeout);
    const out = await this.#call<{ mailbox: Mailbox }>(
      'PATCH', '/mailboxes/current', { extension_minutes: minutes }, 'write', options,
    );
    this.#mailbox = out.mailbox;
    return this.mailbox;
  }

  /**
   * Destroys the inbox and its messages; from then on every other method
   * throws InboxGoneError without a request. Idempotent: an inbox already
   * gone (deleted here or elsewhere, expired) is success. Resolves to whether
   * this call deleted it (false: it was gone already; no request is sent when
   * this object knows it).
   */
  async delete(options: CallOptions = {}): Promise<boolean> {
    checkTimeout('timeout', options.timeout);
    if (this.#gone !== undefined) return false;
    try {
      await this.#call('DELETE', '/mailboxes/current', undefined, 'write', options);
    } catch (err) {
      if (err instanceof InboxGoneError) return false; // a 401: #errorOf marked it gone
      if (err instanceof MayflyError && err.status === 404 && err.code === 'MAILBOX_NOT_FOUND') {
        this.#gone = new InboxGoneError(`mayfly: inbox expired or deleted: ${err.message}`, err);
        this.#jar.clear();
        return false;
      }
      throw err;
    }
    this.#gone = new InboxGoneError('mayfly: inbox deleted');
    this.#jar.clear();
    return true;
  }

  /** One page of messages, newest first. */
  async list(options: ListOptions = {}): Promise<Page> {
    checkTimeout('timeout', options.timeout);
    return this.#list(options.limit ?? 20, options.offset ?? 0, options, this.#o.maxAttempts);
  }

  /** Every page of messages, newest first, fetched as the iteration goes. */
  async *pages(options: { pageSize?: number; signal?: AbortSignal } = {}): AsyncGenerator<Page, void, undefined> {
    const size = options.pageSize ?? 100;
    for (let offset = 0; ; offset += size) {
      const p = await this.#list(size, offset, options.signal, this.#o.maxAttempts);
      yield p;
      if (!p.hasMore || p.items.length === 0) return;
    }
  }

  /** Every message summary, newest first, a page at a time. */
  async *messages(options: { pageSize?: number; signal?: AbortSignal } = {}): AsyncGenerator<MessageSummary, void, undefined> {
    for await (const p of this.pages(options)) yield* p.items;
  }

  /** One message with its bodies; it counts as returned for `since: 'unseen'`. */
  async message(id: string, options: CallOptions = {}): Promise<Message> {
    checkTimeout('timeout', options.timeout);
    const m = await this.#message(id, options, this.#o.maxAttempts);
    this.#returned.add(m.id);
    return m;
  }

  /** Deletes one message. */
  async deleteMessage(id: string, options: CallOptions = {}): Promise<void> {
    checkTimeout('timeout', options.timeout);
    await this.#call('DELETE', `/messages/${encodeURIComponent(id)}`, undefined, 'write', options);
  }

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
  async *events(options: EventsOptions = {}): AsyncGenerator<InboxEvent, void, undefined> {
    const timeout = this.#waitTimeout(options.timeout, scopeDeadline(options));
    const to = options.to?.toLowerCase();
    this.#alive();
    this.#takeStream();
    const watch = new Watch(this.#o.base, this.#o.unreachableAfter);
    const ctl = new AbortController();
    watch.signal = ctl.signal;
    watch.abort = (err) => ctl.abort(err);
    this.#watch = watch;
    const timer = timeout < MAX_TIMER
      ? setTimeout(() => {
        const why = watch.unreachable() ?? `${yielded} message${yielded === 1 ? '' : 's'} yielded`;
        ctl.abort(new WaitTimeoutError(`mayfly: events(): its timeout of ${timeout} ms passed; ${why}`));
      }, timeout)
      : undefined;
    const user = options.signal;
    const onAbort = () => ctl.abort(user?.reason);
    if (user?.aborted) ctl.abort(user.reason);
    user?.addEventListener('abort', onAbort, { once: true });
    const seen = new Set<string>();
    let yielded = 0;
    try {
      for await (const step of this.#follow(ctl.signal, false, false)) {
        const items = step.kind === 'list' ? [...step.items].reverse() : [step.item];
        for (const m of items) {
          if (seen.has(m.id)) continue;
          seen.add(m.id);
          if (step.kind === 'list' && step.initial) continue; // there before events() began
          if (to !== undefined && (m.to ?? '').toLowerCase() !== to) continue; // another recipient's
          yielded++;
          yield { type: 'message.received', message: m, missed: step.kind === 'list' };
        }
      }
    } catch (err) {
      if (ctl.signal.aborted) throw ctl.signal.reason; // the caller's reason, or the timeout
      throw err;
    } finally {
      clearTimeout(timer);
      user?.removeEventListener('abort', onAbort);
      watch.close();
      if (this.#watch === watch) this.#watch = undefined;
      this.#streaming = false;
    }
  }

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
  async waitForMessage(options: WaitOptions = {}): Promise<Message> {
    const [m] = await this.#waitFor(1, options, 'no matching message');
    return m!;
  }

  /**
   * The first `count` messages that match and are new in the sense of
   * `since`, oldest first, with their bodies; as waitForMessage, and they
   * count as returned (since 'unseen') once all are there. Its timeout's
   * WaitTimeoutError says how many had come.
   */
  async waitForMessages(count: number, options: WaitOptions = {}): Promise<Message[]> {
    if (!Number.isInteger(count) || count < 1) throw new RangeError(`mayfly: waitForMessages: count must be a whole number ≥ 1: got ${count}`);
    return this.#waitFor(count, options, `fewer than ${count} matching messages`);
  }

  /**
   * Succeeds when no message that matches and is new in the sense of `since`
   * (default 'unseen') arrives within `within` milliseconds: the honest
   * "no second email" assertion. A matching message fails it at once with
   * UnexpectedMessageError (`received` is the message; it is not marked
   * returned). A server unreachable at the end of the window cannot prove the
   * absence: UnreachableError.
   */
  async expectNoMessage(options: ExpectNoMessageOptions): Promise<void> {
    checkTimeout('within', options?.within);
    if (options?.within === undefined) throw new RangeError('mayfly: expectNoMessage: within (milliseconds) is required');
    checkTimeout('timeout', options.timeout);
    const watch = new Watch(this.#o.base, this.#o.unreachableAfter);
    // A shorter timeout or the inbox's deadline ends it before the window does: the wait timeout, not success.
    const window = Math.min(options.within, options.timeout ?? Infinity, this.#deadlineLeft(), deadlineLeft(scopeDeadline(options)));
    let got: Message[];
    try {
      got = await this.#guard(window, options.signal, watch, 'no matching message', (signal) =>
        this.#wait(options, signal, 1, watch, false));
    } catch (err) {
      if (!(err instanceof WaitTimeoutError)) throw err;
      if (window < options.within) {
        throw new WaitTimeoutError(
          `mayfly: expectNoMessage: its timeout or the inbox's deadline came ${window} ms in, before the end of the ${options.within} ms window`,
        );
      }
      if (watch.failingSince !== undefined) {
        throw new UnreachableError(
          `mayfly: expectNoMessage: the service was unreachable at the end of the ${options.within} ms window ` +
            `(for ${((Date.now() - watch.failingSince) / 1000).toFixed(1)} s; last error: ${watch.lastError}): the absence is not shown`,
          Date.now() - watch.failingSince,
        );
      }
      return;
    }
    const m = got[0]!;
    throw new UnexpectedMessageError(
      `mayfly: expectNoMessage: a matching message arrived within ${options.within} ms: ${JSON.stringify(m.subject)} from ${JSON.stringify(m.from)} (id ${m.id})`,
      m,
    );
  }

  /** The timeout of a wait in ms: the caller's (checked) or the client's, never past the inbox's deadline. */
  #waitTimeout(timeout: number | undefined, scope?: Deadline): number {
    checkTimeout('timeout', timeout);
    return Math.min(timeout ?? this.#o.waitTimeout, this.#deadlineLeft(), deadlineLeft(scope));
  }

  /** Milliseconds until the inbox's deadline (createInbox's `deadline`), Infinity without one. */
  #deadlineLeft(): number {
    return deadlineLeft(this.#deadline);
  }

  async #waitFor(count: number, options: WaitOptions, what: string): Promise<Message[]> {
    const watch = new Watch(this.#o.base, this.#o.unreachableAfter);
    watch.want = count;
    const got = await this.#guard(this.#waitTimeout(options.timeout, scopeDeadline(options)), options.signal, watch, what, (signal) =>
      this.#wait(options, signal, count, watch, true));
    return got;
  }

  /**
   * Runs a wait: takes the inbox's stream, ends it at its timeout with
   * WaitTimeoutError (explained by the watch) or at once on the caller's
   * signal, and keeps the watch where the inbox's calls report to it.
   */
  async #guard<T>(
    timeout: number, user: AbortSignal | undefined, watch: Watch, what: string, run: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    this.#alive();
    this.#takeStream();
    const ctl = new AbortController();
    watch.signal = ctl.signal;
    watch.abort = (err) => ctl.abort(err);
    this.#watch = watch;
    const timer = timeout < MAX_TIMER
      ? setTimeout(() => ctl.abort(new WaitTimeoutError(`mayfly: ${watch.got > 0 ? `${watch.got} of ${watch.want} matching messages` : what} within ${timeout} ms; ${watch.explain()}`)), timeout)
      : undefined;
    const onAbort = () => ctl.abort(user?.reason);
    if (user?.aborted) ctl.abort(user.reason);
    user?.addEventListener('abort', onAbort, { once: true });
    try {
      return await run(ctl.signal);
    } catch (err) {
      if (ctl.signal.aborted) throw ctl.signal.reason; // the caller's reason, or the wait timeout
      throw err;
    } finally {
      clearTimeout(timer);
      user?.removeEventListener('abort', onAbort);
      watch.close();
      if (this.#watch === watch) this.#watch = undefined;
      this.#streaming = false;
    }
  }

  async #wait(options: WaitOptions, signal: AbortSignal, count: number, watch: Watch, mark: boolean): Promise<Message[]> {
    // A copy without g and y: test() must not carry lastIndex from one message to the next.
    const re = (p: RegExp | string | undefined) =>
      p === undefined ? undefined : typeof p === 'string' ? new RegExp(p) : new RegExp(p.source, p.flags.replace(/[gy]/g, ''));
    const subject = re(options.subject);
    const from = re(options.from);
    const text = re(options.text);
    const to = options.to?.toLowerCase();
    const since = options.since ?? 'unseen';
    const anchor = typeof since === 'object' && !(since instanceof Date) ? since.messageId
      : typeof since === 'string' && since !== 'unseen' && since !== 'now' ? since : undefined;
    const after = since instanceof Date ? since.getTime() : undefined;
    const notNew = new Set<string>(); // 'now': there at the start; anchor: the anchor and older
    const rejected = new Set<string>(); // looked at, did not match
    const taken = new Set<string>(); // matched, kept for the answer
    const found: Message[] = [];
    let anchorFound = false;

    const qualifies = (m: MessageSummary) => {
      if (rejected.has(m.id) || notNew.has(m.id) || taken.has(m.id)) return false;
      if (since === 'unseen') return !this.#returned.has(m.id);
      if (after !== undefined) return Date.parse(m.received_at) > after;
      return true;
    };
    const reject = (m: { id: string; subject: string }) => {
      rejected.add(m.id);
      watch.arrived.push(m.subject);
    };
    const consider = async (m: MessageSummary): Promise<Message | undefined> => {
      if (!qualifies(m)) return undefined;
      if (to !== undefined && (m.to ?? '').toLowerCase() !== to) {
        rejected.add(m.id); // another recipient's: not read, not counted as arrived
        return undefined;
      }
      if (m.status !== 'pending' && ((subject && !subject.test(m.subject)) || (from && !from.test(m.from)))) {
        reject(m);
        return undefined;
      }
      // Read until it has its bodies; an outage (or a Retry-After too long to
      // wait) is outlived like the wait's, a message deleted meanwhile passed over.
      let full: Message | undefined;
      for (let attempt = 1; full === undefined || full.status === 'pending'; ) {
        if (full !== undefined) await sleep(this.#o.pollInterval, signal);
        try {
          full = await this.#message(m.id, signal, Infinity);
        } catch (err) {
          if (signal.aborted) throw signal.reason;
          if (err instanceof MayflyError && err.status === 404 && err.code === 'MESSAGE_NOT_FOUND') {
            rejected.add(m.id);
            return undefined;
          }
          if (err instanceof InboxGoneError || !transient(err)) throw err;
          full = undefined;
          await sleep(backoff(attempt++, 500, 5000) + 100, signal);
        }
      }
      const ok = (!subject || subject.test(full.subject)) && (!from || from.test(full.from)) &&
        (!text || text.test(full.text_body)) && (!options.match || options.match(full));
      if (!ok) {
        reject(full);
        return undefined;
      }
      return full;
    };

    for await (const step of this.#follow(signal, since === 'now' || anchor !== undefined, true)) {
      let items: MessageSummary[];
      if (step.kind === 'list') {
        if (step.initial && since === 'now') {
          for (const m of step.items) notNew.add(m.id);
          continue;
        }
        if (anchor !== undefined) {
          const k = step.items.findIndex((m) => m.id === anchor);
          if (k >= 0) {
            anchorFound = true;
            for (const m of step.items.slice(k)) notNew.add(m.id);
          } else if (!anchorFound) {
            throw new MayflyError(`mayfly: GET ${this.#o.base}/messages: since: message ${anchor} is not in the inbox`, { code: 'MESSAGE_NOT_FOUND' });
          }
        }
        items = [...step.items].reverse(); // oldest first
      } else {
        items = [step.item];
      }
      for (const m of items) {
        const got = await consider(m);
        if (got === undefined) continue;
        taken.add(got.id);
        found.push(got);
        watch.got = found.length;
        if (found.length >= count) {
          found.sort((a, b) => Date.parse(a.received_at) - Date.parse(b.received_at));
          if (mark) for (const f of found) this.#returned.add(f.id);
          return found;
        }
      }
    }
    throw new MayflyError('mayfly: the wait ended without a message'); // #follow only ends by throwing
  }

  /**
   * Follows the inbox: an optional list first (initial: true), then the event
   * stream with a list after every (re)connect, reconnecting with backoff.
   * With fallback, after two failed opens in a row it polls the list every
   * poll interval instead. When the service ends the stream because another
   * stream took the inbox over, it warns, polls the list every poll interval
   * for REPLACED_PAUSE, then opens the stream again. It ends only by throwing
   * (gone, the signal, an error that is not transient).
   */
  async *#follow(
    signal: AbortSignal, preList: boolean, fallback: boolean,
  ): AsyncGenerator<{ kind: 'list'; items: MessageSummary[]; initial: boolean } | { kind: 'event'; item: MessageSummary }> {
    let lastList = 0;
    const listAll = async (): Promise<MessageSummary[]> => {
      const all: MessageSummary[] = [];
      for (let offset = 0; ; offset += 100) {
        const p = await this.#list(100, offset, signal, Infinity);
        all.push(...p.items);
        if (!p.hasMore || p.items.length === 0) break;
      }
      lastList = Date.now(); // after the answer: the next poll is ≥ the interval after it on the server too
      return all;
    };
    /** Rethrows what a follower does not outlive. */
    const fatal = (err: unknown) => {
      if (signal.aborted) throw signal.reason;
      if (err instanceof InboxGoneError || !transient(err)) throw err;
    };
    /** A list at the next poll interval, or undefined when it failed (transiently) or `until` came first. */
    const pollOnce = async (until: number): Promise<MessageSummary[] | undefined> => {
      const wait = Math.max(0, this.#o.pollInterval - (Date.now() - lastList));
      if (Date.now() + wait >= until) {
        await sleep(Math.max(0, until - Date.now()), signal);
        return undefined;
      }
      await sleep(wait, signal);
      try {
        return await listAll();
      } catch (err) {
        fatal(err);
        lastList = Date.now(); // a failed list waits for the next interval
        this.#o.log('listing the messages failed; trying again', { err: String(err), in: this.#o.pollInterval }, 'info');
        return undefined;
      }
    };
    if (preList || !fallback) {
      // "Started" (since 'now') is when this list is answered: retried across outages and 429s.
      let items: MessageSummary[] | undefined;
      for (let attempt = 1; items === undefined; attempt++) {
        try {
          items = await listAll();
        } catch (err) {
          fatal(err);
          this.#o.log('listing the messages failed; trying again', { err: String(err) }, 'info');
          await sleep(backoff(attempt, 500, 5000) + 100, signal);
        }
      }
      yield { kind: 'list', items, initial: true };
    }
    let failures = 0;
    for (let attempt = 0; ; attempt++) {
      if (fallback && failures >= 2) {
        this.#o.log('stream unavailable; polling', { every: this.#o.pollInterval }, 'info');
        for (;;) {
          const items = await pollOnce(Infinity);
          if (items !== undefined) yield { kind: 'list', items, initial: false };
        }
      }
      const opened = Date.now();
      let heard = false;
      let replaced = false;
      let stream: Stream | undefined;
      let openError: unknown;
      try {
        stream = await this.#openStream(signal).catch((err) => {
          openError = err;
          throw err;
        });
        yield { kind: 'list', items: await listAll(), initial: false };
        for await (const ev of stream.events()) {
          heard = true;
          if (ev === undefined) continue; // a line, not an event: the stream is alive
          yield { kind: 'event', item: this.#fill(ev) };
        }
      } catch (err) {
        if (err instanceof StreamReplaced) {
          replaced = true;
        } else {
          fatal(err);
          this.#o.log('event stream ended', { err: String(err) }, 'info');
        }
      } finally {
        stream?.close();
      }
      if (replaced) {
        // Another program follows this inbox: do not take the stream back at
        // once (it would do the same), poll for a while instead.
        this.#o.log(
          'the service ended the event stream: another client opened one on this inbox (one stream per inbox); ' +
            'polling the message list meanwhile',
          { every: this.#o.pollInterval, for: REPLACED_PAUSE }, 'warn',
        );
        const until = Date.now() + REPLACED_PAUSE;
        while (Date.now() < until) {
          const items = await pollOnce(until);
          if (items !== undefined) yield { kind: 'list', items, initial: false };
        }
        attempt = -1; // the loop's increment makes it 0
        failures = 0;
        continue;
      }
      if (stream !== undefined && heard) failures = 0;
      else failures++;
      if (!(fallback && failures >= 2)) {
        if (Date.now() - opened > 60_000) attempt = 0;
        // After a stream that was open ends, the first reconnect waits the
        // stream's last retry: (the service jitters it per stream, so a
        // restarted node's streams come back spread out) plus up to 250 ms;
        // a 503 with Retry-After waits that; else the backoff.
        let wait = backoff(attempt + 1, 500, fallback ? 5000 : 30_000);
        if (stream !== undefined && stream.retry !== undefined) wait = stream.retry + Math.random() * 250;
        else if (openError instanceof MayflyError && openError.status === 503 && openError.retryAfter !== undefined &&
          openError.retryAfter * 1000 <= this.#o.policy.maxRetryAfterMs) wait = openError.retryAfter * 1000;
        await sleep(wait, signal);
        // Is it alive? A gone inbox ends the stream for good.
        if (stream !== undefined) {
          try {
            await this.current({ signal });
          } catch (err) {
            fatal(err);
          }
        }
      }
    }
  }

  async #openStream(signal: AbortSignal): Promise<Stream> {
    this.#alive();
    const ctl = new AbortController();
    const onAbort = () => ctl.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const url = this.#o.base + '/events';
    const openTimer = setTimeout(() => ctl.abort(new Error(`no answer within ${this.#o.streamOpenTimeout} ms`)), this.#o.streamOpenTimeout);
    const done = () => {
      clearTimeout(openTimer);
      signal.removeEventListener('abort', onAbort);
      ctl.abort();
    };
    let res: Response;
    try {
      res = await this.#o.fetch(url, { method: 'GET', headers: this.#headers(url, 'text/event-stream'), signal: ctl.signal, redirect: 'manual' });
    } catch (err) {
      done();
      if (signal.aborted) throw signal.reason;
      const e = new NetworkError('GET', url, err, refused(err));
      this.#failed(signal, e);
      throw e;
    }
    clearTimeout(openTimer);
    this.#answered(signal);
    this.#jar.store(url, setCookieValues(res.headers));
    if (res.status !== 200) {
      const err = await this.#errorOf(res, 'GET', url, '/events');
      done();
      throw err;
    }
    if (!(res.headers.get('content-type') ?? '').toLowerCase().startsWith('text/event-stream') || res.body === null) {
      done();
      throw new MayflyError(`mayfly: GET ${url}: ${res.status}: the event stream answered with something else (${res.headers.get('content-type') ?? 'no content type'})`);
    }
    return new Stream(res.body, this.#o.streamIdleTimeout, ctl, done);
  }

  /** An answer came: the running wait's service is reachable. */
  #answered(signal: AbortSignal | undefined): void {
    if (this.#watch !== undefined && signal === this.#watch.signal) this.#watch.ok();
  }

  /** A transport failure of the running wait's call. */
  #failed(signal: AbortSignal | undefined, err: NetworkError): void {
    if (this.#watch !== undefined && signal === this.#watch.signal) this.#watch.fail(err);
  }

  #takeStream(): void {
    if (this.#streaming) throw new StreamBusyError();
    this.#streaming = true;
  }

  #alive(): void {
    if (this.#gone !== undefined) throw this.#gone;
  }

  async #list(limit: number, offset: number, signal: CallOptions | AbortSignal | undefined, attempts: number): Promise<Page> {
    const q = new URLSearchParams({ limit: String(limit), offset: String(offset) });
    const out = await this.#call<{ items: MessageSummary[]; pagination: { limit: number; offset: number; has_more: boolean } }>(
      'GET', `/messages?${q}`, undefined, 'read', signal, attempts,
    );
    return { items: out.items.map((m) => this.#fill(m)), limit: out.pagination.limit, offset: out.pagination.offset, hasMore: out.pagination.has_more };
  }

  async #message(id: string, signal: CallOptions | AbortSignal | undefined, attempts: number): Promise<Message> {
    const out = await this.#call<{ message: Message }>('GET', `/messages/${encodeURIComponent(id)}`, undefined, 'read', signal, attempts);
    return this.#fill(out.message);
  }

  #headers(url: string, accept: string, json = false): Record<string, string> {
    const h: Record<string, string> = { accept, 'user-agent': this.#o.userAgent };
    const cookie = this.#jar.header(url);
    if (cookie !== '') h['cookie'] = cookie;
    if (json) h['content-type'] = 'application/json';
    return h;
  }

  /** One API call with the retries of the contract; the data envelope's content. */
  async #call<T>(
    method: string, path: string, body: object | undefined, kind: RequestKind,
    opts: CallOptions | AbortSignal | undefined, attempts = this.#o.maxAttempts,
  ): Promise<T> {
    this.#alive();
    const url = this.#o.base + path;
    const { signal, timeout } = opts === undefined || opts instanceof AbortSignal ? { signal: opts, timeout: undefined } : opts;
    const deadline = timeout === undefined ? Infinity : Date.now() + timeout;
    for (let attempt = 1; ; attempt++) {
      let wait: number;
      let last: unknown;
      try {
        return await this.#once<T>(method, url, path, body, signal, Math.min(this.#o.requestTimeout, deadline - Date.now()));
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        last = err;
        const w = retryWait(err, attempts === Infinity && kind === 'read' ? 'wait' : kind, attempt, deadline - Date.now(), this.#o.policy);
        if (w === undefined || attempt >= attempts) throw err;
        wait = w;
      }
      const e = last as { status?: number; code?: string };
      this.#o.log('retrying', { method, path: path.split('?')[0], attempt, wait, status: e.status, code: e.code }, 'debug');
      await sleep(wait, signal);
    }
  }

  async #once<T>(
    method: string, url: string, path: string, body: object | undefined, signal: AbortSignal | undefined, budget: number,
  ): Promise<T> {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new Error(`no answer within ${Math.max(0, Math.round(budget))} ms`)), Math.max(0, budget));
    const onAbort = () => ctl.abort(signal?.reason);
    if (signal?.aborted) ctl.abort(signal.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      let res: Response;
      try {
        const init: RequestInit = { method, headers: this.#headers(url, 'application/json', body !== undefined), signal: ctl.signal, redirect: 'manual' };
        if (body !== undefined) init.body = JSON.stringify(body);
        res = await this.#o.fetch(url, init);
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        const e = new NetworkError(method, url, err, refused(err));
        this.#failed(signal, e);
        throw e;
      }
      this.#answered(signal);
      this.#jar.store(url, setCookieValues(res.headers));
      if (res.status >= 200 && res.status < 300) {
        if (res.status === 204) return undefined as T;
        let env: { data?: T };
        try {
          env = (await res.json()) as { data?: T };
        } catch (err) {
          if (signal?.aborted) throw signal.reason;
          throw new NetworkError(method, url, err, false);
        }
        if (env === null || typeof env !== 'object' || env.data === undefined) {
          throw new MayflyError(`mayfly: ${method} ${url}: answer ${res.status} without a data envelope`, { status: res.status });
        }
        return env.data;
      }
      throw await this.#errorOf(res, method, url, path);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** The typed error of an error answer; marks the inbox gone when the answer says so. */
  async #errorOf(res: Response, method: string, url: string, path: string): Promise<MayflyError> {
    let env: { error?: { code?: string; message?: string; details?: Record<string, unknown> }; request_id?: string } = {};
    try {
      env = JSON.parse(await res.text());
    } catch {
      // not the envelope: status only
    }
    const init = {
      status: res.status,
      code: env?.error?.code,
      requestId: env?.request_id ?? res.headers.get('x-request-id') ?? undefined,
      details: env?.error?.details,
      retryAfter: parseRetryAfter(res.headers.get('retry-after')),
    };
    const route = path.split('?')[0];
    // Where it went (the method and the URL: never a cookie), then what came back.
    // An answer without the API's envelope (another server, a proxy, a base
    // URL without /v1) says so, in the three clients' words.
    const text =
      env?.error?.message ??
      (init.code === undefined
        ? `${res.statusText || 'HTTP ' + res.status}: not an answer of the Mayfly API (is the base URL the API's, ending in /v1?)`
        : '');
    const msg = `mayfly: ${method} ${url}: ${res.status}${init.code === undefined ? '' : ' ' + init.code}: ${text}${init.requestId === undefined ? '' : ` (request ${init.requestId})`}`;
    // Gone: any 401 on a call made with the inbox's cookies (every call but
    // creation), or 404 MAILBOX_NOT_FOUND on select.
    const creation = method === 'POST' && route === '/mailboxes';
    const select = method === 'POST' && route.endsWith('/select');
    if ((res.status === 401 && !creation) || (select && res.status === 404 && init.code === 'MAILBOX_NOT_FOUND')) {
      this.#gone = new InboxGoneError(`mayfly: inbox expired or deleted: ${msg}`, init);
      this.#jar.clear();
      return this.#gone;
    }
    if (res.status === 429 && init.code !== undefined && CREATION_LIMIT_CODES.has(init.code)) {
      return new CreationLimitError(`${msg}: ${explainCreationLimit(init.code, init.retryAfter, init.details)}`, init);
    }
    if (res.status === 429) return new RateLimitedError(msg, init);
    if (res.status === 401) return new SessionInvalidError(msg, init);
    return new MayflyError(msg, init);
  }
}

/** The deadline a Recipient put in a wait's options, if any. */
function scopeDeadline(options: object): Deadline | undefined {
  return (options as { [SCOPE_DEADLINE]?: Deadline })[SCOPE_DEADLINE];
}

/** A transport failure (no HTTP answer); refused says nothing was sent. */
class NetworkError extends MayflyError {
  readonly refused: boolean;
  constructor(method: string, url: string, cause: unknown, refused: boolean) {
    super(`mayfly: ${method} ${url}: ${refused ? 'connection refused' : 'no answer'} (${detail(cause)})`, { cause });
    this.name = 'MayflyError';
    this.refused = refused;
  }
}

/** The most telling text of a transport error: the innermost cause's ("connect ECONNREFUSED 127.0.0.1:8080"). */
function detail(err: unknown): string {
  let out = '';
  for (let e: unknown = err, i = 0; e !== undefined && e !== null && i < 6; e = (e as { cause?: unknown }).cause, i++) {
    const errors = (e as { errors?: unknown[] }).errors; // AggregateError of several addresses
    const inner = Array.isArray(errors) && errors.length > 0 ? errors[0] : e;
    const msg = String((inner as { message?: unknown }).message ?? inner);
    const code = (inner as { code?: unknown }).code;
    if (msg !== '' && msg !== 'fetch failed') out = msg;
    else if (typeof code === 'string') out = code;
  }
  return out || String(err);
}

/**
 * What a running wait met, for its errors: whether its attempts fail at the
 * transport level (and since when; past `after` ms it aborts the wait with
 * UnreachableError), the subjects of the new messages that did not match,
 * how many matched.
 */
class Watch {
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

function refused(err: unknown): boolean {
  for (let e: unknown = err, i = 0; e !== undefined && e !== null && i < 5; e = (e as { cause?: unknown }).cause, i++) {
    const code = (e as { code?: unknown }).code;
    if (code === 'ECONNREFUSED') return true;
    const errors = (e as { errors?: unknown[] }).errors; // AggregateError of several addresses
    if (Array.isArray(errors) && errors.length > 0 && errors.every((x) => (x as { code?: unknown }).code === 'ECONNREFUSED')) return true;
  }
  return false;
}

/** The wait before the next attempt per the contract's retry table (retry.ts), or undefined: not retried. */
function retryWait(err: unknown, kind: RequestKind, attempt: number, remaining: number, policy: RetryPolicy): number | undefined {
  const left = remaining === Infinity ? undefined : remaining;
  if (err instanceof NetworkError) return retryDelay({ transport: err.refused ? 'refused' : 'reset' }, kind, attempt, left, policy);
  if (!(err instanceof MayflyError) || err instanceof InboxGoneError) return undefined;
  const retryAfter = err.retryAfter === undefined ? null : String(err.retryAfter);
  return retryDelay({ status: err.status, code: err.code, retryAfter }, kind, attempt, left, policy);
}

/** Transient: what a wait or a stream outlives (the network, 5xx, the request rate). */
function transient(err: unknown): boolean {
  if (err instanceof InboxGoneError || err instanceof CreationLimitError || err instanceof UnreachableError) return false;
  if (err instanceof NetworkError) return true;
  if (err instanceof MayflyError) return err.status === undefined || err.status === 429 || err.status >= 500;
  return true; // a stream's read error
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The service ended the stream: a newer stream on the same inbox took over. */
class StreamReplaced extends MayflyError {
  constructor() {
    super('mayfly: the service ended the event stream: another client opened one on this inbox (one stream per inbox)');
    this.name = 'MayflyError';
  }
}

/** One open event stream: yields the message summaries of message.received events (undefined for any other line). */
class Stream {
  readonly #body: ReadableStream<Uint8Array>;
  readonly #idle: number;
  readonly #ctl: AbortController;
  readonly #done: () => void;
  #replaced = false;
  readonly #parser = new SSEParser({
    onComment: (text) => {
      if (text.trimStart().startsWith(REPLACED_COMMENT)) this.#replaced = true;
    },
  });

  constructor(body: ReadableStream<Uint8Array>, idle: number, ctl: AbortController, done: () => void) {
    this.#body = body;
    this.#idle = idle;
    this.#ctl = ctl;
    this.#done = done;
  }

  /** The stream's last retry: field in ms, once read (undefined when it sent none). */
  get retry(): number | undefined {
    return this.#parser.retry;
  }

  async *events(): AsyncGenerator<MessageSummary | undefined> {
    const reader = this.#body.getReader();
    const decoder = new TextDecoder();
    const parser = this.#parser;
    let timer = setTimeout(() => this.#ctl.abort(new MayflyError('mayfly: the event stream went silent')), this.#idle);
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        clearTimeout(timer);
        timer = setTimeout(() => this.#ctl.abort(new MayflyError('mayfly: the event stream went silent')), this.#idle);
        const evs = parser.push(decoder.decode(value, { stream: true }));
        yield undefined;
        for (const ev of evs) {
          if (ev.event !== 'message.received') continue;
          let m: MessageSummary | undefined;
          try {
            m = JSON.parse(ev.data) as MessageSummary;
          } catch {
            m = undefined;
          }
          if (m && typeof m.id === 'string' && m.id !== '') yield m;
        }
        if (this.#replaced) throw new StreamReplaced();
      }
    } finally {
      clearTimeout(timer);
      reader.releaseLock();
    }
  }

  close(): void {
    this.#done();
  }
}
