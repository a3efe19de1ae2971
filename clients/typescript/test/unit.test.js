// Unit tests of the pure logic: the SSE parser, the cookie jar, the
// Set-Cookie split of old Node versions, links() and code().

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { SSEParser, CookieJar, parseSetCookie, setCookieValues, links, linksWithText, code, codes, htmlText, htmlUnescape } from '../dist/index.js';
import { Mayfly, MayflyError } from '../dist/index.js';

describe('SSEParser', () => {
  test('the API stream: retry, heartbeat, one event', () => {
    const p = new SSEParser();
    const evs = p.push('retry: 3000\n\n: ping\n\nevent: message.received\nid: 9b2f\ndata: {"id":"9b2f"}\n\n');
    assert.equal(p.retry, 3000);
    assert.deepEqual(evs, [{ event: 'message.received', data: '{"id":"9b2f"}', id: '9b2f' }]);
  });

  test('chunks split anywhere give the same events', () => {
    const stream = 'event: a\r\ndata: 1\r\ndata: 2\r\n\r\n: c\r\nevent: b\rdata:3\r\rdata: x\n\n';
    const whole = new SSEParser().push(stream);
    assert.deepEqual(whole, [
      { event: 'a', data: '1\n2', id: '' },
      { event: 'b', data: '3', id: '' },
      { event: 'message', data: 'x', id: '' },
    ]);
    for (let i = 0; i <= stream.length; i++) {
      for (let j = i; j <= stream.length; j += 3) {
        const p = new SSEParser();
        const got = [...p.push(stream.slice(0, i)), ...p.push(stream.slice(i, j)), ...p.push(stream.slice(j))];
        assert.deepEqual(got, whole, `split at ${i}, ${j}`);
      }
    }
  });

  test('an event without data is not dispatched; an unfinished event waits', () => {
    const p = new SSEParser();
    assert.deepEqual(p.push('event: x\n\ndata: half'), []);
    assert.deepEqual(p.push('\n\n'), [{ event: 'message', data: 'half', id: '' }]);
  });

  test('a line without end past the bound is an error', () => {
    const p = new SSEParser();
    assert.throws(() => p.push('data: ' + 'x'.repeat(1 << 20)), /over/);
  });
});

describe('CookieJar', () => {
  const base = 'http://api.example:8080/v1';
  const future = new Date(Date.now() + 3600_000).toUTCString();

  test('host-only, Path=/v1, sent back on /v1 only', () => {
    const j = new CookieJar(base);
    j.store(base + '/mailboxes', [`mayfly_0b5e2a7c3f1d4e8a9c6b7d2e1f0a4b93=s3cret; Path=/v1; Expires=${future}; HttpOnly; SameSite=Lax`]);
    assert.equal(j.header('http://api.example:8080/v1/mailboxes/x/select'), 'mayfly_0b5e2a7c3f1d4e8a9c6b7d2e1f0a4b93=s3cret');
    assert.equal(j.header('http://api.example:8080/v10/x'), '');
    assert.equal(j.header('http://api.example:8080/'), '');
    assert.equal(j.header('http://other.example:8080/v1/messages'), '');
    j.store('http://other.example/v1', ['a=b; Path=/v1']);
    assert.deepEqual(j.names(), ['mayfly_0b5e2a7c3f1d4e8a9c6b7d2e1f0a4b93']);
  });

  test('Secure only over https', () => {
    const j = new CookieJar('https://api.example/v1');
    j.store('https://api.example/v1/mailboxes', ['service_session=v; Path=/v1; Secure']);
    assert.equal(j.header('https://api.example/v1/messages'), 'service_session=v');
    assert.equal(j.header('http://api.example/v1/messages'), '');
  });

  test('Expires and Max-Age: expired cookies go, Max-Age wins, replaced by name', () => {
    let now = Date.parse('2066-01-01T00:00:00Z');
    const j = new CookieJar(base, () => now);
    j.store(base, ['a=1; Path=/v1; Max-Age=60; Expires=Thu, 01 Jan 1970 00:00:00 GMT', 'b=2; Path=/v1; Expires=Thu, 01 Jan 1970 00:00:00 GMT']);
    assert.equal(j.header(base + '/x'), 'a=1');
    now += 61_000;
    assert.equal(j.header(base + '/x'), '');
    j.store(base, ['c=1; Path=/v1', 'c=2; Path=/v1']);
    assert.equal(j.header(base + '/x'), 'c=2');
    j.store(base, ['c=; Path=/v1; Max-Age=0']);
    assert.equal(j.header(base + '/x'), '');
  });

  test('Domain naming another host is refused; default path', () => {
    const u = new URL('http://api.example/v1/mailboxes');
    assert.equal(parseSetCookie('a=b; Domain=evil.example', u, 0), undefined);
    assert.equal(parseSetCookie('a=b', u, 0).path, '/v1');
    assert.equal(parseSetCookie('=b', u, 0), undefined);
  });

  test('setCookieValues splits a joined header (Node before 18.14) without breaking Expires', () => {
    const h = new Headers();
    h.append('set-cookie', 'a=1; Path=/v1; Expires=Mon, 23 Nov 2026 17:00:00 GMT; HttpOnly');
    h.append('set-cookie', 'service_session=2; Path=/v1');
    const joined = { get: (n) => h.get(n) }; // no getSetCookie
    assert.deepEqual(setCookieValues(joined), [
      'a=1; Path=/v1; Expires=Mon, 23 Nov 2026 17:00:00 GMT; HttpOnly',
      'service_session=2; Path=/v1',
    ]);
    assert.deepEqual(setCookieValues(h), setCookieValues(joined));
    assert.deepEqual(setCookieValues(new Headers()), []);
  });
});

// The cases of code(), codes(), links() and linksWithText() are shared with
// the Go and Python clients' unit tests (clients/testdata), so the three
// cannot drift apart.
const testdata = (name) => JSON.parse(readFileSync(new URL(`../../testdata/${name}`, import.meta.url), 'utf8')).cases;

describe('code and codes (clients/testdata/codes.json)', () => {
  const cases = testdata('codes.json');
  test('the table has cases', () => assert.ok(cases.length > 0));
  for (const c of cases) {
    test(c.name, () => {
      assert.equal(code(c.message, c.pattern), c.code ?? undefined);
      if (c.pattern === undefined) assert.deepEqual(codes(c.message), c.codes);
    });
  }
});

describe('links and linksWithText (clients/testdata/links.json)', () => {
  const cases = testdata('links.json');
  test('the table has cases', () => assert.ok(cases.length > 0));
  for (const c of cases) {
    test(c.name, () => {
      assert.deepEqual(linksWithText(c.message), c.links_with_text);
      assert.deepEqual(links(c.message), c.links_with_text.map((l) => l.url));
    });
  }
});

describe('links and code', () => {
  test('code: a custom pattern given as a string or a global RegExp starts at 0', () => {
    assert.equal(code({ text_body: 'PIN 0042' }, 'PIN (\\d+)'), '0042');
    const g = /\d{3}/g;
    g.lastIndex = 99;
    assert.equal(code({ text_body: 'a 123' }, g), '123', 'a global pattern starts at 0');
  });

  test('htmlText and htmlUnescape', () => {
    assert.equal(htmlUnescape('&lt;a&gt; &amp;amp; &#65;&#x42; &bogus; &quot; &region=1 &#0;'), '<a> &amp; AB &bogus; " &region=1 \ufffd');
    assert.equal(htmlText('<p>a<br>b</p>').replace(/\s+/g, ' ').trim(), 'a b');
  });
});

describe('Mayfly', () => {
  test('a bad base URL is refused', () => {
    assert.throws(() => new Mayfly({ baseUrl: 'ftp://x/v1' }), MayflyError);
    assert.throws(() => new Mayfly({ baseUrl: 'not a url' }), MayflyError);
  });

  test('connection refused: retried with backoff up to maxAttempts, then thrown', async () => {
    let n = 0;
    const client = new Mayfly({
      baseUrl: 'http://127.0.0.1:1/v1', maxAttempts: 3, baseDelay: 10,
      fetch: async () => { n++; throw new TypeError('fetch failed', { cause: Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }) }); },
    });
    await assert.rejects(client.createInbox(), (err) => err instanceof MayflyError && /refused/.test(err.message));
    assert.equal(n, 3);
  });

  test('creation is not retried after a reset; a creation limit is thrown at once with retryAfter', async () => {
    let n = 0;
    const reset = new Mayfly({
      baseUrl: 'http://127.0.0.1:1/v1', baseDelay: 10,
      fetch: async () => { n++; throw new TypeError('fetch failed', { cause: Object.assign(new Error('reset'), { code: 'ECONNRESET' }) }); },
    });
    await assert.rejects(reset.createInbox(), MayflyError);
    assert.equal(n, 1);
    n = 0;
    const limited = new Mayfly({
      baseUrl: 'http://127.0.0.1:1/v1',
      fetch: async () => {
        n++;
        return new Response(JSON.stringify({ error: { code: 'CREATION_RATE_LIMITED', message: 'slow down' }, request_id: 'r1' }),
          { status: 429, headers: { 'retry-after': '42', 'content-type': 'application/json' } });
      },
    });
    const { CreationLimitError } = await import('../dist/index.js');
    await assert.rejects(limited.createInbox(), (err) => err instanceof CreationLimitError && err.retryAfter === 42 && err.requestId === 'r1' && err.status === 429);
    assert.equal(n, 1);
  });

  test('a Secure cookie over plain http: a clear error, not a 401 later', async () => {
    const client = new Mayfly({
      baseUrl: 'http://api.example/v1',
      fetch: async () => new Response(JSON.stringify({ data: { mailbox: { id: '0b5e2a7c-3f1d-4e8a-9c6b-7d2e1f0a4b93', address: 'a@b' } } }),
        { status: 201, headers: { 'set-cookie': 'mayfly_0b5e2a7c3f1d4e8a9c6b7d2e1f0a4b93=x; Path=/v1; Secure' } }),
    });
    await assert.rejects(client.createInbox(), (err) => err instanceof MayflyError && /MAYFLY_COOKIE_SECURE=false/.test(err.message) && !/=x/.test(err.message));
  });

  test('a safe read retries 503 DEPENDENCY_UNAVAILABLE; the signal stops the retries at once', async () => {
    const { RateLimitedError } = await import('../dist/index.js');
    let n = 0;
    const answers = [];
    const client = new Mayfly({
      baseUrl: 'http://api.example/v1', baseDelay: 10,
      fetch: async (url, init) => {
        n++;
        if (init.method === 'POST' && url.endsWith('/mailboxes')) {
          return new Response(JSON.stringify({ data: { mailbox: { id: '0b5e2a7c-3f1d-4e8a-9c6b-7d2e1f0a4b93', address: 'a@b' } } }),
            { status: 201, headers: { 'set-cookie': 'mayfly_0b5e2a7c3f1d4e8a9c6b7d2e1f0a4b93=x; Path=/v1' } });
        }
        if (url.endsWith('/select')) {
          return new Response(JSON.stringify({ data: { mailbox: { id: '0b5e2a7c-3f1d-4e8a-9c6b-7d2e1f0a4b93', address: 'a@b' } } }),
            { status: 200, headers: { 'set-cookie': 'service_session=y; Path=/v1' } });
        }
        const a = answers.shift() ?? [429, 'RATE_LIMITED'];
        if (a[0] === 200) return new Response(JSON.stringify({ data: { items: [], pagination: { limit: 20, offset: 0, has_more: false } } }));
        return new Response(JSON.stringify({ error: { code: a[1], message: 'x' }, request_id: 'r' }), { status: a[0], headers: { 'retry-after': '1' } });
      },
    });
    const inbox = await client.createInbox();
    n = 0;
    answers.push([503, 'DEPENDENCY_UNAVAILABLE'], [500, 'INTERNAL'], [200]);
    assert.deepEqual((await inbox.list()).items, []);
    assert.equal(n, 3);
    // PATCH is not retried on 500.
    n = 0;
    answers.push([500, 'INTERNAL']);
    await assert.rejects(inbox.extend(1), (err) => err.status === 500);
    assert.equal(n, 1);
    // 429 RATE_LIMITED waits Retry-After; abort ends the wait at once.
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(), 100);
    const t0 = Date.now();
    await assert.rejects(inbox.list({ signal: ctl.signal }), (err) => err.name === 'AbortError');
    assert.ok(Date.now() - t0 < 500);
    // A call's timeout: when the next wait would pass it, the last error at once.
    const t1 = Date.now();
    await assert.rejects(inbox.list({ timeout: 500 }), (err) => err instanceof RateLimitedError && err.retryAfter === 1);
    assert.ok(Date.now() - t1 < 400, `took ${Date.now() - t1} ms`);
    // After every attempt: RateLimitedError.
    const quick = new Mayfly({ baseUrl: 'http://api.example/v1', maxAttempts: 1, fetch: async () => new Response('{"error":{"code":"RATE_LIMITED","message":"x"},"request_id":"r"}', { status: 429, headers: { 'retry-after': '1' } }) });
    await assert.rejects(quick.createInbox(), RateLimitedError);
  });

  test('an answer without the API envelope is named and explained, no request id made up (error-names-url, unit)', async () => {
    const other = new Mayfly({
      baseUrl: 'http://api.example/v1',
      fetch: async () => new Response('404 page not found', { status: 404, statusText: 'Not Found', headers: { 'content-type': 'text/plain' } }),
    });
    await assert.rejects(other.createInbox(), (err) => {
      assert.ok(err instanceof MayflyError && err.status === 404 && err.code === undefined, String(err));
      assert.equal(err.message, "mayfly: POST http://api.example/v1/mailboxes: 404: Not Found: not an answer of the Mayfly API (is the base URL the API's, ending in /v1?)");
      return true;
    });
  });
});
