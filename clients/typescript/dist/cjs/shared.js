"use strict";
// The shared inbox (clients/SCENARIOS.md, "Shared inboxes: test suites under
// the public limits"): one inbox for many tests, each test its own tagged
// address. A public service allows 5 creations a minute, 10 an hour and 20 a
// day per IP: one inbox per test spends a day's creations in 20 tests, one
// inbox per worker costs a suite one creation an hour.
Object.defineProperty(exports, "__esModule", { value: true });
exports.SharedInbox = exports.SHARED_MARGIN = void 0;
exports.safeName = safeName;
const errors_js_1 = require("./errors.js");
const recipient_js_1 = require("./recipient.js");
/** How close to its expiry (or its lifetime cap) an inbox is extended (or replaced) before a hand-out, in ms. */
exports.SHARED_MARGIN = 5 * 60_000;
/** The random characters ending each tag. */
const RANDOM_LENGTH = 10;
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
/** `name` made a tag's start: lower case, every run of other characters than a-z 0-9 one "-", no "-" at either end, at most max characters. */
function safeName(name, max) {
    const s = name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
    return s.slice(0, Math.max(0, max)).replace(/-+$/, '');
}
function randomTail() {
    const bytes = new Uint8Array(RANDOM_LENGTH);
    const c = globalThis.crypto;
    if (c?.getRandomValues)
        c.getRandomValues(bytes);
    else
        for (let i = 0; i < bytes.length; i++)
            bytes[i] = Math.floor(Math.random() * 256);
    let out = '';
    for (const b of bytes)
        out += ALPHABET[b % ALPHABET.length];
    return out;
}
/**
 * One inbox shared by the tests of a worker, each handed its own tagged
 * address by recipient(name). The inbox is created at the first
 * recipient() (a creation limit is thrown as it is, never retried blindly);
 * before each hand-out it is extended when it expires within 5 minutes, and
 * replaced (one new creation, the old one deleted) when its 60-minute cap is
 * within 5 minutes. close() deletes it.
 */
class SharedInbox {
    #mayfly;
    #options;
    #now;
    #inbox;
    /** The hand-outs, one at a time (two tests of a worker never race to create). */
    #queue = Promise.resolve();
    #creations = 0;
    /** A creation refused by a limit, thrown again without a request until its Retry-After (or 1 s) has passed. */
    #refused;
    constructor(mayfly, options = {}) {
        this.#mayfly = mayfly;
        this.#options = options;
        this.#now = options.now ?? Date.now;
    }
    /** The inbox now in use (undefined before the first recipient()). */
    get inbox() {
        return this.#inbox;
    }
    /** How many inboxes this shared inbox has created (1, and one per replacement). */
    get creations() {
        return this.#creations;
    }
    /**
     * A Recipient of the shared inbox whose tag is `name` made safe (lower
     * case, runs of other characters than a-z 0-9 as "-") plus "-" and 10
     * random characters: never the same twice, across runs too.
     */
    recipient(name, options = {}) {
        const next = this.#queue.then(async () => {
            const inbox = await this.#ready();
            const local = inbox.address.slice(0, inbox.address.lastIndexOf('@'));
            const room = recipient_js_1.MAX_LOCAL - local.length - 1 - 1 - RANDOM_LENGTH;
            const head = safeName(name, room);
            return new recipient_js_1.Recipient(inbox, head === '' ? randomTail() : `${head}-${randomTail()}`, options.deadline);
        });
        this.#queue = next.catch(() => undefined);
        return next;
    }
    /** Deletes the inbox (idempotent); a later recipient() creates a new one. */
    async close() {
        const inbox = this.#inbox;
        this.#inbox = undefined;
        if (inbox !== undefined)
            await inbox.delete();
    }
    /** The inbox to hand out from: created, extended or replaced as needed. */
    async #ready() {
        const inbox = this.#inbox;
        if (inbox === undefined || inbox.gone)
            return this.#create();
        const now = this.#now();
        const m = inbox.mailbox;
        const cap = m.max_expires_at === null ? Infinity : Date.parse(m.max_expires_at);
        if (cap - now <= exports.SHARED_MARGIN) {
            const fresh = await this.#create();
            await inbox.delete().catch(() => undefined); // the old one: it would expire anyway
            return fresh;
        }
        const expires = m.expires_at === null ? Infinity : Date.parse(m.expires_at);
        if (expires - now <= exports.SHARED_MARGIN) {
            try {
                await inbox.extend(10, this.#options.inbox?.signal === undefined ? {} : { signal: this.#options.inbox.signal });
            }
            catch (err) {
                if (err instanceof errors_js_1.InboxGoneError)
                    return this.#create();
                throw err;
            }
        }
        return inbox;
    }
    async #create() {
        // Refused attempts count against the creation windows: the tests that
        // follow a refusal get the same error, not one more attempt each.
        if (this.#refused !== undefined && Date.now() < this.#refused.until)
            throw this.#refused.err;
        let inbox;
        try {
            inbox = await this.#mayfly.createInbox({ ...this.#options.inbox });
        }
        catch (err) {
            if (err instanceof errors_js_1.CreationLimitError)
                this.#refused = { err, until: Date.now() + (err.retryAfter ?? 1) * 1000 };
            throw err;
        }
        this.#refused = undefined;
        this.#creations++;
        this.#inbox = inbox;
        return inbox;
    }
}
exports.SharedInbox = SharedInbox;
