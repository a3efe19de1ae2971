// The rules of clients/SCENARIOS.md that a real stack cannot trigger on
// demand (a Retry-After over 10 s, a 401 other than the session's, a replaced
// stream watched for a whole minute), against a scripted server: a fake fetch
// that answers as the API does and records every request. The timing of the
// replaced-stream pause runs on node:test's mock timers.

import { describe, test, mock } from 'node:test';
import assert from 'node:assert/strict';
import {
  Mayfly, InboxGoneError, RateLimitedError, MayflyError, REPLACED_PAUSE,
} from '../dist/index.js';

const ID = '0b5e2a7c-3f1d-4e8a-9c6b-7d2e1f0a4b93';
const MAILBOX = { id: ID, address: 'x7@mayfly.test', kind: 'temporary', expires_at: null, max_expires_at: null };

function json(status, body, headers = {}) {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });
}

function apiError(status, code, headers = {}) {
  return json(status, { error: { code, message: code.toLowerCase() }, request_id: 'req-1' }, headers);
}

function summary(id, subject) {
  return { id, from: 'App <app@example.com>', subject, received_at: new Date(0).toISOString(), status: 'ready' };
}

function listOf(items) {
  return json(200, { data: { items, pagination: { limit: 100, offset: 0, has_more: false } } });
}

/** An event stream: the chunks, then the end, unless keepOpen (then it ends when the request is aborted). */
function sse(chunks, signal, keepOpen = false) {
  const enc = new TextEncoder();
  const body = new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(enc.encode(ch));
      if (!keepOpen) c.close();
      else signal?.addEventListener('abort', () => c.error(signal.reason), { once: true });
    },
  });
  return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
}

/**
 * A scripted server: creation and select answer as the API does (with the
 * cookies), everything else goes to route(method, path, init); every request
 * is logged with the (possibly mocked) time it was sent.
 */
function scripted(route) {
  const log = [];
  const fetch = async (url, init = {}) => {
    const u = new URL(url);
    const path = u.pathname.replace(/^\/v1/, '') + u.search;
    const method = init.method ?? 'GET';
    log.push({ method, path, at: Date.now(), cookie: init.headers?.cookie ?? '' });
    const r = route(method, path, init);
    if (r !== undefined) return r;
    if (method === 'POST' && path === '/mailboxes') {
      return json(201, { data: { mailbox: MAILBOX } }, { 'set-cookie': `mayfly_${ID.replaceAll('-', '')}=scoped; Path=/v1` });
    }
    if (method === 'POST' && path.endsWith('/select')) {
      return json(200, { data: { mailbox: MAILBOX } }, { 'set-cookie': 'service_session=sess; Path=/v1' });
    }
    if (path === '/mailboxes/current') return json(200, { data: { mailbox: MAILBOX } });
    return apiError(500, 'INTERNAL');
  };
  return { fetch, log };
}

const flush = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

describe('replaced stream', () => {
  test('the service ends the stream for a newer one: warn, poll every 5 s for 60 s, then open it again', async (t) => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
    t.after(() => mock.timers.reset());
    let t0; // when the replaced stream was answered
    const late = summary('11111111-2222-4333-8444-555555555555', 'during the pause');
    const srv = scripted((method, path, init) => {
      if (path === '/events') {
        if (t0 === undefined) {
          t0 = Date.now();
          return sse(['retry: 3000\n\n', ': replaced by a newer stream on this inbox\n\n'], init.signal);
        }
        return sse(['retry: 3000\n\n', ': ping\n\n'], init.signal, true);
      }
      if (path.startsWith('/messages?')) return listOf(t0 !== undefined && Date.now() - t0 >= 12_000 ? [late] : []);
      return undefined;
    });
    const logged = [];
    const client = new Mayfly({
      baseUrl: 'http://api.example/v1', fetch: srv.fetch,
      logger: (event, fields, level) => logged.push({ event, fields, level }),
    });
    const createP = client.createInbox();
    await flush();
    const inbox = await createP;
    const ctl = new AbortController();
    const got = [];
    const done = (async () => {
      for await (const ev of inbox.events({ signal: ctl.signal })) got.push({ ...ev, at: Date.now() });
    })().catch((err) => err);
    for (let i = 0; i < 640; i++) { // 64 s of mocked time
      mock.timers.tick(100);
      await flush();
    }
    ctl.abort();
    await flush();
    assert.equal((await done).name, 'AbortError');

    assert.ok(t0 !== undefined, 'no stream was opened');
    const streams = srv.log.filter((r) => r.path === '/events').map((r) => r.at - t0);
    assert.deepEqual(streams.length, 2, `streams opened at ${streams} ms`);
    assert.ok(streams[1] >= REPLACED_PAUSE && streams[1] < REPLACED_PAUSE + 1000, `the stream was opened again ${streams[1]} ms after it was replaced`);
    // Polling meanwhile: every 5 s (never faster), 11 lists in the minute.
    const polls = srv.log.filter((r) => r.path.startsWith('/messages?') && r.at > t0 + 100 && r.at < t0 + REPLACED_PAUSE).map((r) => r.at - t0);
    assert.equal(polls.length, 11, `polls at ${polls}`);
    for (let i = 1; i < polls.length; i++) assert.ok(polls[i] - polls[i - 1] >= 5000, `polls at ${polls}`);
    // The message that came during the pause was found by a poll.
    assert.deepEqual(got.map((e) => [e.message.id, e.missed]), [[late.id, true]]);
    assert.ok(got[0].at - t0 >= 12_000 && got[0].at - t0 <= 15_100, `yielded at ${got[0].at - t0} ms`);
    // And the caller was warned, once, without a cookie.
    const warns = logged.filter((l) => l.level === 'warn');
    assert.equal(warns.length, 1, JSON.stringify(logged));
    assert.match(warns[0].event, /another client opened one on this inbox/);
    assert.equal(warns[0].fields.for, REPLACED_PAUSE);
    assert.ok(!JSON.stringify(logged).includes('scoped') && !JSON.stringify(logged).includes('sess'));
  });

  test('the default logger warns on console.warn; a heartbeat comment is not a replacement', async (t) => {
    const warn = t.mock.method(console, 'warn', () => {});
    let opened = 0;
    const srv = scripted((method, path, init) => {
      if (path === '/events') {
        opened++;
        return opened === 1 ? sse([': ping\n\n', ': replaced by a newer stream on this inbox\n\n'], init.signal)
          : sse([': ping\n\n', 'event: message.received\ndata: ' + JSON.stringify(summary('21111111-2222-4333-8444-555555555555', 'x')) + '\n\n'], init.signal, true);
      }
      if (path.startsWith('/messages?')) return listOf([]);
      return undefined;
    });
    const client = new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch });
    const inbox = await client.createInbox();
    const ctl = new AbortController();
    const it = inbox.events({ signal: ctl.signal })[Symbol.asyncIterator]();
    const next = it.next();
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(warn.mock.callCount(), 1);
    assert.match(String(warn.mock.calls[0].arguments[0]), /another client opened one on this inbox/);
    assert.equal(opened, 1, 'the stream was taken back at once');
    ctl.abort();
    await assert.rejects(next, (err) => err.name === 'AbortError');
  });
});

describe('Retry-After over 10 s', () => {
  test('a request-rate 429 or a 503 REQUEST_PROTECTION asking for more than 10 s is thrown, not waited', { timeout: 5000 }, async () => {
    for (const [status, code, after] of [[429, 'RATE_LIMITED', '30'], [503, 'REQUEST_PROTECTION', '11']]) {
      let reads = 0;
      const srv = scripted((method, path) => {
        if (path.startsWith('/messages?')) {
          reads++;
          return apiError(status, code, { 'retry-after': after });
        }
        return undefined;
      });
      const inbox = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch }).createInbox();
      const t0 = Date.now();
      await assert.rejects(inbox.list(), (err) => err instanceof MayflyError && err.status === status && err.code === code &&
        err.retryAfter === Number(after) && (status !== 429 || err instanceof RateLimitedError));
      assert.ok(Date.now() - t0 < 1000, `${code}: took ${Date.now() - t0} ms`);
      assert.equal(reads, 1, `${code}: retried`);
    }
  });

  test('10 s or less is waited (maxRetryAfter lowered to see it)', async () => {
    let reads = 0;
    const srv = scripted((method, path) => {
      if (path.startsWith('/messages?')) return ++reads === 1 ? apiError(429, 'RATE_LIMITED', { 'retry-after': '1' }) : listOf([]);
      return undefined;
    });
    const inbox = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch }).createInbox();
    const t0 = Date.now();
    assert.deepEqual((await inbox.list()).items, []);
    assert.ok(Date.now() - t0 >= 1000);
    const strict = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch, maxRetryAfter: 500 }).createInbox();
    reads = 0;
    await assert.rejects(strict.list(), RateLimitedError);
    assert.equal(reads, 1);
  });

  test("a wait outlives it; since 'now' starts when the first list is answered", { timeout: 10_000 }, async () => {
    // The first list meets a 429 asking for 30 s; meanwhile `before` arrives,
    // so the list that answers holds it: it is not new. `after` arrives once
    // the wait has started and is returned.
    const before = summary('31111111-2222-4333-8444-555555555555', 'Your code');
    const after = summary('41111111-2222-4333-8444-555555555555', 'Your code');
    let lists = 0;
    const srv = scripted((method, path, init) => {
      if (path.startsWith('/messages?')) {
        lists++;
        if (lists === 1) return apiError(429, 'RATE_LIMITED', { 'retry-after': '30' });
        return listOf(lists === 2 ? [before] : [after, before]);
      }
      if (path === '/events') return sse([': ping\n\n'], init.signal, true);
      const m = path.match(/^\/messages\/([0-9a-f-]+)$/);
      if (m) return json(200, { data: { message: { ...summary(m[1], 'Your code'), text_body: `code ${m[1].slice(0, 1)}23456`, html_body: '' } } });
      return undefined;
    });
    const inbox = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch }).createInbox();
    const t0 = Date.now();
    const msg = await inbox.waitForMessage({ since: 'now', subject: /Your code/, timeout: 8000 });
    assert.equal(msg.id, after.id);
    assert.ok(Date.now() - t0 < 3000, `took ${Date.now() - t0} ms`);
  });
});

describe('waiting', () => {
  test('a message deleted between the list and its read is passed over; the predicate gets the full message', async () => {
    const deleted = summary('51111111-2222-4333-8444-555555555555', 'Your code');
    const kept = summary('61111111-2222-4333-8444-555555555555', 'Your code');
    const seen = [];
    const srv = scripted((method, path, init) => {
      if (path.startsWith('/messages?')) return listOf([kept, deleted]); // newest first
      if (path === '/events') return sse([': ping\n\n'], init.signal, true);
      if (path === `/messages/${deleted.id}`) return apiError(404, 'MESSAGE_NOT_FOUND');
      if (path === `/messages/${kept.id}`) return json(200, { data: { message: { ...kept, text_body: 'code 777888', html_body: '<p>code 777888</p>' } } });
      return undefined;
    });
    const inbox = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch }).createInbox();
    const msg = await inbox.waitForMessage({ match: (m) => { seen.push(m); return m.html_body.includes('777888'); }, timeout: 3000 });
    assert.equal(msg.id, kept.id);
    assert.deepEqual(seen.map((m) => [m.id, m.text_body]), [[kept.id, 'code 777888']]);
  });
});

describe('gone', () => {
  const every = (inbox) => ({
    select: () => inbox.select(),
    current: () => inbox.current(),
    extend: () => inbox.extend(1),
    delete: () => inbox.delete(),
    list: () => inbox.list(),
    message: () => inbox.message(ID),
    deleteMessage: () => inbox.deleteMessage(ID),
    waitForMessage: () => inbox.waitForMessage({ timeout: 1000 }),
    messages: async () => { for await (const _ of inbox.messages()) { /* none */ } },
    events: async () => { for await (const _ of inbox.events()) { /* none */ } },
  });

  test('any 401 on a call made with the inbox cookies: every method fails with InboxGoneError, no request sent', async () => {
    for (const answer of [
      () => apiError(401, 'MAILBOX_CREDENTIAL_INVALID'),
      () => apiError(401, 'MAILBOX_SESSION_REQUIRED'),
      () => new Response('Unauthorized', { status: 401 }), // not even the envelope (a proxy)
    ]) {
      const srv = scripted((method, path) => (path.startsWith('/messages?') ? answer() : undefined));
      const inbox = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch }).createInbox();
      await assert.rejects(inbox.list(), (err) => err instanceof InboxGoneError && err.status === 401);
      const sent = srv.log.length;
      for (const [name, call] of Object.entries(every(inbox))) {
        await assert.rejects(call(), InboxGoneError, name);
      }
      assert.equal(srv.log.length, sent, 'a request was sent after the inbox was known gone');
    }
  });

  test('a 401 on the first select, a 404 MAILBOX_NOT_FOUND on select: gone', async () => {
    for (const answer of [() => apiError(401, 'MAILBOX_SESSION_INVALID'), () => apiError(404, 'MAILBOX_NOT_FOUND')]) {
      const srv = scripted((method, path) => (path.endsWith('/select') ? answer() : undefined));
      await assert.rejects(new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch }).createInbox(), InboxGoneError);
    }
  });

  test('a 401 on the event stream ends a wait with InboxGoneError', async () => {
    const srv = scripted((method, path) => {
      if (path === '/events') return apiError(401, 'MAILBOX_SESSION_REQUIRED');
      if (path.startsWith('/messages?')) return listOf([]);
      return undefined;
    });
    const inbox = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch }).createInbox();
    await assert.rejects(inbox.waitForMessage({ timeout: 5000 }), InboxGoneError);
    await assert.rejects(inbox.list(), InboxGoneError);
  });
});
