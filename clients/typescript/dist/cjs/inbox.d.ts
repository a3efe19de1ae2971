import type { CookieJar } from './cookies.js';
import type { CallOptions, EventsOptions, ExpectNoMessageOptions, InboxEvent, ListOptions, Page, WaitOptions } from './client.js';
import type { Deadline, Resolved } from './internal.js';
import { Recipient } from './recipient.js';
import type { InboxState } from './state.js';
import type { Mailbox, Message, MessageSummary } from './types.js';
/** One inbox with the cookie jar that gives access to it. One event stream at a time. */
export declare class Inbox {
    #private;
    /** @internal use Mayfly.createInbox or Mayfly.restore */
    constructor(o: Resolved, jar: CookieJar, deadline?: Deadline);
    /** Whether the inbox is gone (deleted, expired, its session revoked): every method but delete() then throws InboxGoneError. */
    get gone(): boolean;
    /**
     * The inbox's saved state (one JSON format with the Go and Python
     * clients): the mailbox, the cookie jar and the ids already returned.
     * Mayfly.restore() makes an Inbox of it in another process. It holds the
     * cookie values: keep it as secret as they are.
     */
    state(): InboxState;
    /** @internal */
    _restore(st: InboxState): void;
    /** The inbox as last seen (creation, select, current, extend). */
    get mailbox(): Mailbox;
    get id(): string;
    get address(): string;
    /**
     * The tagged address `<local>+<tag>@<domain>` of this inbox: its mail lands
     * here, with `to` set to it. No request; a RangeError for a tag that is not
     * 1 to 64 of A-Z a-z 0-9 . _ - or makes the local part longer than 64.
     */
    addressFor(tag: string): string;
    /** A Recipient: the tagged address of `tag`, whose waits and events see only the mail sent to it. */
    recipient(tag: string): Recipient;
    /** @internal */
    _create(body: object, opts: CallOptions): Promise<void>;
    /** Opens a new session with the scoped cookie (replaces the jar's service_session). */
    select(options?: CallOptions): Promise<Mailbox>;
    /** Reads the inbox (GET /mailboxes/current). */
    current(options?: CallOptions): Promise<Mailbox>;
    /** Asks for minutes (1 to 10) more; the grant never passes max_expires_at. Returns the inbox with its new expiry. */
    extend(minutes: number, options?: CallOptions): Promise<Mailbox>;
    /**
     * Destroys the inbox and its messages; from then on every other method
     * throws InboxGoneError without a request. Idempotent: an inbox already
     * gone (deleted here or elsewhere, expired) is success. Resolves to whether
     * this call deleted it (false: it was gone already; no request is sent when
     * this object knows it).
     */
    delete(options?: CallOptions): Promise<boolean>;
    /** One page of messages, newest first. */
    list(options?: ListOptions): Promise<Page>;
    /** Every page of messages, newest first, fetched as the iteration goes. */
    pages(options?: {
        pageSize?: number;
        signal?: AbortSignal;
    }): AsyncGenerator<Page, void, undefined>;
    /** Every message summary, newest first, a page at a time. */
    messages(options?: {
        pageSize?: number;
        signal?: AbortSignal;
    }): AsyncGenerator<MessageSummary, void, undefined>;
    /** One message with its bodies; it counts as returned for `since: 'unseen'`. */
    message(id: string, options?: CallOptions): Promise<Message>;
    /** Deletes one message. */
    deleteMessage(id: string, options?: CallOptions): Promise<void>;
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
    events(options?: EventsOptions): AsyncGenerator<InboxEvent, void, undefined>;
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
    waitForMessage(options?: WaitOptions): Promise<Message>;
    /**
     * The first `count` messages that match and are new in the sense of
     * `since`, oldest first, with their bodies; as waitForMessage, and they
     * count as returned (since 'unseen') once all are there. Its timeout's
     * WaitTimeoutError says how many had come.
     */
    waitForMessages(count: number, options?: WaitOptions): Promise<Message[]>;
    /**
     * Succeeds when no message that matches and is new in the sense of `since`
     * (default 'unseen') arrives within `within` milliseconds: the honest
     * "no second email" assertion. A matching message fails it at once with
     * UnexpectedMessageError (`received` is the message; it is not marked
     * returned). A server unreachable at the end of the window cannot prove the
     * absence: UnreachableError.
     */
    expectNoMessage(options: ExpectNoMessageOptions): Promise<void>;
}
