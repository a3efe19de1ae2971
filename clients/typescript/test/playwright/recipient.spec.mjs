// The default Playwright fixture, `recipient` (shared-inbox-fixture in
// test/contract.test.js): three tests, each a tagged address of the worker's
// one shared inbox, each getting its own mail though the inbox holds the
// others' (and a decoy to another tag of the same inbox, sent first).
import { test as base, expect } from '@playwright/test';
import { mayflyFixtures } from '@mayfly/client/playwright';
import { code } from '@mayfly/client';
import { sendMail } from '../smtp.js';

const test = base.extend(mayflyFixtures());

for (const [i, want] of [[1, '111111'], [2, '222222'], [3, '333333']]) {
  test(`shared ${i}: the recipient fixture gets its own mail`, async ({ recipient, sharedInbox }) => {
    expect(recipient.address).toMatch(new RegExp(`^[^+@]+\\+shared-${i}-[a-z0-9-]*[a-z0-9]{10}@mayfly\\.test$`));
    expect(recipient.inbox).toBe(sharedInbox.inbox);
    const smtp = process.env.MAYFLY_SMTP;
    await sendMail(smtp, { to: recipient.inbox.addressFor(`decoy${i}`), subject: 'Your code', text: 'Your code is 999999.' });
    await sendMail(smtp, { to: recipient.address, subject: 'Your code', text: `Your code is ${want}.` });
    const msg = await recipient.waitForMessage({ subject: /Your code/ });
    expect(code(msg)).toBe(want);
    expect(msg.to).toBe(recipient.address.toLowerCase());
    console.log(`RECIPIENT ${recipient.address} ${recipient.inbox.id} ${sharedInbox.creations}`);
  });
}
