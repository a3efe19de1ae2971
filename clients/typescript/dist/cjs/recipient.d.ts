import type { EventsOptions, ExpectNoMessageOptions, Inbox, InboxEvent, WaitOptions } from './client.js';
import type { Deadline } from './internal.js';
import type { Message } from './types.js';
/** The longest local part of an address (RFC 5321), `local+tag` included. */
export declare const MAX_LOCAL = 64;
/**
 * The tagged address `<local>+<tag>@<domain>` of address; a RangeError for a
 * tag the service would refuse at RCPT (no request is made).
 */
export declare function tagAddress(address: string, tag: string): string;
/**
 * One tagged address of an inbox (Inbox.recipient(tag), SharedInbox.recipient(name)):
 * its waits, waitForMessages, expectNoMessage and events are the inbox's,
 * scoped to this address. A scoped wait never returns another recipient's
 * message; "unseen" is per scope (the messages to this address that the Inbox
 * object has not returned).
 */
export declare class Recipient {
    #private;
    /** The inbox the mail lands in. */
    readonly inbox: Inbox;
    readonly tag: string;
    /** `<local>+<tag>@<domain>`. */
    readonly address: string;
    /** @internal use Inbox.recipient or SharedInbox.recipient */
    constructor(inbox: Inbox, tag: string, deadline?: Deadline);
    /** Inbox.waitForMessage scoped to this address (the same options; `to` is this address). */
    waitForMessage(options?: Omit<WaitOptions, 'to'>): Promise<Message>;
    /** Inbox.waitForMessages scoped to this address. */
    waitForMessages(count: number, options?: Omit<WaitOptions, 'to'>): Promise<Message[]>;
    /** Inbox.expectNoMessage scoped to this address: mail to another address does not fail it. */
    expectNoMessage(options: Omit<ExpectNoMessageOptions, 'to'>): Promise<void>;
    /** Inbox.events scoped to this address: only the mail sent to it is yielded. */
    events(options?: Omit<EventsOptions, 'to'>): AsyncGenerator<InboxEvent, void, undefined>;
}
