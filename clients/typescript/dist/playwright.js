// A Playwright fixture: `inbox`, a fresh Mayfly inbox per test, deleted
// after it, whose waits end before the test's own timeout. Playwright is not
// a dependency: this module imports nothing of it, it gives the fixture
// definitions to pass to the caller's own `test.extend`.
//
//   import { test as base, expect } from '@playwright/test';
//   import { mayflyFixtures, type MayflyFixtures, type MayflyWorkerFixtures } from '@mayfly/client/playwright';
//   export const test = base.extend<MayflyFixtures, MayflyWorkerFixtures>(mayflyFixtures());
import { Mayfly } from './client.js';
/** The base URL when neither the `mayflyUrl` option nor MAYFLY_URL gives one: `make run`'s. */
export const DEFAULT_URL = 'http://127.0.0.1:8080/v1';
/** An environment variable (Node's process.env, without depending on Node's types). */
function env(name) {
    return globalThis.process?.env?.[name] || undefined;
}
/**
 * The fixture definitions for `test.extend<MayflyFixtures, MayflyWorkerFixtures>(…)`:
 * `mayflyUrl` (an option, default MAYFLY_URL or DEFAULT_URL), `mayfly` (one
 * client per worker) and `inbox` (one per test: created before it with a
 * deadline testInfo.timeout − margin after the fixture started, deleted after
 * it; delete is idempotent, so a test may delete it itself).
 */
export function mayflyFixtures(options = {}) {
    const margin = options.margin ?? 1500;
    return {
        mayflyUrl: [env('MAYFLY_URL') ?? DEFAULT_URL, { scope: 'worker', option: true }],
        mayfly: [
            async ({ mayflyUrl }, use) => {
                await use(new Mayfly({ ...options.client, baseUrl: mayflyUrl }));
            },
            { scope: 'worker' },
        ],
        inbox: async ({ mayfly }, use, testInfo) => {
            const started = Date.now();
            // Read at each wait: testInfo.setTimeout() may change the timeout during the test.
            const deadline = () => (testInfo.timeout > 0 ? started + testInfo.timeout - margin : undefined);
            const inbox = await mayfly.createInbox({ ...options.inbox, deadline });
            try {
                await use(inbox);
            }
            finally {
                await inbox.delete();
            }
        },
    };
}
