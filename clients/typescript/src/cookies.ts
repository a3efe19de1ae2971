// The cookie jar of one Inbox. It holds the cookies of one host, the
// service's, host-only as the API issues them, and honours Path, Expires,
// Max-Age and Secure (sent over https only). Cookie values never leave it but
// in the Cookie header: never logged, never in an error message.

export interface StoredCookie {
  name: string;
  value: string;
  path: string;
  /** Milliseconds since the epoch; undefined for a session cookie. */
  expires: number | undefined;
  secure: boolean;
}

export class CookieJar {
  readonly #host: string;
  readonly #now: () => number;
  readonly #all = new Map<string, StoredCookie>(); // by name: one path per name, as the API uses

  constructor(base: URL | string, now: () => number = Date.now) {
    this.#host = new URL(base).hostname.toLowerCase();
    this.#now = now;
  }

  /** Takes the Set-Cookie header values of an answer to url. */
  store(url: URL | string, setCookies: readonly string[]): void {
    const u = new URL(url);
    if (u.hostname.toLowerCase() !== this.#host) return;
    const now = this.#now();
    for (const line of setCookies) {
      const c = parseSetCookie(line, u, now);
      if (c === undefined) continue;
      if (c.expires !== undefined && c.expires <= now) {
        this.#all.delete(c.name);
        continue;
      }
      this.#all.set(c.name, c);
    }
  }

  /** The Cookie header for a request to url, or '' when no cookie applies. */
  header(url: URL | string): string {
    const u = new URL(url);
    if (u.hostname.toLowerCase() !== this.#host) return '';
    const now = this.#now();
    const out: string[] = [];
    for (const [name, c] of this.#all) {
      if (c.expires !== undefined && c.expires <= now) {
        this.#all.delete(name);
        continue;
      }
      if ((c.secure && u.protocol !== 'https:') || !pathMatch(u.pathname, c.path)) continue;
      out.push(`${c.name}=${c.value}`);
    }
    return out.join('; ');
  }

  /** The names of the live cookies. */
  names(): string[] {
    const now = this.#now();
    return [...this.#all.values()].filter((c) => c.expires === undefined || c.expires > now).map((c) => c.name);
  }

  clear(): void {
    this.#all.clear();
  }

  /** The live cookies, for a saved state (Inbox.state()). */
  cookies(): StoredCookie[] {
    const now = this.#now();
    return [...this.#all.values()].filter((c) => c.expires === undefined || c.expires > now).map((c) => ({ ...c }));
  }

  /** Puts a cookie back (Mayfly.restore()); an expired one is dropped. */
  put(c: StoredCookie): void {
    if (c.expires !== undefined && c.expires <= this.#now()) return;
    this.#all.set(c.name, { ...c });
  }
}

/** Parses one Set-Cookie value (RFC 6265 §5.2); undefined when it is unusable for the jar. */
export function parseSetCookie(line: string, url: URL, now: number): StoredCookie | undefined {
  const [pair = '', ...attrs] = line.split(';');
  const eq = pair.indexOf('=');
  if (eq <= 0) return undefined;
  const name = pair.slice(0, eq).trim();
  const value = pair.slice(eq + 1).trim();
  if (name === '') return undefined;
  let path: string | undefined;
  let expires: number | undefined;
  let maxAge: number | undefined;
  let secure = false;
  for (const a of attrs) {
    const i = a.indexOf('=');
    const key = (i < 0 ? a : a.slice(0, i)).trim().toLowerCase();
    const val = i < 0 ? '' : a.slice(i + 1).trim();
    switch (key) {
      case 'path':
        if (val.startsWith('/')) path = val;
        break;
      case 'expires': {
        const t = Date.parse(val);
        if (!Number.isNaN(t)) expires = t;
        break;
      }
      case 'max-age':
        if (/^-?\d+$/.test(val)) maxAge = Number(val);
        break;
      case 'secure':
        secure = true;
        break;
      case 'domain': {
        // Host-only is all the API issues; a Domain naming another host is refused.
        const d = val.replace(/^\./, '').toLowerCase();
        if (d !== '' && d !== url.hostname.toLowerCase()) return undefined;
        break;
      }
    }
  }
  if (maxAge !== undefined) expires = maxAge <= 0 ? now - 1 : now + maxAge * 1000; // Max-Age wins over Expires
  return { name, value, path: path ?? defaultPath(url.pathname), expires, secure };
}

/** RFC 6265 §5.1.4's default-path of a request path. */
export function defaultPath(p: string): string {
  const i = p.lastIndexOf('/');
  return i <= 0 ? '/' : p.slice(0, i);
}

/** RFC 6265 §5.1.4's path-match. */
export function pathMatch(reqPath: string, cookiePath: string): boolean {
  const p = reqPath === '' ? '/' : reqPath;
  if (p === cookiePath) return true;
  if (!p.startsWith(cookiePath)) return false;
  return cookiePath.endsWith('/') || p[cookiePath.length] === '/';
}

/**
 * Every Set-Cookie value of an answer. Headers.getSetCookie() is there from
 * Node 18.14 / 19.7; before, get() joins them with ", ", so the joined value
 * is split where a new "name=" starts (an Expires date's comma is followed by
 * a day number and a space, never by "name=").
 */
export function setCookieValues(headers: Headers): string[] {
  const h = headers as Headers & { getSetCookie?: () => string[] };
  if (typeof h.getSetCookie === 'function') return h.getSetCookie();
  const joined = headers.get('set-cookie');
  if (joined === null) return [];
  return joined.split(/,(?=\s*[^;,=\s]+=)/).map((s) => s.trim());
}
