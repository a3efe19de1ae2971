import type { CreateInboxOptions, Inbox, Mayfly } from './client.js';
import type { Deadline } from './internal.js';
import { Recipient } from './recipient.js';
/** How close to its expiry (or its lifetime cap) an inbox is extended (or replaced) before a hand-out, in ms. */
export declare const SHARED_MARGIN: number;
export interface SharedInboxOptions {
    /** How the inbox is created (lifetimeMinutes, waitForCapacity, timeout, signal). */
    inbox?: Omit<CreateInboxOptions, 'deadline'>;
    /** The clock, epoch ms (default Date.now): read to decide whether the inbox is to be extended or replaced. */
    now?: () => number;
}
export interface RecipientOptions {
    /** A time no wait of the recipient runs past (the test's deadline): epoch ms, a Date, or a function giving one. */
    deadline?: Deadline;
}
/** `name` made a tag's start: lower case, every run of other characters than a-z 0-9 one "-", no "-" at either end, at most max characters. */
export declare function safeName(name: string, max: number): string;
/**
 * One inbox shared by the tests of a worker, each handed its own tagged
 * address by recipient(name). The inbox is created at the first
 * recipient() (a creation limit is thrown as it is, never retried blindly);
 * before each hand-out it is extended when it expires within 5 minutes, and
 * replaced (one new creation, the old one deleted) when its 60-minute cap is
 * within 5 minutes. close() deletes it.
 */
export declare class SharedInbox {
    #private;
    constructor(mayfly: Mayfly, options?: SharedInboxOptions);
    /** The inbox now in use (undefined before the first recipient()). */
    get inbox(): Inbox | undefined;
    /** How many inboxes this shared inbox has created (1, and one per replacement). */
    get creations(): number;
    /**
     * A Recipient of the shared inbox whose tag is `name` made safe (lower
     * case, runs of other characters than a-z 0-9 as "-") plus "-" and 10
     * random characters: never the same twice, across runs too.
     */
    recipient(name: string, options?: RecipientOptions): Promise<Recipient>;
    /** Deletes the inbox (idempotent); a later recipient() creates a new one. */
    close(): Promise<void>;
}
