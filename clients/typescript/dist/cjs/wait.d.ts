import type { ExpectNoMessageOptions, WaitOptions } from './client.js';
import type { InboxCore } from './internal.js';
import type { Message } from './types.js';
/**
 * The first `count` messages that match `options` and are new in the sense
 * of its `since`, oldest first (marked returned): Inbox.waitForMessage and
 * waitForMessages. Its timeout's WaitTimeoutError says `what` was missing.
 */
export declare function waitFor(c: InboxCore, count: number, options: WaitOptions, what: string): Promise<Message[]>;
/**
 * Succeeds when no message that matches and is new in the sense of `since`
 * (default 'unseen') arrives within `within` milliseconds: the honest
 * "no second email" assertion. A matching message fails it at once with
 * UnexpectedMessageError (`received` is the message; it is not marked
 * returned). A server unreachable at the end of the window cannot prove the
 * absence: UnreachableError.
 */
export declare function expectNoMessage(c: InboxCore, options: ExpectNoMessageOptions): Promise<void>;
