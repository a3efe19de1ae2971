/**
 * The official TypeScript client of Mayfly, the temporary receive-only inbox
 * service. Zero runtime dependencies: global fetch, its own event-stream
 * parser and its own cookie jar per inbox. The behaviour is the shared
 * contract of clients/SCENARIOS.md.
 *
 * @example
 * // A test suite against a public service: one shared inbox, a tagged address per test.
 * const shared = new SharedInbox(mayfly);
 * const to = await shared.recipient('signup works');
 * await signUp(to.address);
 * console.log(code(await to.waitForMessage()));
 *
 * @example
 * const mayfly = new Mayfly({ baseUrl: 'http://127.0.0.1:8080/v1' });
 * const inbox = await mayfly.createInbox();
 * await signUp(inbox.address);
 * const msg = await inbox.waitForMessage({ subject: /Your code/ }); // timeout in ms, default 20 000
 * console.log(code(msg));
 * await inbox.delete();
 */
export { Mayfly, Inbox, createClient, MIN_POLL_INTERVAL, REPLACED_PAUSE, DEFAULT_WAIT_TIMEOUT, DEFAULT_UNREACHABLE_AFTER, MIN_TIMEOUT, } from './client.js';
export type { ClientOptions, CallOptions, CreateInboxOptions, ListOptions, Page, Since, WaitOptions, ExpectNoMessageOptions, EventsOptions, InboxEvent, LogLevel, } from './client.js';
export { MayflyError, InboxGoneError, CreationLimitError, RateLimitedError, WaitTimeoutError, StreamBusyError, SessionInvalidError, UnreachableError, UnexpectedMessageError, } from './errors.js';
export type { MayflyErrorInit } from './errors.js';
export { links, linksWithText, code, codes, htmlText, htmlUnescape, DEFAULT_CODE } from './helpers.js';
export type { Link } from './helpers.js';
export { Recipient } from './recipient.js';
export { SharedInbox, SHARED_MARGIN } from './shared.js';
export type { SharedInboxOptions, RecipientOptions } from './shared.js';
export type { InboxState, StateCookie } from './state.js';
export { SSEParser } from './sse.js';
export type { SSEEvent, SSEParserOptions } from './sse.js';
export { CookieJar, parseSetCookie, setCookieValues } from './cookies.js';
export type * from './types.js';
