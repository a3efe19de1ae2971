import type { StoredCookie } from './cookies.js';
import type { Mailbox } from './types.js';
/** One cookie of a saved state. */
export interface StateCookie {
    name: string;
    value: string;
    path: string;
    /** RFC 3339; absent for a session cookie. */
    expires?: string;
    secure?: boolean;
}
/** The saved state of an inbox (version 1). */
export interface InboxState {
    version: 1;
    /** The API's base URL, with /v1. */
    base: string;
    mailbox: Mailbox;
    cookies: StateCookie[];
    /** The ids a wait or message() returned (what since 'unseen' leaves out), oldest first. */
    seen: string[];
    /** Present and true when the inbox is gone (deleted, expired). */
    gone?: boolean;
}
export declare function toStateCookie(c: StoredCookie): StateCookie;
export declare function fromStateCookie(c: StateCookie): StoredCookie;
/** Checks a state (an object or its JSON text) and returns it. */
export declare function parseState(input: InboxState | string): InboxState;
