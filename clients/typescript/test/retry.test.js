// The shared tables of clients/SCENARIOS.md, case by case: the retry rules
// (clients/testdata/retry.json) against the pure retry function, the
// event-stream parsing rules (sse.json) against the SSE parser. No stack.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { SSEParser } from '../dist/index.js';
import { retryDelay } from '../dist/retry.js';

const table = (name) => JSON.parse(readFileSync(new URL(`../../testdata/${name}`, import.meta.url), 'utf8'));

describe('the retry rules (clients/testdata/retry.json)', () => {
  const { policy: p, cases } = table('retry.json');
  const policy = { baseMs: p.base_ms, capMs: p.cap_ms, maxAttempts: p.max_attempts, maxRetryAfterMs: p.max_retry_after_s * 1000, jitterMs: p.jitter_ms };
  assert.ok(cases.length >= 40);
  for (const c of cases) {
    test(c.name, () => {
      const failure = c.transport !== undefined ? { transport: c.transport } : { status: c.status, code: c.code ?? undefined, retryAfter: c.retry_after };
      // The two ends of the draw: the least and the most the jitter or the backoff can give.
      for (const r of [0, 1 - 1e-9, 0.5]) {
        const got = retryDelay(failure, c.kind, c.attempt, c.remaining_ms, policy, () => r);
        if (c.want === 'give_up') {
          assert.equal(got, undefined, `random ${r}: want give up, got a wait of ${got} ms`);
        } else {
          assert.notEqual(got, undefined, `random ${r}: want a retry, got give up`);
          const [lo, hi] = c.wait_ms;
          assert.ok(got >= lo && got <= hi, `random ${r}: wait ${got} ms, want [${lo}, ${hi}]`);
        }
      }
    });
  }
});

describe('the event-stream parser (clients/testdata/sse.json)', () => {
  for (const c of table('sse.json').cases) {
    test(c.name, () => {
      const comments = [];
      const parser = new SSEParser({ onComment: (t) => comments.push(t) });
      const events = c.chunks.flatMap((chunk) => parser.push(chunk));
      assert.deepEqual(events.map(({ event, data, id }) => ({ event, data, id })), c.events);
      assert.deepEqual(comments, c.comments);
      assert.equal(parser.retry ?? null, c.retry);
    });
  }
});

describe("the event stream's retry: (a fake SSE server)", () => {
  test('after a stream ends, the first reconnect waits its last retry: plus up to 250 ms', async () => {
    const http = await import('node:http');
    const { Mayfly } = await import('../dist/index.js');
    const opens = []; // when each GET /events came, and when the first ended
    let ended = 0;
    const mailbox = { id: '0b5e2a7c-3f1d-4e8a-9c6b-7d2e1f0a4b93', address: 'abc@mayfly.test', kind: 'temporary', expires_at: null, max_expires_at: null };
    const server = http.createServer((req, res) => {
      const json = (data) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ data }));
      };
      if (req.url.startsWith('/v1/events')) {
        opens.push(Date.now());
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        if (opens.length === 1) {
          // The stream's retry, then (a restart) its end.
          res.write(': hello\nretry: 900\nretry: 1500\n\n');
          setTimeout(() => {
            ended = Date.now();
            res.end();
          }, 100);
        } else res.write(': hello\n\n');
        return;
      }
      if (req.url.startsWith('/v1/messages')) return json({ items: [], pagination: { limit: 100, offset: 0, has_more: false } });
      if (req.url.startsWith('/v1/mailboxes/current')) return json({ mailbox });
      res.writeHead(404).end();
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${server.address().port}/v1`;
    try {
      const inbox = new Mayfly({ baseUrl: base, logger: () => {} }).restore({ version: 1, base, mailbox, cookies: [], seen: [] });
      const it = inbox.events({ timeout: 4000 });
      await assert.rejects((async () => { for await (const _ of it); })(), /timeout of 4000 ms/);
      assert.ok(opens.length >= 2, `reconnected (${opens.length} opens)`);
      const gap = opens[1] - ended;
      assert.ok(gap >= 1500 && gap < 2100, `the reconnect came ${gap} ms after the end; want the stream's retry: 1500 ms plus up to 250 ms`);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
