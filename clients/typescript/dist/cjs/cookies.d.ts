export interface StoredCookie {
    name: string;
    value: string;
    path: string;
    /** Milliseconds since the epoch; undefined for a session cookie. */
    expires: number | undefined;
    secure: boolean;
}
export declare class CookieJar {
    #private;
    constructor(base: URL | string, now?: () => number);
    /** Takes the Set-Cookie header values of an answer to url. */
    store(url: URL | string, setCookies: readonly string[]): void;
    /** The Cookie header for a request to url, or '' when no cookie applies. */
    header(url: URL | string): string;
    /** The names of the live cookies. */
    names(): string[];
    clear(): void;
    /** The live cookies, for a saved state (Inbox.state()). */
    cookies(): StoredCookie[];
    /** Puts a cookie back (Mayfly.restore()); an expired one is dropped. */
    put(c: StoredCookie): void;
}
/** Parses one Set-Cookie value (RFC 6265 §5.2); undefined when it is unusable for the jar. */
export declare function parseSetCookie(line: string, url: URL, now: number): StoredCookie | undefined;
/** RFC 6265 §5.1.4's default-path of a request path. */
export declare function defaultPath(p: string): string;
/** RFC 6265 §5.1.4's path-match. */
export declare function pathMatch(reqPath: string, cookiePath: string): boolean;
/**
 * Every Set-Cookie value of an answer. Headers.getSetCookie() is there from
 * Node 18.14 / 19.7; before, get() joins them with ", ", so the joined value
 * is split where a new "name=" starts (an Expires date's comma is followed by
 * a day number and a space, never by "name=").
 */
export declare function setCookieValues(headers: Headers): string[];
