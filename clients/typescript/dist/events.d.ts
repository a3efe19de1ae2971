import type { EventsOptions, InboxEvent } from './client.js';
import type { InboxCore } from './internal.js';
import type { MessageSummary } from './types.js';
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
export declare function events(c: InboxCore, options?: EventsOptions): AsyncGenerator<InboxEvent, void, undefined>;
/**
 * Follows the inbox: an optional list first (initial: true), then the event
 * stream with a list after every (re)connect, reconnecting with backoff.
 * With fallback, after two failed opens in a row it polls the list every
 * poll interval instead. When the service ends the stream because another
 * stream took the inbox over, it warns, polls the list every poll interval
 * for REPLACED_PAUSE, then opens the stream again. It ends only by throwing
 * (gone, the signal, an error that is not transient).
 */
export declare function follow(c: InboxCore, signal: AbortSignal, preList: boolean, fallback: boolean): AsyncGenerator<{
    kind: 'list';
    items: MessageSummary[];
    initial: boolean;
} | {
    kind: 'event';
    item: MessageSummary;
}>;
export declare function takeStream(c: InboxCore): void;
