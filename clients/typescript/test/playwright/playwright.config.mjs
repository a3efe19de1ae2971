// The Playwright run of the fixture (test/contract.test.js, runner-fixture):
// specs that use only the `inbox` fixture, no `page`, so no browser is needed.
import { defineConfig } from '@playwright/test';

export default defineConfig({
  testDir: '.',
  testMatch: '*.spec.mjs',
  workers: 2,
  reporter: [['list'], ['json', { outputFile: process.env.PW_JSON_REPORT ?? 'pw-report.json' }]],
  use: { mayflyUrl: process.env.MAYFLY_URL },
});
