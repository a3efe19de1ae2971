// The saved state of an inbox: one JSON format shared by the Go, TypeScript
// and Python clients (clients/SCENARIOS.md), so that an inbox created in one
// process (a Playwright globalSetup, a Go test helper) is restored in another.
// It holds the cookie values: keep it as secret as the cookies themselves.

import type { StoredCookie } from './cookies.js';
import { MayflyError } from './errors.js';
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

export function toStateCookie(c: StoredCookie): StateCookie {
  const out: StateCookie = { name: c.name, value: c.value, path: c.path };
  if (c.expires !== undefined) out.expires = new Date(c.expires).toISOString().replace(/\.000Z$/, 'Z');
  if (c.secure) out.secure = true;
  return out;
}

export function fromStateCookie(c: StateCookie): StoredCookie {
  let expires: number | undefined;
  if (c.expires !== undefined && c.expires !== null && c.expires !== '') {
    expires = Date.parse(c.expires);
    if (Number.isNaN(expires)) throw new MayflyError(`mayfly: restore: cookie ${c.name}: expires ${JSON.stringify(c.expires)} is not RFC 3339`);
  }
  return { name: c.name, value: c.value, path: c.path || '/', expires, secure: c.secure === true };
}

/** Checks a state (an object or its JSON text) and returns it. */
export function parseState(input: InboxState | string): InboxState {
  let st: unknown = input;
  if (typeof input === 'string') {
    try {
      st = JSON.parse(input);
    } catch (err) {
      throw new MayflyError('mayfly: restore: the state is not JSON', { cause: err });
    }
  }
  const bad = (why: string) => new MayflyError(`mayfly: restore: ${why}`);
  if (st === null || typeof st !== 'object') throw bad('the state is not an object');
  const s = st as Partial<InboxState>;
  if (s.version !== 1) throw bad(`version ${JSON.stringify(s.version)}: want 1`);
  if (typeof s.base !== 'string') throw bad('no base');
  const m = s.mailbox;
  if (m === null || typeof m !== 'object' || typeof m.id !== 'string' || typeof m.address !== 'string') {
    throw bad('no mailbox with an id and an address');
  }
  if (!Array.isArray(s.cookies) || s.cookies.some((c) => typeof c?.name !== 'string' || typeof c?.value !== 'string')) {
    throw bad('cookies: want a list of {name, value, path}');
  }
  if (s.seen !== undefined && (!Array.isArray(s.seen) || s.seen.some((id) => typeof id !== 'string'))) {
    throw bad('seen: want a list of message ids');
  }
  return {
    version: 1,
    base: s.base,
    mailbox: {
      id: m.id, address: m.address, kind: m.kind ?? 'temporary',
      expires_at: m.expires_at ?? null, max_expires_at: m.max_expires_at ?? null,
    },
    cookies: s.cookies,
    seen: s.seen ?? [],
    ...(s.gone === true ? { gone: true } : {}),
  };
}
