import { Mayfly } from './client.js';
import type { ClientOptions, CreateInboxOptions, Inbox } from './client.js';
import type { Recipient } from './recipient.js';
import { SharedInbox } from './shared.js';
/** The base URL when neither the `mayflyUrl` option nor MAYFLY_URL gives one: `make run`'s. */
export declare const DEFAULT_URL = "http://127.0.0.1:8080/v1";
export interface MayflyFixtureOptions {
    /** The client's other options (baseUrl comes from the `mayflyUrl` option, MAYFLY_URL or DEFAULT_URL). */
    client?: Omit<ClientOptions, 'baseUrl'>;
    /** How each inbox is created, the `inbox` fixture's and the worker's shared one (lifetimeMinutes, waitForCapacity, …). */
    inbox?: Omit<CreateInboxOptions, 'deadline' | 'signal'>;
    /**
     * How long before the test's timeout (testInfo.timeout) the waits end
     * with WaitTimeoutError, which says why, so that it is the error the
     * report shows rather than Playwright's timeout; in ms, default 1500.
     */
    margin?: number;
}
/** The test-scoped fixtures. */
export interface MayflyFixtures {
    /** A tagged address of the worker's shared inbox, its tag made from the test's title (the default fixture). */
    recipient: Recipient;
    /** A fresh inbox, deleted after the test. */
    inbox: Inbox;
}
/** The worker-scoped fixtures: the option (set it with `use: { mayflyUrl }` in the config or test.use), the client and the shared inbox. */
export interface MayflyWorkerFixtures {
    mayflyUrl: string;
    mayfly: Mayfly;
    sharedInbox: SharedInbox;
}
/** The part of Playwright's TestInfo the fixtures read. */
interface TestInfoLike {
    /** The test's timeout in ms; 0 is none. */
    timeout: number;
    /** The test's title. */
    title?: string;
}
type Use<T> = (value: T) => Promise<void>;
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
export declare function mayflyFixtures(options?: MayflyFixtureOptions): {
    mayflyUrl: [string, {
        scope: "worker";
        option: true;
    }];
    mayfly: [({ mayflyUrl }: {
        mayflyUrl: string;
    }, use: Use<Mayfly>) => Promise<void>, {
        scope: "worker";
    }];
    sharedInbox: [({ mayfly }: {
        mayfly: Mayfly;
    }, use: Use<SharedInbox>) => Promise<void>, {
        scope: "worker";
    }];
    recipient: ({ sharedInbox }: {
        sharedInbox: SharedInbox;
    }, use: Use<Recipient>, testInfo: TestInfoLike) => Promise<void>;
    inbox: ({ mayfly }: {
        mayfly: Mayfly;
    }, use: Use<Inbox>, testInfo: TestInfoLike) => Promise<void>;
};
export {};
