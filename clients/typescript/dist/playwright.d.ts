import { Mayfly } from './client.js';
import type { ClientOptions, CreateInboxOptions, Inbox } from './client.js';
/** The base URL when neither the `mayflyUrl` option nor MAYFLY_URL gives one: `make run`'s. */
export declare const DEFAULT_URL = "http://127.0.0.1:8080/v1";
export interface MayflyFixtureOptions {
    /** The client's other options (baseUrl comes from the `mayflyUrl` option, MAYFLY_URL or DEFAULT_URL). */
    client?: Omit<ClientOptions, 'baseUrl'>;
    /** How each test's inbox is created (lifetimeMinutes, waitForCapacity, …). */
    inbox?: Omit<CreateInboxOptions, 'deadline' | 'signal'>;
    /**
     * How long before the test's timeout (testInfo.timeout) the inbox's waits
     * end with WaitTimeoutError, which says why, so that it is the error the
     * report shows rather than Playwright's timeout; in ms, default 1500.
     */
    margin?: number;
}
/** The test-scoped fixture. */
export interface MayflyFixtures {
    inbox: Inbox;
}
/** The worker-scoped fixtures: the option (set it with `use: { mayflyUrl }` in the config or test.use) and the client. */
export interface MayflyWorkerFixtures {
    mayflyUrl: string;
    mayfly: Mayfly;
}
/** The part of Playwright's TestInfo the fixture reads. */
interface TestInfoLike {
    /** The test's timeout in ms; 0 is none. */
    timeout: number;
}
type Use<T> = (value: T) => Promise<void>;
/**
 * The fixture definitions for `test.extend<MayflyFixtures, MayflyWorkerFixtures>(…)`:
 * `mayflyUrl` (an option, default MAYFLY_URL or DEFAULT_URL), `mayfly` (one
 * client per worker) and `inbox` (one per test: created before it with a
 * deadline testInfo.timeout − margin after the fixture started, deleted after
 * it; delete is idempotent, so a test may delete it itself).
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
    inbox: ({ mayfly }: {
        mayfly: Mayfly;
    }, use: Use<Inbox>, testInfo: TestInfoLike) => Promise<void>;
};
export {};
