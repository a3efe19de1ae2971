// signup.test.cjs — run: node --test signup.test.cjs (CommonJS: require)
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { Mayfly, code } = require('@mayfly/client');
const { signUp } = require('./app.cjs'); // your app; here a stand-in that mails a code

const mayfly = new Mayfly({ baseUrl: process.env.MAYFLY_URL ?? 'http://127.0.0.1:8080/v1' });

test('the signup mail carries the code', async (t) => {
  const inbox = await mayfly.createInbox();
  t.after(() => inbox.delete());
  const sent = await signUp(inbox.address);
  // timeout is in milliseconds (default 20 000); t.signal ends the wait with the test
  const msg = await inbox.waitForMessage({ subject: /Your code/, signal: t.signal });
  assert.equal(code(msg), sent);
});
