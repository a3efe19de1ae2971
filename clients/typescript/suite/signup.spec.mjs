// Each test signs up in the browser with its own tagged address of the
// worker's shared inbox, waits (scoped to that address) for the mail, types
// the code, follows the "Verify your email" link and sees the address
// verified. See playwright.config.mjs for the command.
import { test as base, expect } from '@playwright/test';
import { mayflyFixtures } from '@mayfly/client/playwright';
import { code, linksWithText } from '@mayfly/client';

const test = base.extend(mayflyFixtures());
const count = Number(process.env.MAYFLY_SUITE_TESTS ?? 200);

test.afterAll(async ({ sharedInbox }) => {
  console.log(`mayfly suite: ${sharedInbox.creations} inbox creation(s) in this worker`);
});

for (let i = 1; i <= count; i++) {
  test(`signup ${i}: the code and the link verify the address`, async ({ page, recipient }) => {
    const app = process.env.SIGNUP_APP_URL;
    await page.goto(app);
    await page.fill('#email', recipient.address);
    await page.click('button[type=submit]');
    await expect(page.locator('h1')).toHaveText('Check your inbox');

    const msg = await recipient.waitForMessage({ subject: /Verify your email/ });
    expect(msg.to).toBe(recipient.address.toLowerCase());
    const digits = code(msg);
    expect(digits).toMatch(/^\d{6}$/);
    const link = linksWithText(msg).find((l) => l.text === 'Verify your email');
    expect(link?.url).toMatch(new RegExp(`^${app}/verify\\?token=[0-9a-f]{32}$`));

    await page.fill('#code', digits);
    await page.click('button[type=submit]');
    await expect(page.locator('h1')).toHaveText('Code confirmed');
    await page.goto(link.url);
    await expect(page.locator('h1')).toHaveText('Your email is verified');
  });
}
