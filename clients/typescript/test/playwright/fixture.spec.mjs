// The Playwright fixture of @mayfly/client/playwright against a real stack
// (MAYFLY_URL, MAYFLY_SMTP): an inbox per test, deleted after it, whose waits
// end before the test's own timeout with the client's explained error.
import { test as base, expect } from '@playwright/test';
import { mayflyFixtures } from '@mayfly/client/playwright';
import { code } from '@mayfly/client';
import { sendMail } from '../smtp.js';

const test = base.extend(mayflyFixtures({ inbox: { lifetimeMinutes: 2 } }));

test('the inbox fixture: a fresh inbox that receives the signup mail', async ({ inbox }) => {
  expect(inbox.address).toMatch(/@mayfly\.test$/);
  await sendMail(process.env.MAYFLY_SMTP, { to: inbox.address, subject: 'Your code', text: 'Your verification code is 314159.' });
  const msg = await inbox.waitForMessage({ subject: /Your code/ });
  expect(code(msg)).toBe('314159');
  console.log(`STATE ${JSON.stringify(inbox.state())}`); // the runner-fixture test checks the fixture deleted it
});

test('a wait without a timeout ends before the test timeout, with the client error', async ({ inbox }) => {
  test.setTimeout(5000);
  const t0 = Date.now();
  await expect(inbox.waitForMessage({ subject: /never/ })).rejects.toThrow(/no matching message within \d+ ms; no message arrived/);
  const took = Date.now() - t0;
  expect(took).toBeGreaterThan(2000);
  expect(took).toBeLessThan(4000);
});

test('the test may delete the inbox itself: the fixture cleanup is idempotent', async ({ inbox }) => {
  expect(await inbox.delete()).toBe(true);
  expect(inbox.gone).toBe(true);
});
