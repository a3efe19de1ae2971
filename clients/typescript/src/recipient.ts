// Tagged addresses and recipients (clients/SCENARIOS.md, "Tagged addresses
// and recipients"): mail to <local>+<tag>@<domain> lands in the inbox of
// <local>@<domain>, and every message carries the address it arrived for
// (`to`). A Recipient is one such address of an inbox, whose waits only see
// the mail sent to it.

import type { EventsOptions, ExpectNoMessageOptions, Inbox, InboxEvent, WaitOptions } from './client.js';
import { SCOPE_DEADLINE } from './internal.js';
import type { Deadline } from './internal.js';
import type { Message } from './types.js';

/** A tag: 1 to 64 of A-Z a-z 0-9 . _ - (and local+tag at most 64 characters). */
const TAG = /^[A-Za-z0-9._-]{1,64}$/;

/** The longest local part of an address (RFC 5321), `local+tag` included. */
export const MAX_LOCAL = 64;

/**
 * The tagged address `<local>+<tag>@<domain>` of address; a RangeError for a
 * tag the service would refuse at RCPT (no request is made).
 */
export function tagAddress(address: string, tag: string): string {
  if (typeof tag !== 'string' || !TAG.test(tag)) {
    throw new RangeError(`mayfly: tag ${JSON.stringify(tag)}: want 1 to 64 of A-Z a-z 0-9 . _ -`);
  }
  const at = address.lastIndexOf('@');
  if (at <= 0) throw new RangeError(`mayfly: ${JSON.stringify(address)} is not an address`);
  const local = address.slice(0, at);
  if (local.length + 1 + tag.length > MAX_LOCAL) {
    throw new RangeError(
      `mayfly: tag ${JSON.stringify(tag)}: ${local}+${tag} is ${local.length + 1 + tag.length} characters, over the ${MAX_LOCAL} of a local part`,
    );
  }
  return `${local}+${tag}${address.slice(at)}`;
}

/**
 * One tagged address of an inbox (Inbox.recipient(tag), SharedInbox.recipient(name)):
 * its waits, waitForMessages, expectNoMessage and events are the inbox's,
 * scoped to this address. A scoped wait never returns another recipient's
 * message; "unseen" is per scope (the messages to this address that the Inbox
 * object has not returned).
 */
export class Recipient {
  /** The inbox the mail lands in. */
  readonly inbox: Inbox;
  readonly tag: string;
  /** `<local>+<tag>@<domain>`. */
  readonly address: string;
  readonly #deadline: Deadline | undefined;

  /** @internal use Inbox.recipient or SharedInbox.recipient */
  constructor(inbox: Inbox, tag: string, deadline?: Deadline) {
    this.inbox = inbox;
    this.tag = tag;
    this.address = tagAddress(inbox.address, tag);
    this.#deadline = deadline;
  }

  #scope<T extends object>(options: T): T & { to: string } {
    const o: T & { to: string; [SCOPE_DEADLINE]?: Deadline } = { ...options, to: this.address };
    if (this.#deadline !== undefined) o[SCOPE_DEADLINE] = this.#deadline;
    return o;
  }

  /** Inbox.waitForMessage scoped to this address (the same options; `to` is this address). */
  waitForMessage(options: Omit<WaitOptions, 'to'> = {}): Promise<Message> {
    return this.inbox.waitForMessage(this.#scope(options));
  }

  /** Inbox.waitForMessages scoped to this address. */
  waitForMessages(count: number, options: Omit<WaitOptions, 'to'> = {}): Promise<Message[]> {
    return this.inbox.waitForMessages(count, this.#scope(options));
  }

  /** Inbox.expectNoMessage scoped to this address: mail to another address does not fail it. */
  expectNoMessage(options: Omit<ExpectNoMessageOptions, 'to'>): Promise<void> {
    return this.inbox.expectNoMessage(this.#scope(options));
  }

  /** Inbox.events scoped to this address: only the mail sent to it is yielded. */
  events(options: Omit<EventsOptions, 'to'> = {}): AsyncGenerator<InboxEvent, void, undefined> {
    return this.inbox.events(this.#scope(options));
  }
}
