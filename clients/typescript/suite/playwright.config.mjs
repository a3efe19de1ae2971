// The public-limits suite (issue 37): MAYFLY_SUITE_TESTS (default 200)
// signup tests in a real browser against a Mayfly that keeps the public
// spec's limits (5 creations a minute, 10 an hour, 20 a day, 5 live inboxes,
// 8 requests a second per IP): each test gets a tagged address of the
// worker's one shared inbox (the `recipient` fixture), so a run costs one
// creation. Run from clients/typescript, after `npm ci`:
//
//   MAYFLY_URL=http://127.0.0.1:8080/v1 MAYFLY_SUITE_SMTP=127.0.0.1:2525 npx playwright test -c suite
//
// Optional: MAYFLY_SUITE_TESTS (200), MAYFLY_SUITE_BROWSER (/usr/bin/chromium),
// MAYFLY_SUITE_JUNIT (a JUnit report's path).
import { defineConfig } from '@playwright/test';

const reporter = [['dot']];
if (process.env.MAYFLY_SUITE_JUNIT) reporter.push(['junit', { outputFile: process.env.MAYFLY_SUITE_JUNIT }]);

export default defineConfig({
  testDir: '.',
  testMatch: 'signup.spec.mjs',
  outputDir: process.env.MAYFLY_SUITE_OUTPUT ?? 'test-results',
  globalSetup: './global-setup.mjs',
  workers: 1,
  retries: 0,
  timeout: 60_000,
  reporter,
  use: {
    mayflyUrl: process.env.MAYFLY_URL,
    // A system browser: Debian's chromium, not a browser Playwright downloads.
    launchOptions: { executablePath: process.env.MAYFLY_SUITE_BROWSER ?? '/usr/bin/chromium' },
  },
});
