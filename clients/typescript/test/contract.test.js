// The round-3 scenarios of clients/SCENARIOS.md (issues 27 and 30) against
// a real stack: a Redis Cluster (MAYFLY_TEST_REDIS_ADDRS), `bin/mayfly all`
// (its own, so that stopping it disturbs no other suite), mail over SMTP.
// Each test's title starts with its scenario id.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  Mayfly, code, codes, links, linksWithText, InboxGoneError, SessionInvalidError, WaitTimeoutError, MayflyError,
  UnreachableError, UnexpectedMessageError, CreationLimitError, SharedInbox,
} from '../dist/index.js';
import { Stack, stackUnavailable } from './stack.js';
import { sendMail } from './smtp.js';

stackUnavailable(); // throws: the suite fails, never skips
const stack = new Stack();
const pkgDir = fileURLToPath(new URL('..', import.meta.url));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const UNKNOWN = '0b5e2a7c-3f1d-4e8a-9c6b-7d2e1f0a4b93';

/** Runs a node script; resolves {code, stdout, stderr}. */
function run(args, { input, env, cwd } = {}) {
  return new Promise((resolve) => {
    const all = { ...process.env, ...env };
    delete all.NODE_TEST_CONTEXT; // a node --test child reports to its parent, not on stdout
    const p = spawn(process.execPath, args, { env: all, cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('close', (code) => resolve({ code, stdout, stderr }));
    p.stdin.end(input ?? '');
  });
}

/** The cookie values of an inbox (from its state), to check no error shows one. */
const cookieValues = (inbox) => inbox.state().cookies.map((c) => c.value);

describe('contract scenarios', () => {
  let mayfly;
  before(async () => {
    await stack.start();
    mayfly = new Mayfly({ baseUrl: stack.baseUrl, logger: () => {} });
  });
  after(async () => {
    await stack.stop();
  });

  test('default-timeout: a wait given no timeout ends after 20 s with WaitTimeoutError; under 100 ms is a RangeError', { timeout: 40_000 }, async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 2 });
    const t0 = Date.now();
    const waiting = inbox.waitForMessage({ subject: /never/ }).then(() => undefined, (err) => err);
    await assert.rejects(inbox.list({ timeout: 20 }), (err) => err instanceof RangeError && /milliseconds/.test(err.message));
    const err = await waiting;
    const took = Date.now() - t0;
    assert.ok(err instanceof WaitTimeoutError, String(err));
    assert.match(err.message, /within 20000 ms/);
    assert.ok(took >= 20_000 && took < 23_000, `took ${took} ms`);
    await assert.rejects(inbox.waitForMessage({ timeout: 20 }), (e) => e instanceof RangeError && /milliseconds/.test(e.message));
    assert.throws(() => new Mayfly({ baseUrl: stack.baseUrl, waitTimeout: 30 }), RangeError);
    await inbox.delete();
  });

  test('failed-message-returned: a message the service could not parse (status failed) is returned by a wait', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 2 });
    const raw = [
      '  leading continuation line makes the header unreadable',
      'From: Eve <eve@example.org>',
      'Subject: Cannot be parsed',
      'Content-Type: text/plain',
      '',
      'This body is never shown.',
    ].join('\r\n');
    await sendMail(stack.smtp, { to: inbox.address, raw });
    const msg = await inbox.waitForMessage({ subject: /Cannot be parsed/, timeout: 15_000 });
    assert.equal(msg.status, 'failed');
    assert.equal(msg.text_body, '');
    await inbox.delete();
  });

  test('since-unknown-id: a wait since an id not in the inbox fails with MayflyError MESSAGE_NOT_FOUND', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 2 });
    await assert.rejects(inbox.waitForMessage({ since: UNKNOWN, timeout: 5000 }),
      (err) => err.constructor === MayflyError && err.code === 'MESSAGE_NOT_FOUND' && err.message.includes(UNKNOWN));
    await inbox.delete();
  });

  test('429-without-code-retried: a 429 with no error code (a proxy in front) is retried, not surfaced', async (t) => {
    // A real HTTP proxy before the stack: its first two message lists get a bare 429.
    let bare = 0;
    const proxy = http.createServer(async (req, res) => {
      if (req.url.startsWith('/v1/messages') && bare < 2) {
        bare++;
        res.writeHead(429, { 'content-type': 'text/plain' }).end('Too Many Requests');
        return;
      }
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const up = await fetch(`http://${stack.http}${req.url}`, {
        method: req.method, headers: { cookie: req.headers.cookie ?? '', 'content-type': req.headers['content-type'] ?? 'application/json' },
        body: chunks.length ? Buffer.concat(chunks) : undefined,
      });
      const headers = { 'content-type': up.headers.get('content-type') ?? '' };
      if (up.headers.getSetCookie().length) headers['set-cookie'] = up.headers.getSetCookie();
      res.writeHead(up.status, headers).end(Buffer.from(await up.arrayBuffer()));
    });
    await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
    t.after(() => proxy.close());
    const client = new Mayfly({ baseUrl: `http://127.0.0.1:${proxy.address().port}/v1`, logger: () => {} });
    const inbox = await client.createInbox({ lifetimeMinutes: 1 });
    const page = await inbox.list();
    assert.deepEqual(page.items, []);
    assert.equal(bare, 2, 'both bare 429s were met and retried');
    await inbox.delete();
  });

  test('gone-is-session-invalid: an inbox deleted elsewhere fails with InboxGoneError, which is a SessionInvalidError', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 1 });
    const other = new Mayfly({ baseUrl: stack.baseUrl }).restore(inbox.state());
    assert.equal(await other.delete(), true);
    await assert.rejects(inbox.current(), (err) => err instanceof InboxGoneError && err instanceof SessionInvalidError && err instanceof MayflyError && err.status === 401);
  });

  test('extend-returns-mailbox: extend(minutes) returns the Mailbox with its later expiry', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 2 });
    const before = Date.parse(inbox.mailbox.expires_at);
    const m = await inbox.extend(3);
    assert.equal(m.id, inbox.id);
    assert.equal(m.address, inbox.address);
    assert.ok(Date.parse(m.expires_at) > before + 2 * 60_000, `${m.expires_at} vs ${inbox.mailbox.expires_at}`);
    assert.ok(Date.parse(m.expires_at) <= Date.parse(m.max_expires_at), 'never past max_expires_at');
    assert.deepEqual(inbox.mailbox, m);
    await inbox.delete();
  });

  test('events-timeout: events({timeout}) ends with WaitTimeoutError at its timeout', async () => {
    // The mail is sent once events() has started, i.e. when it opens the
    // stream (after its first list): mail from before that is not yielded,
    // and a fixed delay races that first list on a loaded machine.
    let sent;
    const fetchSpy = (url, init) => {
      if (sent === undefined && String(url).endsWith('/events')) {
        sent = sendMail(stack.smtp, { to: inbox.address, subject: 'during', text: 'x' });
      }
      return fetch(url, init);
    };
    const spied = new Mayfly({ baseUrl: stack.baseUrl, logger: () => {}, fetch: fetchSpy });
    const inbox = await spied.createInbox({ lifetimeMinutes: 2 });
    const got = [];
    const t0 = Date.now();
    await assert.rejects((async () => { for await (const ev of inbox.events({ timeout: 4000 })) got.push(ev.message.subject); })(),
      (err) => err instanceof WaitTimeoutError && /timeout of 4000 ms passed; 1 message yielded/.test(err.message));
    const took = Date.now() - t0;
    assert.ok(took >= 4000 && took < 6000, `took ${took} ms`);
    await sent;
    assert.deepEqual(got, ['during']);
    await inbox.delete();
  });

  test('gone-getter: inbox.gone is false while it lives, true after delete() or once the service says it is gone', async () => {
    const a = await mayfly.createInbox({ lifetimeMinutes: 1 });
    assert.equal(a.gone, false);
    await a.delete();
    assert.equal(a.gone, true);
    const b = await mayfly.createInbox({ lifetimeMinutes: 1 });
    await new Mayfly({ baseUrl: stack.baseUrl }).restore(b.state()).delete();
    assert.equal(b.gone, false, 'not known yet: no request since');
    await assert.rejects(b.list(), InboxGoneError);
    assert.equal(b.gone, true);
  });

  test('state-round-trip: state() restores in another client and in another process (test/state-tool.mjs), seen ids kept', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 3 });
    await sendMail(stack.smtp, { to: inbox.address, subject: 'one', text: 'code 111222' });
    assert.equal((await inbox.waitForMessage({ timeout: 15_000 })).subject, 'one');
    // Another process: restores, waits for the next unseen message, prints the new state.
    const tool = run([path.join(pkgDir, 'test', 'state-tool.mjs'), '15'], { input: JSON.stringify(inbox.state()) });
    await sleep(500);
    await sendMail(stack.smtp, { to: inbox.address, subject: 'two', text: 'code 333444' });
    const out = await tool;
    assert.equal(out.code, 0, out.stderr);
    const line = JSON.parse(out.stdout.trim());
    assert.equal(line.subject, 'two', 'the restored seen ids left out "one"');
    assert.equal(line.state.seen.length, 2);
    assert.equal(line.state.mailbox.id, inbox.id);
    // Back in this process from the tool's state: both are seen; a third is what comes next.
    const back = new Mayfly({ baseUrl: stack.baseUrl }).restore(line.state);
    await sendMail(stack.smtp, { to: inbox.address, subject: 'three', text: 'x' });
    assert.equal((await back.waitForMessage({ timeout: 15_000 })).subject, 'three');
    // The tool fails with exit 1 and the error on stderr.
    const bad = await run([path.join(pkgDir, 'test', 'state-tool.mjs'), '1'], { input: JSON.stringify({ ...inbox.state(), version: 9 }) });
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /version 9/);
    assert.equal(await back.delete(), true);
  });

  test('links-with-text: linksWithText() gives each link with its anchor text ("" for a bare link)', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 2 });
    const html = '<p>Hello</p><p><a href="https://app.example/verify?t=abc&amp;u=42">Verify <b>your address</b></a> or ' +
      '<a href="https://app.example/stop">unsubscribe</a></p>';
    await sendMail(stack.smtp, { to: inbox.address, subject: 'Verify', text: 'Verify: https://app.example/plain', html });
    const msg = await inbox.waitForMessage({ subject: /^Verify$/, timeout: 15_000 });
    const got = linksWithText(msg);
    assert.deepEqual(got, [
      { url: 'https://app.example/plain', text: '' },
      { url: 'https://app.example/verify?t=abc&u=42', text: 'Verify your address' },
      { url: 'https://app.example/stop', text: 'unsubscribe' },
    ]);
    assert.deepEqual(links(msg), got.map((l) => l.url));
    assert.equal(got.find((l) => l.text === 'Verify your address').url, 'https://app.example/verify?t=abc&u=42');
    await inbox.delete();
  });

  test('code-prefers-keyword: "Order #2026 placed 2026-11-24 … Your verification code is 482913" gives 482913', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 2 });
    await sendMail(stack.smtp, {
      to: inbox.address, subject: 'Order #2026',
      text: 'Order #2026 placed 2026-11-24 for 3 items.\nYour verification code is 482913.\nThanks!',
    });
    const msg = await inbox.waitForMessage({ subject: /Order/, timeout: 15_000 });
    assert.equal(code(msg), '482913');
    assert.deepEqual(codes(msg), ['2026', '2026', '482913']);
    assert.equal(code(msg, /placed (\d{4})/), '2026', 'a custom pattern: the first match, group 1');
    await inbox.delete();
  });

  test('wait-count: waitForMessages(3) returns three matching messages, oldest first, and marks them seen', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 2 });
    const waiting = inbox.waitForMessages(3, { subject: /^code/, timeout: 15_000 });
    await sendMail(stack.smtp, { to: inbox.address, subject: 'code A', text: '1111' });
    await sendMail(stack.smtp, { to: inbox.address, subject: 'other', text: 'x' });
    await sendMail(stack.smtp, { to: inbox.address, subject: 'code B', text: '2222' });
    await sendMail(stack.smtp, { to: inbox.address, subject: 'code C', text: '3333' });
    const got = await waiting;
    assert.deepEqual(got.map((m) => m.subject), ['code A', 'code B', 'code C']);
    await sendMail(stack.smtp, { to: inbox.address, subject: 'code D', text: '4444' });
    assert.equal((await inbox.waitForMessage({ subject: /^code/, timeout: 15_000 })).subject, 'code D', 'A, B and C were marked seen');
    await assert.rejects(inbox.waitForMessages(2, { subject: /^code/, timeout: 1500 }),
      (err) => err instanceof WaitTimeoutError && /1 message arrived, none matched \(first: "other"\)/.test(err.message));
    await inbox.delete();
  });

  test('expect-no-message: succeeds when nothing new matches within the window; a matching mail fails it with UnexpectedMessageError', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 2 });
    await sendMail(stack.smtp, { to: inbox.address, subject: 'Your code', text: 'code 123456' });
    await inbox.waitForMessage({ subject: /Your code/, timeout: 15_000 });
    const t0 = Date.now();
    await inbox.expectNoMessage({ subject: /Your code/, within: 2000 }); // the one already returned does not count
    assert.ok(Date.now() - t0 >= 2000);
    const expecting = inbox.expectNoMessage({ subject: /Your code/, within: 15_000 });
    await sendMail(stack.smtp, { to: inbox.address, subject: 'Your code', text: 'code 654321' });
    await assert.rejects(expecting, (err) => err instanceof UnexpectedMessageError && code(err.received) === '654321' && /a matching message arrived/.test(err.message));
    assert.ok(Date.now() - t0 < 12_000, 'it failed as the mail came, not at the end of the window');
    await inbox.delete();
  });

  test('wait-for-capacity: with the active cap reached, createInbox() fails at once; {waitForCapacity: true} waits until one is deleted', async (t) => {
    const capped = new Stack({ MAYFLY_RATE_ACTIVE_PER_IP: '1' });
    await capped.start();
    t.after(() => capped.stop());
    const client = new Mayfly({ baseUrl: capped.baseUrl, logger: () => {} });
    const first = await client.createInbox({ lifetimeMinutes: 1 });
    const t0 = Date.now();
    await assert.rejects(client.createInbox(), (err) => err instanceof CreationLimitError && err.code === 'ACTIVE_INBOX_LIMIT');
    assert.ok(Date.now() - t0 < 1000, 'the default fails at once');
    const waiting = client.createInbox({ lifetimeMinutes: 1, waitForCapacity: true, timeout: 10_000 });
    await sleep(1500);
    await first.delete();
    const second = await waiting;
    assert.ok(Date.now() - t0 >= 1500);
    assert.notEqual(second.id, first.id);
    await assert.rejects(client.createInbox({ waitForCapacity: true, timeout: 1500 }), CreationLimitError, 'past its timeout: the limit error');
    await second.delete();
  });

  test('runner-fixture: the Playwright fixture (@mayfly/client/playwright) runs a spec with a real inbox and deletes it after', { timeout: 120_000 }, async (t) => {
    const cli = path.join(pkgDir, 'node_modules', '@playwright', 'test', 'cli.js');
    assert.ok(existsSync(cli), '@playwright/test is a devDependency: npm ci installs it');
    const dir = mkdtempSync(path.join(tmpdir(), 'mayfly-pw-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const report = path.join(dir, 'report.json');
    const out = await run([cli, 'test', '--config', path.join(pkgDir, 'test', 'playwright', 'playwright.config.mjs'), '--output', dir, 'fixture.spec'], {
      cwd: pkgDir, env: { MAYFLY_URL: stack.baseUrl, MAYFLY_SMTP: stack.smtp, PW_JSON_REPORT: report, CI: '1' },
    });
    assert.equal(out.code, 0, out.stdout + out.stderr);
    const stats = JSON.parse(readFileSync(report, 'utf8')).stats;
    assert.equal(stats.expected, 3, JSON.stringify(stats));
    assert.equal(stats.unexpected + stats.skipped + stats.flaky, 0, JSON.stringify(stats));
    // The fixture deleted the test's inbox after it.
    const state = /STATE (\{.*\})/.exec(out.stdout);
    assert.ok(state, out.stdout);
    const after = new Mayfly({ baseUrl: stack.baseUrl }).restore(state[1]);
    await assert.rejects(after.current(), InboxGoneError);
  });

  test('shared-inbox-fixture: the default Playwright fixture `recipient` gives three tests three tagged addresses of one shared inbox (one creation)', { timeout: 120_000 }, async (t) => {
    const cli = path.join(pkgDir, 'node_modules', '@playwright', 'test', 'cli.js');
    const dir = mkdtempSync(path.join(tmpdir(), 'mayfly-pw-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const report = path.join(dir, 'report.json');
    const before = await stack.creations();
    const out = await run([cli, 'test', '--config', path.join(pkgDir, 'test', 'playwright', 'playwright.config.mjs'), '--output', dir, 'recipient.spec'], {
      cwd: pkgDir, env: { MAYFLY_URL: stack.baseUrl, MAYFLY_SMTP: stack.smtp, PW_JSON_REPORT: report, CI: '1' },
    });
    assert.equal(out.code, 0, out.stdout + out.stderr);
    const stats = JSON.parse(readFileSync(report, 'utf8')).stats;
    assert.equal(stats.expected, 3, JSON.stringify(stats));
    assert.equal(stats.unexpected + stats.skipped + stats.flaky, 0, JSON.stringify(stats));
    const lines = [...out.stdout.matchAll(/RECIPIENT (\S+) (\S+) (\d+)/g)];
    assert.equal(lines.length, 3, out.stdout);
    assert.equal(new Set(lines.map((l) => l[1])).size, 3, 'three different addresses');
    assert.equal(new Set(lines.map((l) => l[2])).size, 1, 'one inbox');
    assert.deepEqual(lines.map((l) => l[3]), ['1', '1', '1'], 'created once');
    assert.equal(await stack.creations(), before + 1, 'one creation on the service');
  });

  test('shared-inbox-replaced: a shared inbox whose cap is within 5 minutes is replaced (one creation, the old deleted); one whose expiry is near is extended (no creation)', async () => {
    let skew = 0;
    const shared = new SharedInbox(mayfly, { inbox: { lifetimeMinutes: 10 }, now: () => Date.now() + skew });
    const c0 = await stack.creations();
    const first = await shared.recipient('first test');
    assert.equal(await stack.creations(), c0 + 1);
    assert.match(first.tag, /^first-test-[a-z0-9]{10}$/);
    const old = first.inbox.state();
    // The clock 56 minutes on: the 60-minute cap is within 5 minutes.
    skew = 56 * 60_000;
    const second = await shared.recipient('second test');
    assert.notEqual(second.inbox.id, first.inbox.id, 'a new inbox');
    assert.equal(await stack.creations(), c0 + 2, 'one creation');
    await assert.rejects(new Mayfly({ baseUrl: stack.baseUrl }).restore(old).current(), InboxGoneError, 'the old inbox is deleted');
    await sendMail(stack.smtp, { to: second.address, subject: 'Your code', text: 'Your code is 246810.' });
    assert.equal(code(await second.waitForMessage({ subject: /Your code/, timeout: 15_000 })), '246810');
    // The clock 6 minutes on: the inbox expires within 5 minutes, its cap is far.
    skew = 6 * 60_000;
    const expires = Date.parse(second.inbox.mailbox.expires_at);
    const third = await shared.recipient('third test');
    assert.equal(third.inbox.id, second.inbox.id, 'the same inbox');
    assert.equal(await stack.creations(), c0 + 2, 'no creation');
    assert.ok(Date.parse(third.inbox.mailbox.expires_at) > expires, 'extended');
    assert.equal(shared.creations, 2);
    await shared.close();
    assert.equal(third.inbox.gone, true);
  });

  test('creation-limit-explains: a spent creation window fails at once (one request), naming the window, the wait and the way out', async (t) => {
    const limited = new Stack({ MAYFLY_RATE_CREATE_PER_MINUTE: '1' });
    await limited.start();
    t.after(() => limited.stop());
    let posts = 0;
    const client = new Mayfly({
      baseUrl: limited.baseUrl, logger: () => {},
      fetch: (url, init) => {
        if (init?.method === 'POST' && String(url).endsWith('/mailboxes')) posts++;
        return fetch(url, init);
      },
    });
    const first = await client.createInbox({ lifetimeMinutes: 1 });
    posts = 0;
    const t0 = Date.now();
    const err = await client.createInbox().then(() => undefined, (e) => e);
    assert.ok(err instanceof CreationLimitError, String(err));
    assert.equal(err.code, 'CREATION_RATE_LIMITED');
    assert.equal(posts, 1, 'no retry: one request');
    assert.ok(Date.now() - t0 < 1000, 'at once');
    assert.ok(err.retryAfter > 0 && err.retryAfter <= 60, String(err.retryAfter));
    assert.match(err.message, /this IP's creations of the minute are spent/);
    assert.match(err.message, new RegExp(`retry in ${err.retryAfter} s`));
    assert.match(err.message, /a test suite can share one inbox and give each test its own address \(a shared inbox and tagged addresses: see the client's README\)/);
    assert.match(err.message, /^mayfly: POST http:\/\/.*\/v1\/mailboxes: 429 CREATION_RATE_LIMITED: /);
    // A shared inbox raises it as it is, and its next hand-outs do not try again before the Retry-After.
    const shared = new SharedInbox(client);
    posts = 0;
    await assert.rejects(shared.recipient('a'), (e) => e instanceof CreationLimitError && /retry in \d+ s/.test(e.message));
    await assert.rejects(shared.recipient('b'), CreationLimitError);
    assert.equal(posts, 1, 'one attempt for both hand-outs');
    await first.delete();
  });

  test('recipient-scoped-wait: a wait scoped to A never returns B\'s mail; expectNoMessage and events scoped likewise', { timeout: 60_000 }, async () => {
    // streamOpened() resolves at the next GET /events: the events() below
    // has started then (its first list is answered), so mail sent from
    // there on is yielded; a fixed delay races that list on a loaded machine.
    let onStream;
    const streamOpened = () => new Promise((resolve) => { onStream = resolve; });
    const fetchSpy = (url, init) => {
      if (onStream !== undefined && String(url).endsWith('/events')) {
        onStream();
        onStream = undefined;
      }
      return fetch(url, init);
    };
    const inbox = await new Mayfly({ baseUrl: stack.baseUrl, logger: () => {}, fetch: fetchSpy }).createInbox({ lifetimeMinutes: 5 });
    const a = inbox.recipient('alpha');
    const b = inbox.recipient('beta.2_x-y');
    assert.equal(inbox.addressFor('alpha'), a.address);
    assert.equal(a.address, inbox.address.replace('@', '+alpha@'));
    assert.equal(a.tag, 'alpha');
    assert.equal(a.inbox, inbox);
    for (const bad of ['', 'a b', 'a+b', 'é', 'x'.repeat(65), 'x'.repeat(64 - inbox.address.indexOf('@'))]) {
      assert.throws(() => inbox.addressFor(bad), RangeError, JSON.stringify(bad));
      assert.throws(() => inbox.recipient(bad), RangeError, JSON.stringify(bad));
    }
    // B's mail first, then the inbox's own address, then A's with the same subject.
    await sendMail(stack.smtp, { to: b.address, subject: 'Your code', text: 'Your code is 222222.' });
    await sendMail(stack.smtp, { to: inbox.address, subject: 'Your code', text: 'Your code is 333333.' });
    await sendMail(stack.smtp, { to: a.address, subject: 'Your code', text: 'Your code is 111111.' });
    const got = await a.waitForMessage({ subject: /Your code/, timeout: 15_000 });
    assert.equal(code(got), '111111');
    assert.equal(got.to, a.address.toLowerCase());
    // Not failed by mail to B.
    const quiet = a.expectNoMessage({ within: 2000 });
    await sleep(300);
    await sendMail(stack.smtp, { to: b.address, subject: 'Your code', text: 'Your code is 444444.' });
    await quiet;
    // Events scoped to B: mail to A then to B; only B's is yielded.
    const opened = streamOpened();
    const events = b.events({ timeout: 20_000 });
    const next = events.next();
    await opened;
    await sendMail(stack.smtp, { to: a.address, subject: 'Your code', text: 'Your code is 555555.' });
    await sendMail(stack.smtp, { to: b.address, subject: 'Your code', text: 'Your code is 666666.' });
    const ev = await next;
    assert.equal(ev.done, false);
    assert.equal(ev.value.message.to, b.address.toLowerCase());
    assert.equal(code(await inbox.message(ev.value.message.id)), '666666');
    await events.return();
    // The option `to` on the inbox (any case): B's first mail.
    const first = await inbox.waitForMessage({ to: b.address.toUpperCase(), subject: /Your code/, timeout: 15_000 });
    assert.equal(code(first), '222222');
    // Mail to the inbox's own address carries it.
    const own = (await inbox.list()).items.filter((m) => m.to === inbox.address.toLowerCase());
    assert.equal(own.length, 1);
    assert.equal(code(await inbox.message(own[0].id)), '333333');
    await inbox.delete();
  });

  test('delete-idempotent: delete() is true once, then false with no request; deleted elsewhere: false', async () => {
    let requests = 0;
    const client = new Mayfly({ baseUrl: stack.baseUrl, fetch: (u, i) => { requests++; return fetch(u, i); } });
    const inbox = await client.createInbox({ lifetimeMinutes: 1 });
    assert.equal(await inbox.delete(), true);
    const sent = requests;
    assert.equal(await inbox.delete(), false);
    assert.equal(requests, sent, 'no request for an inbox known gone');
    const b = await client.createInbox({ lifetimeMinutes: 1 });
    await new Mayfly({ baseUrl: stack.baseUrl }).restore(b.state()).delete();
    assert.equal(await b.delete(), false, 'deleted elsewhere: success, it did not exist');
    assert.equal(b.gone, true);
  });

  test('error-names-url: errors name the method and URL, the status, code and request id, never a cookie', async () => {
    // A base URL without /v1.
    const bare = new Mayfly({ baseUrl: `http://${stack.http}` });
    await assert.rejects(bare.createInbox(), (err) => {
      assert.match(err.message, new RegExp(`POST http://${stack.http}/mailboxes: 404 \\S+: .*\\(request [^-)]`), err.message);
      return err.status === 404;
    });
    // An error answer on a call with the inbox's cookies.
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 1 });
    await assert.rejects(inbox.message('not-a-uuid'), (err) => {
      assert.match(err.message, new RegExp(`GET ${stack.baseUrl}/messages/not-a-uuid: 400 INVALID_UUID: `), err.message);
      for (const v of cookieValues(inbox)) assert.ok(!err.message.includes(v), 'a cookie value in the error');
      return true;
    });
    // No answer at all.
    const s = net.createServer();
    await new Promise((r) => s.listen(0, '127.0.0.1', r));
    const closed = `http://127.0.0.1:${s.address().port}/v1`;
    await new Promise((r) => s.close(r));
    await assert.rejects(new Mayfly({ baseUrl: closed, maxAttempts: 1 }).createInbox(),
      new RegExp(`POST ${closed}/mailboxes: connection refused \\(connect ECONNREFUSED`));
    await inbox.delete();
  });

  test('wait-timeout-explains: the wait timeout says no message arrived, or N arrived and none matched (the first subject)', async () => {
    const inbox = await mayfly.createInbox({ lifetimeMinutes: 2 });
    await assert.rejects(inbox.waitForMessage({ subject: /code/, timeout: 1500 }),
      (err) => err instanceof WaitTimeoutError && /no matching message within 1500 ms; no message arrived/.test(err.message));
    await sendMail(stack.smtp, { to: inbox.address, subject: 'Welcome aboard', text: 'hi' });
    await sendMail(stack.smtp, { to: inbox.address, subject: 'Newsletter', text: 'hi' });
    await sleep(500);
    await assert.rejects(inbox.waitForMessage({ subject: /code/, timeout: 2000 }),
      (err) => err instanceof WaitTimeoutError && /2 messages arrived, none matched \(first: "Welcome aboard"\)/.test(err.message));
    await inbox.delete();
  });

  test('wait-unreachable: with the service down, a wait says for how long and the last error at its timeout, and fails with UnreachableError after 10 s', { timeout: 60_000 }, async () => {
    const a = await mayfly.createInbox({ lifetimeMinutes: 3 });
    const b = await mayfly.createInbox({ lifetimeMinutes: 3 });
    await stack.stop();
    try {
      const t0 = Date.now();
      const short = a.waitForMessage({ timeout: 3000 }).then(() => undefined, (err) => err);
      const long = b.waitForMessage({ timeout: 40_000 }).then(() => undefined, (err) => [err, Date.now() - t0]);
      const e1 = await short;
      assert.ok(e1 instanceof WaitTimeoutError, String(e1));
      assert.match(e1.message, new RegExp(`the service at ${stack.baseUrl} has been unreachable for \\d+\\.\\d s \\(last error: GET ${stack.baseUrl}/\\S+: connection refused`));
      const [e2, took] = await long;
      assert.ok(e2 instanceof UnreachableError && e2 instanceof MayflyError, String(e2));
      assert.ok(took >= 10_000 && took < 13_000, `after ${took} ms`);
      assert.match(e2.message, new RegExp(`${stack.baseUrl} has been unreachable for 1\\d\\.\\d s: every attempt failed \\(last error: GET ${stack.baseUrl}/`));
    } finally {
      await stack.start();
    }
    await a.delete();
    await b.delete();
  });

  test('README examples run as written: signup.test.mjs (import) and signup.test.cjs (require)', { timeout: 60_000 }, async () => {
    const env = { MAYFLY_URL: stack.baseUrl, MAYFLY_SMTP: stack.smtp };
    for (const f of ['signup.test.mjs', 'signup.test.cjs']) {
      const out = await run(['--test', f], { cwd: path.join(pkgDir, 'examples'), env });
      assert.equal(out.code, 0, `${f}: ${out.stdout}${out.stderr}`);
      assert.match(out.stdout, /# pass 1/);
    }
    const readme = readFileSync(path.join(pkgDir, 'README.md'), 'utf8');
    const example = readFileSync(path.join(pkgDir, 'examples', 'signup.test.mjs'), 'utf8');
    assert.ok(readme.includes('```js\n' + example + '```'), 'the README shows examples/signup.test.mjs as it is');
  });
});
