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
