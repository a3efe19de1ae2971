// Transport: one API call with the retries of the contract (retry.ts), its
// answer or its typed error, on an inbox's shared state (internal.ts): the
// cookie jar, the gone error, the running wait's watch.

import { setCookieValues } from './cookies.js';
import {
  CREATION_LIMIT_CODES,
  CreationLimitError,
  InboxGoneError,
  MayflyError,
  RateLimitedError,
  SessionInvalidError,
  UnreachableError,
  explainCreationLimit,
  parseRetryAfter,
} from './errors.js';
import type { CallOptions, Page } from './client.js';
import type { InboxCore } from './internal.js';
import { retryDelay } from './retry.js';
import type { RequestKind, RetryPolicy } from './retry.js';
import type { Message, MessageSummary } from './types.js';


/** An answer came: the running wait's service is reachable. */
export function answered(c: InboxCore, signal: AbortSignal | undefined): void {
  if (c.watch !== undefined && signal === c.watch.signal) c.watch.ok();
}

/** A transport failure of the running wait's call. */
export function failed(c: InboxCore, signal: AbortSignal | undefined, err: NetworkError): void {
  if (c.watch !== undefined && signal === c.watch.signal) c.watch.fail(err);
}

export function alive(c: InboxCore): void {
  if (c.gone !== undefined) throw c.gone;
}

/** A message or summary with its `to`: the inbox's address when the service sent none (a service older than sub-addressing). */
export function fill<T extends { to?: string }>(c: InboxCore, m: T): T {
  if (typeof m.to !== 'string' || m.to === '') m.to = c.mailbox?.address.toLowerCase() ?? '';
  return m;
}

export function headers(c: InboxCore, url: string, accept: string, json = false): Record<string, string> {
  const h: Record<string, string> = { accept, 'user-agent': c.o.userAgent };
  const cookie = c.jar.header(url);
  if (cookie !== '') h['cookie'] = cookie;
  if (json) h['content-type'] = 'application/json';
  return h;
}

/** One page of the message list (GET /messages), each summary with its `to`. */
export async function listPage(c: InboxCore, limit: number, offset: number, signal: CallOptions | AbortSignal | undefined, attempts: number): Promise<Page> {
  const q = new URLSearchParams({ limit: String(limit), offset: String(offset) });
  const out = await call<{ items: MessageSummary[]; pagination: { limit: number; offset: number; has_more: boolean } }>(
    c,
    'GET', `/messages?${q}`, undefined, 'read', signal, attempts,
  );
  return { items: out.items.map((m) => fill(c, m)), limit: out.pagination.limit, offset: out.pagination.offset, hasMore: out.pagination.has_more };
}

/** One message with its bodies (GET /messages/{id}), with its `to`. */
export async function getMessage(c: InboxCore, id: string, signal: CallOptions | AbortSignal | undefined, attempts: number): Promise<Message> {
  const out = await call<{ message: Message }>(c, 'GET', `/messages/${encodeURIComponent(id)}`, undefined, 'read', signal, attempts);
  return fill(c, out.message);
}

/** One API call with the retries of the contract; the data envelope's content. */
export async function call<T>(
  c: InboxCore,
  method: string, path: string, body: object | undefined, kind: RequestKind,
  opts: CallOptions | AbortSignal | undefined, attempts = c.o.maxAttempts,
): Promise<T> {
  alive(c);
  const url = c.o.base + path;
  const { signal, timeout } = opts === undefined || opts instanceof AbortSignal ? { signal: opts, timeout: undefined } : opts;
  const deadline = timeout === undefined ? Infinity : Date.now() + timeout;
  for (let attempt = 1; ; attempt++) {
    let wait: number;
    let last: unknown;
    try {
      return await once<T>(c, method, url, path, body, signal, Math.min(c.o.requestTimeout, deadline - Date.now()));
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      last = err;
      const w = retryWait(err, attempts === Infinity && kind === 'read' ? 'wait' : kind, attempt, deadline - Date.now(), c.o.policy);
      if (w === undefined || attempt >= attempts) throw err;
      wait = w;
    }
    const e = last as { status?: number; code?: string };
    c.o.log('retrying', { method, path: path.split('?')[0], attempt, wait, status: e.status, code: e.code }, 'debug');
    await sleep(wait, signal);
  }
}

async function once<T>(
  c: InboxCore,
  method: string, url: string, path: string, body: object | undefined, signal: AbortSignal | undefined, budget: number,
): Promise<T> {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(new Error(`no answer within ${Math.max(0, Math.round(budget))} ms`)), Math.max(0, budget));
  const onAbort = () => ctl.abort(signal?.reason);
  if (signal?.aborted) ctl.abort(signal.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    let res: Response;
    try {
      const init: RequestInit = { method, headers: headers(c, url, 'application/json', body !== undefined), signal: ctl.signal, redirect: 'manual' };
      if (body !== undefined) init.body = JSON.stringify(body);
      res = await c.o.fetch(url, init);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      const e = new NetworkError(method, url, err, refused(err));
      failed(c, signal, e);
      throw e;
    }
    answered(c, signal);
    c.jar.store(url, setCookieValues(res.headers));
    if (res.status >= 200 && res.status < 300) {
      if (res.status === 204) return undefined as T;
      let env: { data?: T };
      try {
        env = (await res.json()) as { data?: T };
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        throw new NetworkError(method, url, err, false);
      }
      if (env === null || typeof env !== 'object' || env.data === undefined) {
        throw new MayflyError(`mayfly: ${method} ${url}: answer ${res.status} without a data envelope`, { status: res.status });
      }
      return env.data;
    }
    throw await errorOf(c, res, method, url, path);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

/** The typed error of an error answer; marks the inbox gone when the answer says so. */
export async function errorOf(c: InboxCore, res: Response, method: string, url: string, path: string): Promise<MayflyError> {
  let env: { error?: { code?: string; message?: string; details?: Record<string, unknown> }; request_id?: string } = {};
  try {
    env = JSON.parse(await res.text());
  } catch {
    // not the envelope: status only
  }
  const init = {
    status: res.status,
    code: env?.error?.code,
    requestId: env?.request_id ?? res.headers.get('x-request-id') ?? undefined,
    details: env?.error?.details,
    retryAfter: parseRetryAfter(res.headers.get('retry-after')),
  };
  const route = path.split('?')[0];
  // Where it went (the method and the URL: never a cookie), then what came back.
  // An answer without the API's envelope (another server, a proxy, a base
  // URL without /v1) says so, in the three clients' words.
  const text =
    env?.error?.message ??
    (init.code === undefined
      ? `${res.statusText || 'HTTP ' + res.status}: not an answer of the Mayfly API (is the base URL the API's, ending in /v1?)`
      : '');
  const msg = `mayfly: ${method} ${url}: ${res.status}${init.code === undefined ? '' : ' ' + init.code}: ${text}${init.requestId === undefined ? '' : ` (request ${init.requestId})`}`;
  // Gone: any 401 on a call made with the inbox's cookies (every call but
  // creation), or 404 MAILBOX_NOT_FOUND on select.
  const creation = method === 'POST' && route === '/mailboxes';
  const select = method === 'POST' && route.endsWith('/select');
  if ((res.status === 401 && !creation) || (select && res.status === 404 && init.code === 'MAILBOX_NOT_FOUND')) {
    c.gone = new InboxGoneError(`mayfly: inbox expired or deleted: ${msg}`, init);
    c.jar.clear();
    return c.gone;
  }
  if (res.status === 429 && init.code !== undefined && CREATION_LIMIT_CODES.has(init.code)) {
    return new CreationLimitError(`${msg}: ${explainCreationLimit(init.code, init.retryAfter, init.details)}`, init);
  }
  if (res.status === 429) return new RateLimitedError(msg, init);
  if (res.status === 401) return new SessionInvalidError(msg, init);
  return new MayflyError(msg, init);
}

/** A transport failure (no HTTP answer); refused says nothing was sent. */
export class NetworkError extends MayflyError {
  readonly refused: boolean;
  constructor(method: string, url: string, cause: unknown, refused: boolean) {
    super(`mayfly: ${method} ${url}: ${refused ? 'connection refused' : 'no answer'} (${detail(cause)})`, { cause });
    this.name = 'MayflyError';
    this.refused = refused;
  }
}

/** The most telling text of a transport error: the innermost cause's ("connect ECONNREFUSED 127.0.0.1:8080"). */
function detail(err: unknown): string {
  let out = '';
  for (let e: unknown = err, i = 0; e !== undefined && e !== null && i < 6; e = (e as { cause?: unknown }).cause, i++) {
    const errors = (e as { errors?: unknown[] }).errors; // AggregateError of several addresses
    const inner = Array.isArray(errors) && errors.length > 0 ? errors[0] : e;
    const msg = String((inner as { message?: unknown }).message ?? inner);
    const code = (inner as { code?: unknown }).code;
    if (msg !== '' && msg !== 'fetch failed') out = msg;
    else if (typeof code === 'string') out = code;
  }
  return out || String(err);
}

export function refused(err: unknown): boolean {
  for (let e: unknown = err, i = 0; e !== undefined && e !== null && i < 5; e = (e as { cause?: unknown }).cause, i++) {
    const code = (e as { code?: unknown }).code;
    if (code === 'ECONNREFUSED') return true;
    const errors = (e as { errors?: unknown[] }).errors; // AggregateError of several addresses
    if (Array.isArray(errors) && errors.length > 0 && errors.every((x) => (x as { code?: unknown }).code === 'ECONNREFUSED')) return true;
  }
  return false;
}

/** The wait before the next attempt per the contract's retry table (retry.ts), or undefined: not retried. */
function retryWait(err: unknown, kind: RequestKind, attempt: number, remaining: number, policy: RetryPolicy): number | undefined {
  const left = remaining === Infinity ? undefined : remaining;
  if (err instanceof NetworkError) return retryDelay({ transport: err.refused ? 'refused' : 'reset' }, kind, attempt, left, policy);
  if (!(err instanceof MayflyError) || err instanceof InboxGoneError) return undefined;
  const retryAfter = err.retryAfter === undefined ? null : String(err.retryAfter);
  return retryDelay({ status: err.status, code: err.code, retryAfter }, kind, attempt, left, policy);
}

/** Transient: what a wait or a stream outlives (the network, 5xx, the request rate). */
export function transient(err: unknown): boolean {
  if (err instanceof InboxGoneError || err instanceof CreationLimitError || err instanceof UnreachableError) return false;
  if (err instanceof NetworkError) return true;
  if (err instanceof MayflyError) return err.status === undefined || err.status === 429 || err.status >= 500;
  return true; // a stream's read error
}

export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
