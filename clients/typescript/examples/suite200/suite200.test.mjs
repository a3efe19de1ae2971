// A 200-test suite against `make run` (the dev profile): each test creates an
// inbox, has the stand-in app mail it twice over SMTP (all from one IP, as a
// real suite's app does) and waits for each mail, the second by the same
// wait (since 'unseen'). Run from clients/typescript:
//
//   node --test examples/suite200/          # MAYFLY_URL, MAYFLY_SMTP, SUITE_CONCURRENCY (20)

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Mayfly, code } from '@mayfly/client';
import { signUp } from '../app.mjs';

const mayfly = new Mayfly({ baseUrl: process.env.MAYFLY_URL ?? 'http://127.0.0.1:8080/v1' });
const concurrency = Number(process.env.SUITE_CONCURRENCY ?? 20);

describe('suite200', { concurrency }, () => {
  for (let i = 1; i <= 200; i++) {
    test(`signup ${i}: two codes, the second wait returns the second`, async (t) => {
      const inbox = await mayfly.createInbox({ lifetimeMinutes: 2 });
      t.after(() => inbox.delete());
      const first = await signUp(inbox.address);
      assert.equal(code(await inbox.waitForMessage({ subject: /Your code/, signal: t.signal })), first);
      const second = await signUp(inbox.address); // "resend code"
      assert.equal(code(await inbox.waitForMessage({ subject: /Your code/, signal: t.signal })), second);
    });
  }
});
