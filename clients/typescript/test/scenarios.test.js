// The scenarios of clients/SCENARIOS.md against a real stack: a Redis
// Cluster (MAYFLY_TEST_REDIS_ADDRS) and `bin/mayfly all`, mail sent over
// SMTP. Each test names its scenario id.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  Mayfly, createClient, code, links,
  InboxGoneError, WaitTimeoutError, MayflyError, StreamBusyError,
} from '../dist/index.js';
import { Stack, stackUnavailable } from './stack.js';
import { sendMail } from './smtp.js';

const skip = stackUnavailable(); // throws when there is no stack: the suite fails, never skips
const stack = new Stack();

/** A fetch that counts what it sends and the statuses it gets. */
function countingFetch() {
  const c = { requests: 0, statuses: [], creations: [] };
  c.fetch = async (url, init) => {
    c.requests++;
    const r = await fetch(url, init);
    c.statuses.push(r.status);
    if (init?.method === 'POST' && url.endsWith('/mailboxes')) c.creations.push(r.status);
    return r;
  };
  return c;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Waits until cond() holds, checking every 20 ms; fails after ms. */
async function eventually(cond, ms, what) {
  for (const end = Date.now() + ms; !cond(); await sleep(20)) {
    if (Date.now() > end) assert.fail(`not within ${ms} ms: ${what}`);
  }
}

/**
 * Sleeps until 20 ms into the next whole second. The stack's request rate
 * (8 a second per IP) counts whole seconds of its clock, this machine's: a
 * burst that starts there meets one window's limit, where after a sleep of
 * a fixed length it could straddle two windows and pass each (12 at once,
 * 6 and 6).
 */
const freshSecond = () => sleep(1020 - (Date.now() % 1000));

/**
 * A raw request as another program would make it: the suite's stack allows
 * 8 requests a second per IP, and the test before may have used them up, so
 * a 429 is waited out (its Retry-After, else 1 s), up to 10 times.
 */
async function rawFetch(url, init) {
  for (let i = 0; ; i++) {
    const r = await fetch(url, init);
    if (r.status !== 429 || i === 10) return r;
    await r.arrayBuffer();
    await sleep(1000 * (Number(r.headers.get('retry-after')) || 1));
  }
}

describe('scenarios', { skip }, () => {
  let mayfly;
  before(async () => {
    await stack.start();
    mayfly = new Mayfly({ baseUrl: stack.baseUrl });
  });
  after(async () => {
    await stack.stop();
  });

  test('signup-flow: create, mail a code over SMTP, wait by subject, code(), delete', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 5 });
    assert.match(inbox.address, /^[^@]+@mayfly\.test$/);
    const waiting = inbox.waitForMessage({ subject: /Your code/, timeout: 20_000 });
    await sendMail(stack.smtp, { to: inbox.address, subject: 'Your code', text: 'Welcome! Your code is 482913.' });
    const msg = await waiting;
    assert.equal(msg.subject, 'Your code');
    assert.equal(msg.status, 'ready');
    assert.equal(code(msg), '482913');
    await inbox.delete();
    await assert.rejects(inbox.list(), InboxGoneError);
  });

  test('resend-code: the same wait twice returns the second code', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 5 });
    await sendMail(stack.smtp, { to: inbox.address, subject: 'Your code', text: 'code 111111' });
    const first = await inbox.waitForMessage({ subject: /Your code/, timeout: 20_000 });
    assert.equal(code(first), '111111');
    await sendMail(stack.smtp, { to: inbox.address, subject: 'Your code', text: 'code 222222' });
    const second = await inbox.waitForMessage({ subject: /Your code/, timeout: 20_000 });
    assert.equal(code(second), '222222');
    assert.notEqual(second.id, first.id);
    // since 'now' leaves out what is there; a message id and a time select what came after.
    await assert.rejects(inbox.waitForMessage({ since: 'now', timeout: 1000 }), WaitTimeoutError);
    assert.equal((await inbox.waitForMessage({ since: first.id, timeout: 5000 })).id, second.id);
    assert.equal((await inbox.waitForMessage({ since: new Date(Date.parse(first.received_at)), timeout: 5000 })).id, second.id);
    await inbox.delete();
  });

  test('parallel-creates: 12 creations at once from one client all succeed', async () => {
    const c = countingFetch();
    const client = createClient({ baseUrl: stack.baseUrl, fetch: c.fetch });
    await freshSecond();
    const inboxes = await Promise.all(Array.from({ length: 12 }, () => client.createInbox({ lifetimeMinutes: 1 })));
    assert.equal(new Set(inboxes.map((i) => i.address)).size, 12);
    await Promise.all(inboxes.map((i) => i.delete()));
    // 12 POST /mailboxes at once against 8 requests per second: creations
    // themselves met request-rate 429s, and those were retried, not surfaced.
    assert.ok(c.creations.includes(429), `creation statuses ${c.creations}`);
    assert.equal(c.creations.filter((s) => s === 201).length, 12, `creation statuses ${c.creations}`);
  });

  test('edge-restart-mid-wait: the wait survives the node stopping for 3 s', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 5 });
    const t0 = Date.now();
    const waiting = inbox.waitForMessage({ subject: /after restart/, timeout: 40_000 });
    let settled = false;
    waiting.then(() => { settled = true; }, () => { settled = true; });
    await sleep(700); // the stream is open
    await stack.stop();
    await assert.rejects(fetch(stack.baseUrl + '/domains'), 'the port refuses connections');
    await sleep(3000);
    assert.equal(settled, false);
    await stack.start();
    await sendMail(stack.smtp, { to: inbox.address, subject: 'after restart', text: 'code 555444' });
    const msg = await waiting;
    assert.equal(code(msg), '555444');
    console.log(`# edge-restart-mid-wait: returned ${Date.now() - t0} ms after the wait began`);
    await inbox.delete();
  });

  test('deleted-inbox-every-call: every method fails with InboxGoneError, no request sent', async () => {
    const c = countingFetch();
    const client = new Mayfly({ baseUrl: stack.baseUrl, fetch: c.fetch });
    const inbox = await client.createInbox({ lifetimeMinutes: 1 });
    await inbox.delete();
    const sent = c.requests;
    const calls = {
      select: () => inbox.select(),
      current: () => inbox.current(),
      extend: () => inbox.extend(1),
      list: () => inbox.list(),
      message: () => inbox.message('0b5e2a7c-3f1d-4e8a-9c6b-7d2e1f0a4b93'),
      deleteMessage: () => inbox.deleteMessage('0b5e2a7c-3f1d-4e8a-9c6b-7d2e1f0a4b93'),
      waitForMessage: () => inbox.waitForMessage({ timeout: 1000 }),
      waitForMessages: () => inbox.waitForMessages(1, { timeout: 1000 }),
      // Nothing can arrive in a gone inbox: that is no pass.
      expectNoMessage: () => inbox.expectNoMessage({ within: 1000 }),
      messages: async () => { for await (const _ of inbox.messages()) { /* none */ } },
      pages: async () => { for await (const _ of inbox.pages()) { /* none */ } },
      events: async () => { for await (const _ of inbox.events()) { /* none */ } },
    };
    for (const [name, call] of Object.entries(calls)) {
      await assert.rejects(call(), (err) => err instanceof InboxGoneError && err instanceof MayflyError, name);
    }
    assert.equal(await inbox.delete(), false, 'delete() is idempotent: gone is success');
    assert.equal(c.requests, sent, 'a request was sent after delete()');

    // Gone as the service says it: the inbox deleted behind this object's
    // back (with its own cookie, replayed raw) gives 401 MAILBOX_SESSION_INVALID.
    let cookie;
    const spy = new Mayfly({
      baseUrl: stack.baseUrl,
      fetch: (url, init) => { cookie = init?.headers?.cookie ?? cookie; return fetch(url, init); },
    });
    const other = await spy.createInbox({ lifetimeMinutes: 1 });
    await other.current();
    const raw = await rawFetch(stack.baseUrl + '/mailboxes/current', { method: 'DELETE', headers: { cookie } });
    assert.equal(raw.status, 204);
    await raw.arrayBuffer();
    await assert.rejects(other.current(), (err) => err instanceof InboxGoneError && err.code === 'MAILBOX_SESSION_INVALID');
    await assert.rejects(other.list(), InboxGoneError);
    await assert.rejects(other.waitForMessage({ timeout: 1000 }), InboxGoneError);
  });

  test('rate-limit-429-retried: more calls at once than 8 per second all succeed', async () => {
    const c = countingFetch();
    const client = new Mayfly({ baseUrl: stack.baseUrl, fetch: c.fetch });
    const inbox = await client.createInbox({ lifetimeMinutes: 1 });
    await freshSecond();
    const pages = await Promise.all(Array.from({ length: 20 }, () => inbox.list({ limit: 5 })));
    assert.equal(pages.length, 20);
    for (const p of pages) assert.deepEqual(p.items, []);
    assert.ok(c.statuses.filter((s) => s === 429).length >= 1, `statuses ${c.statuses}`);
    await inbox.delete();
  });

  test('html-only-link-and-code: links() unescapes the href, code() finds the code in the HTML', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 5 });
    const html = '<html><body><p>Your code is <b>739201</b>.</p>' +
      '<p><a href="https://app.example/verify?token=abc&amp;user=42">Verify your address</a></p></body></html>';
    await sendMail(stack.smtp, { to: inbox.address, subject: 'Verify', html });
    // The predicate sees the full message: the HTML body (there is no text body to match with `text`).
    const msg = await inbox.waitForMessage({ subject: /^Verify$/, match: (m) => m.html_body.includes('token=abc'), timeout: 20_000 });
    assert.match(msg.html_body, /&amp;user=42/);
    const got = links(msg);
    assert.ok(got.includes('https://app.example/verify?token=abc&user=42'), `links ${JSON.stringify(got)}`);
    assert.equal(got.filter((u) => u.startsWith('https://app.example/verify')).length, 1);
    assert.equal(code(msg), '739201');
    await inbox.delete();
  });

  test('replaced stream: another program opens a stream on the inbox; the wait warns, polls, and does not take it back', async () => {
    let cookie;
    let streams = 0;
    const logged = [];
    const client = new Mayfly({
      baseUrl: stack.baseUrl,
      fetch: async (url, init) => {
        cookie = init?.headers?.cookie ?? cookie;
        const res = await fetch(url, init);
        // Streams opened, not attempts: a request-rate 429 left over from
        // the test before (8/s per IP) is retried, and is not a stream.
        if (new URL(url).pathname.endsWith('/events') && res.status === 200) streams++;
        return res;
      },
      logger: (event, fields, level) => logged.push({ event, level }),
    });
    const inbox = await client.createInbox({ lifetimeMinutes: 2 });
    const waiting = inbox.waitForMessage({ subject: /beside/, timeout: 20_000 });
    waiting.catch(() => {}); // awaited below; no unhandled rejection if an assertion fails first
    // Its stream opens after its first list, which a request-rate 429 left
    // by the test before can hold back past any fixed delay.
    await eventually(() => streams === 1, 10_000, 'the wait opened its stream');
    // Another program, with a copy of the jar, follows the same inbox.
    const other = new AbortController();
    const raw = await rawFetch(stack.baseUrl + '/events', { headers: { cookie, accept: 'text/event-stream' }, signal: other.signal });
    assert.equal(raw.status, 200);
    await sleep(500);
    const warns = logged.filter((l) => l.level === 'warn');
    assert.equal(warns.length, 1, JSON.stringify(logged));
    assert.match(warns[0].event, /another client opened one on this inbox/);
    const t0 = Date.now();
    await sendMail(stack.smtp, { to: inbox.address, subject: 'beside', text: 'code 246810' });
    const msg = await waiting;
    assert.equal(code(msg), '246810');
    assert.ok(Date.now() - t0 < 7000, `found by polling after ${Date.now() - t0} ms`);
    assert.equal(streams, 1, 'the wait opened the stream again within the minute');
    // The other program's stream was not cut off: it got the message too.
    const reader = raw.body.getReader();
    const dec = new TextDecoder();
    let text = '';
    const until = Date.now() + 5000;
    while (!text.includes(msg.id) && Date.now() < until) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value, { stream: true });
    }
    assert.ok(text.includes('event: message.received') && text.includes(msg.id), `the other stream: ${text}`);
    assert.ok(!text.includes('replaced'), `the other stream was replaced: ${text}`);
    other.abort();
    await inbox.delete();
  });

  test('wait-timeout: a 2 s wait on an empty inbox fails after about 2 s', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 1 });
    const t0 = Date.now();
    await assert.rejects(inbox.waitForMessage({ timeout: 2000 }), WaitTimeoutError);
    const took = Date.now() - t0;
    assert.ok(took >= 2000 && took < 4000, `took ${took} ms`);
    // The stream is released: another wait may run.
    await assert.rejects(inbox.waitForMessage({ timeout: 300 }), WaitTimeoutError);
    await inbox.delete();
  });

  test('cancellation: aborting a wait ends it at once with the AbortSignal reason', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 1 });
    const ctl = new AbortController();
    const t0 = Date.now();
    setTimeout(() => ctl.abort(), 500);
    await assert.rejects(inbox.waitForMessage({ timeout: 20_000, signal: ctl.signal }), (err) => err.name === 'AbortError');
    const took = Date.now() - t0;
    assert.ok(took >= 450 && took < 1500, `took ${took} ms`);
    // One stream per Inbox: a second consumer while one runs is refused.
    const ctl2 = new AbortController();
    const it = inbox.events({ signal: ctl2.signal })[Symbol.asyncIterator]();
    const first = it.next();
    await sleep(200);
    await assert.rejects(inbox.waitForMessage({ timeout: 1000 }), StreamBusyError);
    ctl2.abort();
    await assert.rejects(first, (err) => err.name === 'AbortError');
    await inbox.delete();
  });

  test('events() yields new messages in order; deleting the inbox ends it with InboxGoneError', async () => {
    // events() yields what arrives after its first list, which a
    // request-rate 429 can hold back past any fixed delay: the mail goes
    // out once it opens the stream, after that list.
    let opened = 0;
    const client = new Mayfly({
      baseUrl: stack.baseUrl,
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        if (new URL(url).pathname.endsWith('/events') && res.status === 200) opened++;
        return res;
      },
    });
    const inbox = await client.createInbox({ lifetimeMinutes: 5 });
    const ctl = new AbortController();
    const got = [];
    const done = (async () => {
      for await (const ev of inbox.events({ signal: ctl.signal })) {
        got.push(ev);
        if (got.length === 2) break;
      }
    })();
    await eventually(() => opened === 1, 10_000, 'events() opened its stream');
    await sendMail(stack.smtp, { to: inbox.address, subject: 'one', text: 'x' });
    await sendMail(stack.smtp, { to: inbox.address, subject: 'two', text: 'y' });
    await done;
    assert.deepEqual(got.map((e) => e.message.subject), ['one', 'two']);
    assert.equal(got[0].type, 'message.received');
    const all = [];
    for await (const m of inbox.messages({ pageSize: 1 })) all.push(m.subject);
    assert.deepEqual(all, ['two', 'one']);
    const ext = await inbox.extend(5);
    assert.ok(Date.parse(ext.expires_at) > Date.now() + 5 * 60_000);
    // Deleting the inbox ends a running events() with InboxGoneError.
    const it = inbox.events()[Symbol.asyncIterator]();
    const next = it.next();
    await sleep(300);
    await inbox.delete();
    await assert.rejects(next, InboxGoneError);
  });
});
