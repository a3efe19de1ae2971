"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.setCookieValues = exports.parseSetCookie = exports.CookieJar = exports.SSEParser = exports.SHARED_MARGIN = exports.SharedInbox = exports.Recipient = exports.DEFAULT_CODE = exports.htmlUnescape = exports.htmlText = exports.codes = exports.code = exports.linksWithText = exports.links = exports.UnexpectedMessageError = exports.UnreachableError = exports.SessionInvalidError = exports.StreamBusyError = exports.WaitTimeoutError = exports.RateLimitedError = exports.CreationLimitError = exports.InboxGoneError = exports.MayflyError = exports.MIN_TIMEOUT = exports.DEFAULT_UNREACHABLE_AFTER = exports.DEFAULT_WAIT_TIMEOUT = exports.REPLACED_PAUSE = exports.MIN_POLL_INTERVAL = exports.createClient = exports.Inbox = exports.Mayfly = void 0;
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
var client_js_1 = require("./client.js");
Object.defineProperty(exports, "Mayfly", { enumerable: true, get: function () { return client_js_1.Mayfly; } });
Object.defineProperty(exports, "Inbox", { enumerable: true, get: function () { return client_js_1.Inbox; } });
Object.defineProperty(exports, "createClient", { enumerable: true, get: function () { return client_js_1.createClient; } });
Object.defineProperty(exports, "MIN_POLL_INTERVAL", { enumerable: true, get: function () { return client_js_1.MIN_POLL_INTERVAL; } });
Object.defineProperty(exports, "REPLACED_PAUSE", { enumerable: true, get: function () { return client_js_1.REPLACED_PAUSE; } });
Object.defineProperty(exports, "DEFAULT_WAIT_TIMEOUT", { enumerable: true, get: function () { return client_js_1.DEFAULT_WAIT_TIMEOUT; } });
Object.defineProperty(exports, "DEFAULT_UNREACHABLE_AFTER", { enumerable: true, get: function () { return client_js_1.DEFAULT_UNREACHABLE_AFTER; } });
Object.defineProperty(exports, "MIN_TIMEOUT", { enumerable: true, get: function () { return client_js_1.MIN_TIMEOUT; } });
var errors_js_1 = require("./errors.js");
Object.defineProperty(exports, "MayflyError", { enumerable: true, get: function () { return errors_js_1.MayflyError; } });
Object.defineProperty(exports, "InboxGoneError", { enumerable: true, get: function () { return errors_js_1.InboxGoneError; } });
Object.defineProperty(exports, "CreationLimitError", { enumerable: true, get: function () { return errors_js_1.CreationLimitError; } });
Object.defineProperty(exports, "RateLimitedError", { enumerable: true, get: function () { return errors_js_1.RateLimitedError; } });
Object.defineProperty(exports, "WaitTimeoutError", { enumerable: true, get: function () { return errors_js_1.WaitTimeoutError; } });
Object.defineProperty(exports, "StreamBusyError", { enumerable: true, get: function () { return errors_js_1.StreamBusyError; } });
Object.defineProperty(exports, "SessionInvalidError", { enumerable: true, get: function () { return errors_js_1.SessionInvalidError; } });
Object.defineProperty(exports, "UnreachableError", { enumerable: true, get: function () { return errors_js_1.UnreachableError; } });
Object.defineProperty(exports, "UnexpectedMessageError", { enumerable: true, get: function () { return errors_js_1.UnexpectedMessageError; } });
var helpers_js_1 = require("./helpers.js");
Object.defineProperty(exports, "links", { enumerable: true, get: function () { return helpers_js_1.links; } });
Object.defineProperty(exports, "linksWithText", { enumerable: true, get: function () { return helpers_js_1.linksWithText; } });
Object.defineProperty(exports, "code", { enumerable: true, get: function () { return helpers_js_1.code; } });
Object.defineProperty(exports, "codes", { enumerable: true, get: function () { return helpers_js_1.codes; } });
Object.defineProperty(exports, "htmlText", { enumerable: true, get: function () { return helpers_js_1.htmlText; } });
Object.defineProperty(exports, "htmlUnescape", { enumerable: true, get: function () { return helpers_js_1.htmlUnescape; } });
Object.defineProperty(exports, "DEFAULT_CODE", { enumerable: true, get: function () { return helpers_js_1.DEFAULT_CODE; } });
var recipient_js_1 = require("./recipient.js");
Object.defineProperty(exports, "Recipient", { enumerable: true, get: function () { return recipient_js_1.Recipient; } });
var shared_js_1 = require("./shared.js");
Object.defineProperty(exports, "SharedInbox", { enumerable: true, get: function () { return shared_js_1.SharedInbox; } });
Object.defineProperty(exports, "SHARED_MARGIN", { enumerable: true, get: function () { return shared_js_1.SHARED_MARGIN; } });
var sse_js_1 = require("./sse.js");
Object.defineProperty(exports, "SSEParser", { enumerable: true, get: function () { return sse_js_1.SSEParser; } });
var cookies_js_1 = require("./cookies.js");
Object.defineProperty(exports, "CookieJar", { enumerable: true, get: function () { return cookies_js_1.CookieJar; } });
Object.defineProperty(exports, "parseSetCookie", { enumerable: true, get: function () { return cookies_js_1.parseSetCookie; } });
Object.defineProperty(exports, "setCookieValues", { enumerable: true, get: function () { return cookies_js_1.setCookieValues; } });
