// The rules of clients/SCENARIOS.md that a real stack cannot trigger on
// demand (a Retry-After over 10 s, a 401 other than the session's, a replaced
// stream watched for a whole minute), against a scripted server: a fake fetch
// that answers as the API does and records every request. The timing of the
// replaced-stream pause runs on node:test's mock timers.

import { describe, test, mock } from 'node:test';
import assert from 'node:assert/strict';
import {
  Mayfly, InboxGoneError, RateLimitedError, MayflyError, REPLACED_PAUSE, SessionInvalidError, WaitTimeoutError,
  UnreachableError, CreationLimitError,
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
      for await (const ev of inbox.events({ signal: ctl.signal, timeout: 120_000 })) got.push({ ...ev, at: Date.now() });
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
      assert.equal(await inbox.delete(), false, 'delete() of a gone inbox: success, it did not exist');
      assert.equal(inbox.gone, true);
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

// The contract's round-3 rules (clients/SCENARIOS.md), on the scripted
// server; each also runs against the real stack in scenarios.test.js.
describe('round 3 rules', () => {
  const refusedFetch = (srv) => async (url, init) => {
    if (new URL(url).pathname !== '/v1/mailboxes' && !url.endsWith('/select') && srv.down) {
      throw new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' }) });
    }
    return srv.fetch(url, init);
  };

  test('a timeout under 100 ms is a RangeError naming milliseconds; the default wait is 20 s', { timeout: 10_000 }, async (t) => {
    assert.throws(() => new Mayfly({ baseUrl: 'http://api.example/v1', waitTimeout: 20 }), (err) => err instanceof RangeError && /milliseconds/.test(err.message));
    const srv = scripted((method, path, init) => {
      if (path === '/events') return sse(['retry: 3000\n\n'], init.signal, true);
      if (path.startsWith('/messages?')) return listOf([]);
      return undefined;
    });
    const inbox = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch }).createInbox();
    for (const call of [
      () => inbox.waitForMessage({ timeout: 5 }), () => inbox.waitForMessages(2, { timeout: 20 }),
      () => inbox.expectNoMessage({ within: 3 }), () => inbox.list({ timeout: 1 }),
      async () => { for await (const _ of inbox.events({ timeout: 30 })) { /* none */ } },
    ]) {
      await assert.rejects(call(), (err) => err instanceof RangeError && /milliseconds/.test(err.message));
    }
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
    t.after(() => mock.timers.reset());
    const t0 = Date.now();
    const waiting = inbox.waitForMessage().catch((err) => err);
    const ending = (async () => { for await (const _ of new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch }).restore(inbox.state()).events()) { /* none */ } })().catch((err) => err);
    for (let i = 0; i < 210; i++) {
      mock.timers.tick(100);
      await flush();
    }
    const err = await waiting;
    assert.ok(err instanceof WaitTimeoutError, String(err));
    assert.match(err.message, /within 20000 ms; no message arrived/);
    assert.ok(Date.now() - t0 >= 20_000);
    assert.ok((await ending) instanceof WaitTimeoutError, 'events() ends at the default timeout too');
  });

  test('a 429 without a code (a proxy) is retried like RATE_LIMITED', async () => {
    let n = 0;
    const srv = scripted((method, path) => {
      if (path.startsWith('/messages?') && n++ < 2) return new Response('Too Many Requests', { status: 429, headers: { 'retry-after': '0' } });
      if (path.startsWith('/messages?')) return listOf([]);
      return undefined;
    });
    const inbox = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch }).createInbox();
    assert.deepEqual((await inbox.list()).items, []);
    assert.equal(n, 3);
  });

  test('gone is session invalid; delete() is idempotent (a 401 or 404 is success, false)', async () => {
    for (const answer of [() => apiError(401, 'MAILBOX_SESSION_INVALID'), () => apiError(404, 'MAILBOX_NOT_FOUND')]) {
      const srv = scripted((method, path) => (method === 'DELETE' ? answer() : undefined));
      const inbox = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch }).createInbox();
      assert.equal(inbox.gone, false);
      assert.equal(await inbox.delete(), false);
      assert.equal(inbox.gone, true);
      await assert.rejects(inbox.list(), (err) => err instanceof InboxGoneError && err instanceof SessionInvalidError);
    }
    const srv = scripted((method) => (method === 'DELETE' ? new Response(null, { status: 204 }) : undefined));
    const inbox = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch }).createInbox();
    assert.equal(await inbox.delete(), true);
    const sent = srv.log.length;
    assert.equal(await inbox.delete(), false);
    assert.equal(srv.log.length, sent);
  });

  test('errors name the method and the URL, never a cookie', async () => {
    const srv = scripted((method, path) => (path.startsWith('/messages?') ? apiError(400, 'INVALID_PAGINATION') : undefined));
    const inbox = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch, maxAttempts: 1 }).createInbox();
    await assert.rejects(inbox.list({ limit: 5 }), (err) => {
      assert.match(err.message, /GET http:\/\/api\.example\/v1\/messages\?limit=5&offset=0: 400 INVALID_PAGINATION: .* \(request req-1\)/);
      assert.ok(!err.message.includes('scoped') && !err.message.includes('sess'), err.message);
      return true;
    });
    const srv2 = scripted(() => undefined);
    srv2.down = true;
    const inbox2 = await new Mayfly({ baseUrl: 'http://api.example/v1', fetch: refusedFetch(srv2), maxAttempts: 1 }).createInbox();
    await assert.rejects(inbox2.current(), /GET http:\/\/api\.example\/v1\/mailboxes\/current: connection refused \(connect ECONNREFUSED 127\.0\.0\.1:9\)/);
  });

  test('the wait timeout explains: none arrived, N arrived and none matched, unreachable; then UnreachableError after 10 s', { timeout: 20_000 }, async (t) => {
    const other = summary('22222222-2222-4333-8444-555555555555', 'Welcome aboard');
    const srv = scripted((method, path, init) => {
      if (path === '/events') return sse(['retry: 3000\n\n'], init.signal, true);
      if (path.startsWith('/messages?')) return listOf(srv.items ?? []);
      if (path.startsWith('/messages/')) return json(200, { data: { message: { ...other, text_body: 'hi', html_body: '' } } });
      return undefined;
    });
    const client = new Mayfly({ baseUrl: 'http://api.example/v1', fetch: refusedFetch(srv), logger: () => {} });
    const inbox = await client.createInbox();
    await assert.rejects(inbox.waitForMessage({ timeout: 300 }), /no matching message within 300 ms; no message arrived/);
    srv.items = [other];
    await assert.rejects(inbox.waitForMessage({ subject: /code/, timeout: 300 }), /1 message arrived, none matched \(first: "Welcome aboard"\)/);
    srv.down = true;
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
    t.after(() => mock.timers.reset());
    const short = inbox.waitForMessage({ timeout: 3000 }).catch((err) => err);
    for (let i = 0; i < 40; i++) {
      mock.timers.tick(100);
      await flush();
    }
    const e1 = await short;
    assert.ok(e1 instanceof WaitTimeoutError, String(e1));
    assert.match(e1.message, /the service at http:\/\/api\.example\/v1 has been unreachable for \d+\.\d s \(last error: GET http:\/\/api\.example\/v1\/\S+: connection refused/);
    const t0 = Date.now();
    let at;
    const long = inbox.waitForMessage({ timeout: 60_000 }).catch((err) => { at = Date.now(); return err; });
    for (let i = 0; i < 150; i++) {
      mock.timers.tick(100);
      await flush();
    }
    const e2 = await long;
    assert.ok(e2 instanceof UnreachableError && e2 instanceof MayflyError, String(e2));
    assert.ok(at - t0 >= 10_000 && at - t0 < 11_000, `after ${at - t0} ms`);
    assert.match(e2.message, /http:\/\/api\.example\/v1 has been unreachable for 10\.\d s: every attempt failed \(last error: GET http/);
  });

  test('waitForCapacity waits out Retry-After within the timeout; without it the limit is thrown at once', async () => {
    let refusals = 0;
    const srv = scripted((method, path) => {
      if (method === 'POST' && path === '/mailboxes' && srv.limit > 0) {
        srv.limit--;
        refusals++;
        return apiError(429, 'CREATION_RATE_LIMITED', { 'retry-after': '1' });
      }
      return undefined;
    });
    const client = new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch });
    srv.limit = 1;
    await assert.rejects(client.createInbox(), CreationLimitError);
    srv.limit = 1;
    const t0 = Date.now();
    const inbox = await client.createInbox({ waitForCapacity: true, timeout: 5000 });
    assert.ok(Date.now() - t0 >= 1000, `created after ${Date.now() - t0} ms`);
    assert.equal(inbox.address, MAILBOX.address);
    srv.limit = 10;
    await assert.rejects(client.createInbox({ waitForCapacity: true, timeout: 1500 }), CreationLimitError);
    assert.equal(refusals, 2 + 1 + 1, 'the second Retry-After (1 s) would pass the 1.5 s timeout: thrown');
  });

  test("expectNoMessage: a timeout or the inbox's deadline before the window's end is the wait timeout, not success", async () => {
    const srv = scripted((method, path, init) => {
      if (path === '/events') return sse(['retry: 3000\n\n'], init.signal, true);
      if (path.startsWith('/messages?')) return listOf([]);
      return undefined;
    });
    const client = new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch });
    const inbox = await client.createInbox({ deadline: Date.now() + 400 });
    await assert.rejects(inbox.expectNoMessage({ within: 5000 }), (err) => err instanceof WaitTimeoutError && /before the end of the 5000 ms window/.test(err.message));
    const other = await client.createInbox();
    await assert.rejects(other.expectNoMessage({ within: 5000, timeout: 300 }), WaitTimeoutError);
    const t0 = Date.now();
    await other.expectNoMessage({ within: 300 });
    assert.ok(Date.now() - t0 >= 300);
  });

  test('state() and restore(): the jar, the seen ids and gone, no request', async () => {
    const kept = summary('33333333-2222-4333-8444-555555555555', 'first');
    const srv = scripted((method, path) => {
      if (path.startsWith('/messages?')) return listOf([kept]);
      if (path.startsWith('/messages/')) return json(200, { data: { message: { ...kept, text_body: 'x', html_body: '' } } });
      return undefined;
    });
    const client = new Mayfly({ baseUrl: 'http://api.example/v1', fetch: srv.fetch });
    const inbox = await client.createInbox();
    await inbox.waitForMessage({ timeout: 1000 });
    const st = JSON.parse(JSON.stringify(inbox.state()));
    assert.equal(st.version, 1);
    assert.equal(st.base, 'http://api.example/v1');
    assert.deepEqual(st.mailbox, MAILBOX);
    assert.deepEqual(st.cookies.map((c) => [c.name, c.value, c.path]).sort(), [[`mayfly_${ID.replaceAll('-', '')}`, 'scoped', '/v1'], ['service_session', 'sess', '/v1']]);
    assert.deepEqual(st.seen, [kept.id]);
    assert.equal(st.gone, undefined);
    const sent = srv.log.length;
    const again = new Mayfly({ baseUrl: 'http://api.example/v1/', fetch: srv.fetch }).restore(JSON.stringify(st));
    assert.equal(srv.log.length, sent, 'restore sent a request');
    assert.equal(again.address, MAILBOX.address);
    await assert.rejects(again.waitForMessage({ timeout: 300 }), WaitTimeoutError); // the one message was seen
    const last = srv.log[srv.log.length - 1];
    assert.match(last.cookie, /service_session=sess/);
    assert.throws(() => new Mayfly({ baseUrl: 'http://other.example/v1' }).restore(st), /the state is for http:\/\/api\.example\/v1/);
    assert.throws(() => client.restore({ ...st, version: 2 }), /version 2/);
    await inbox.delete();
    const gone = client.restore(inbox.state());
    assert.equal(gone.gone, true);
    await assert.rejects(gone.list(), InboxGoneError);
  });
});
