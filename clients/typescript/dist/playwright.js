// The Playwright fixtures. `recipient` (the default): a tagged address per
// test on one inbox per worker (a SharedInbox), so that a suite spends one
// creation per worker, as a public service's limits ask (5 creations a
// minute, 10 an hour, 20 a day per IP). `inbox`: a fresh inbox per test,
// deleted after it. The waits of both end before the test's own timeout.
// Playwright is not a dependency: this module imports nothing of it, it
// gives the fixture definitions to pass to the caller's own `test.extend`.
//
//   import { test as base, expect } from '@playwright/test';
//   import { mayflyFixtures, type MayflyFixtures, type MayflyWorkerFixtures } from '@mayfly/client/playwright';
//   export const test = base.extend<MayflyFixtures, MayflyWorkerFixtures>(mayflyFixtures());
import { Mayfly } from './client.js';
import { SharedInbox } from './shared.js';
/** The base URL when neither the `mayflyUrl` option nor MAYFLY_URL gives one: `make run`'s. */
export const DEFAULT_URL = 'http://127.0.0.1:8080/v1';
/** An environment variable (Node's process.env, without depending on Node's types). */
function env(name) {
    return globalThis.process?.env?.[name] || undefined;
}
/**
 * The fixture definitions for `test.extend<MayflyFixtures, MayflyWorkerFixtures>(…)`:
 * `mayflyUrl` (an option, default MAYFLY_URL or DEFAULT_URL), `mayfly` (one
 * client per worker), `sharedInbox` (one per worker, created at its first
 * recipient, deleted when the worker ends), `recipient` (one per test, on the
 * shared inbox: no creation, no cleanup) and `inbox` (one per test: created
 * before it, deleted after it; delete is idempotent, so a test may delete it
 * itself). Each test's waits have the deadline testInfo.timeout − margin
 * after its fixture started.
 */
export function mayflyFixtures(options = {}) {
    const margin = options.margin ?? 1500;
    /** Read at each wait: testInfo.setTimeout() may change the timeout during the test. */
    const deadlineOf = (testInfo) => {
        const started = Date.now();
        return () => (testInfo.timeout > 0 ? started + testInfo.timeout - margin : undefined);
    };
    return {
        mayflyUrl: [env('MAYFLY_URL') ?? DEFAULT_URL, { scope: 'worker', option: true }],
        mayfly: [
            async ({ mayflyUrl }, use) => {
                await use(new Mayfly({ ...options.client, baseUrl: mayflyUrl }));
            },
            { scope: 'worker' },
        ],
        sharedInbox: [
            async ({ mayfly }, use) => {
                const shared = new SharedInbox(mayfly, { inbox: { ...options.inbox } });
                try {
                    await use(shared);
                }
                finally {
                    await shared.close();
                }
            },
            { scope: 'worker' },
        ],
        recipient: async ({ sharedInbox }, use, testInfo) => {
            await use(await sharedInbox.recipient(testInfo.title ?? 'test', { deadline: deadlineOf(testInfo) }));
        },
        inbox: async ({ mayfly }, use, testInfo) => {
            const inbox = await mayfly.createInbox({ ...options.inbox, deadline: deadlineOf(testInfo) });
            try {
                await use(inbox);
            }
            finally {
                await inbox.delete();
            }
        },
    };
}
