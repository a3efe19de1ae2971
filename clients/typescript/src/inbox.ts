// An inbox: its lifecycle (create, select, extend, delete, save and
// restore) and its reads (list, message), on the one private state object
// (internal.ts) that transport.ts, events.ts and wait.ts work on too. The
// waits and events() are wait.ts's and events.ts's.

import type { CookieJar } from './cookies.js';
import { InboxGoneError, MayflyError } from './errors.js';
import type { CallOptions, EventsOptions, ExpectNoMessageOptions, InboxEvent, ListOptions, Page, WaitOptions } from './client.js';
import { events } from './events.js';
import { checkTimeout } from './internal.js';
import type { Deadline, InboxCore, Resolved } from './internal.js';
import { Recipient, tagAddress } from './recipient.js';
import { toStateCookie } from './state.js';
import type { InboxState } from './state.js';
import { alive, call, getMessage, listPage } from './transport.js';
import type { Mailbox, Message, MessageSummary } from './types.js';
import { expectNoMessage, waitFor } from './wait.js';

/** One inbox with the cookie jar that gives access to it. One event stream at a time. */
export class Inbox {
  /** The inbox's private state, shared with transport.ts, events.ts and wait.ts. */
  readonly #c: InboxCore;

  /** @internal use Mayfly.createInbox or Mayfly.restore */
  constructor(o: Resolved, jar: CookieJar, deadline?: Deadline) {
    this.#c = { o, jar, mailbox: undefined, gone: undefined, streaming: false, returned: new Set(), deadline, watch: undefined };
  }

  /** Whether the inbox is gone (deleted, expired, its session revoked): every method but delete() then throws InboxGoneError. */
  get gone(): boolean {
    return this.#c.gone !== undefined;
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
      base: this.#c.o.base,
      mailbox: this.mailbox,
      cookies: this.#c.jar.cookies().map(toStateCookie),
      seen: [...this.#c.returned],
    };
    if (this.#c.gone !== undefined) st.gone = true;
    return st;
  }

  /** @internal */
  _restore(st: InboxState): void {
    this.#c.mailbox = { ...st.mailbox };
    for (const id of st.seen) this.#c.returned.add(id);
    if (st.gone) {
      this.#c.gone = new InboxGoneError('mayfly: inbox gone (restored as gone)');
      this.#c.jar.clear();
    }
  }

  /** The inbox as last seen (creation, select, current, extend). */
  get mailbox(): Mailbox {
    if (this.#c.mailbox === undefined) throw new MayflyError('mayfly: the inbox was not created');
    return { ...this.#c.mailbox };
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

  /** @internal */
  async _create(body: object, opts: CallOptions): Promise<void> {
    const out = await call<{ mailbox: Mailbox }>(this.#c, 'POST', '/mailboxes', body, 'create', opts);
    const id = out.mailbox.id;
    // The scoped cookie is <prefix>_<id without hyphens>; the prefix is the service's.
    const suffix = '_' + id.toLowerCase().replace(/-/g, '');
    if (suffix.length !== 33 || !this.#c.jar.names().some((n) => n.toLowerCase().endsWith(suffix))) {
      throw new MayflyError(`mayfly: no mailbox-scoped cookie in the creation answer (mailbox ${id})`);
    }
    const selectUrl = `${this.#c.o.base}/mailboxes/${encodeURIComponent(id)}/select`;
    if (!this.#c.jar.header(selectUrl).split('; ').some((c) => c.split('=')[0]!.toLowerCase().endsWith(suffix))) {
      throw new MayflyError(
        `mayfly: the mailbox cookie of ${id} is not sent back to ${this.#c.o.base} (Secure over plain http? ` +
          'run the service with MAYFLY_COOKIE_SECURE=false, or use https)',
      );
    }
    this.#c.mailbox = out.mailbox;
    await this.select(opts);
  }

  /** Opens a new session with the scoped cookie (replaces the jar's service_session). */
  async select(options: CallOptions = {}): Promise<Mailbox> {
    checkTimeout('timeout', options.timeout);
    alive(this.#c);
    const path = `/mailboxes/${encodeURIComponent(this.id)}/select`;
    const out = await call<{ mailbox: Mailbox }>(this.#c, 'POST', path, undefined, 'write', options);
    this.#c.mailbox = out.mailbox;
    return this.mailbox;
  }

  /** Reads the inbox (GET /mailboxes/current). */
  async current(options: CallOptions = {}): Promise<Mailbox> {
    checkTimeout('timeout', options.timeout);
    const out = await call<{ mailbox: Mailbox }>(this.#c, 'GET', '/mailboxes/current', undefined, 'read', options);
    this.#c.mailbox = out.mailbox;
    return this.mailbox;
  }

  /** Asks for minutes (1 to 10) more; the grant never passes max_expires_at. Returns the inbox with its new expiry. */
  async extend(minutes: number, options: CallOptions = {}): Promise<Mailbox> {
    checkTimeout('timeout', options.timeout);
    const out = await call<{ mailbox: Mailbox }>(this.#c, 
      'PATCH', '/mailboxes/current', { extension_minutes: minutes }, 'write', options,
    );
    this.#c.mailbox = out.mailbox;
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
    if (this.#c.gone !== undefined) return false;
    try {
      await call(this.#c, 'DELETE', '/mailboxes/current', undefined, 'write', options);
    } catch (err) {
      if (err instanceof InboxGoneError) return false; // a 401: errorOf (transport.ts) marked it gone
      if (err instanceof MayflyError && err.status === 404 && err.code === 'MAILBOX_NOT_FOUND') {
        this.#c.gone = new InboxGoneError(`mayfly: inbox expired or deleted: ${err.message}`, err);
        this.#c.jar.clear();
        return false;
      }
      throw err;
    }
    this.#c.gone = new InboxGoneError('mayfly: inbox deleted');
    this.#c.jar.clear();
    return true;
  }

  /** One page of messages, newest first. */
  async list(options: ListOptions = {}): Promise<Page> {
    checkTimeout('timeout', options.timeout);
    return listPage(this.#c, options.limit ?? 20, options.offset ?? 0, options, this.#c.o.maxAttempts);
  }

  /** Every page of messages, newest first, fetched as the iteration goes. */
  async *pages(options: { pageSize?: number; signal?: AbortSignal } = {}): AsyncGenerator<Page, void, undefined> {
    const size = options.pageSize ?? 100;
    for (let offset = 0; ; offset += size) {
      const p = await listPage(this.#c, size, offset, options.signal, this.#c.o.maxAttempts);
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
    const m = await getMessage(this.#c, id, options, this.#c.o.maxAttempts);
    this.#c.returned.add(m.id);
    return m;
  }

  /** Deletes one message. */
  async deleteMessage(id: string, options: CallOptions = {}): Promise<void> {
    checkTimeout('timeout', options.timeout);
    await call(this.#c, 'DELETE', `/messages/${encodeURIComponent(id)}`, undefined, 'write', options);
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
    yield* events(this.#c, options);
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
    const [m] = await waitFor(this.#c, 1, options, 'no matching message');
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
    return waitFor(this.#c, count, options, `fewer than ${count} matching messages`);
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
    return expectNoMessage(this.#c, options);
  }
}
