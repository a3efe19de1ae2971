// links() and code(): the client-side helpers of the contract
// (clients/SCENARIOS.md); the service extracts nothing.

interface HasBodies {
  subject?: string;
  text_body?: string;
  html_body?: string;
}

const NAMED: Record<string, string> = {
  amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0',
};

/** Unescapes HTML character references: the common named ones and every numeric one. */
export function htmlUnescape(s: string): string {
  return s.replace(/&(#[xX][0-9a-fA-F]+|#\d+|[a-zA-Z]+);?/g, (m, ref: string) => {
    if (ref[0] === '#') {
      const n = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return n > 0 && n <= 0x10ffff ? String.fromCodePoint(n) : m;
    }
    return NAMED[ref.toLowerCase()] ?? m;
  });
}

/** The text of an HTML body: tags removed, entities unescaped. */
export function htmlText(html: string): string {
  return htmlUnescape(
    html
      .replace(/<(script|style)\b[\s\S]*?<\/\1\s*>/gi, ' ')
      .replace(/<!--[\s\S]*?-->/g, ' ')
      .replace(/<[^>]*>/g, ' '),
  );
}

const TEXT_URL = /https?:\/\/[^\s<>"'`]+/gi;
const HREF = /\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))/gi;

/**
 * Every http and https link of a message: those in text_body, then the hrefs
 * of html_body, HTML-unescaped, in order of first appearance, each once.
 */
export function links(message: HasBodies): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  const add = (u: string) => {
    if (!/^https?:\/\//i.test(u) || seen.has(u)) return;
    seen.add(u);
    out.push(u);
  };
  for (const m of (message.text_body ?? '').matchAll(TEXT_URL)) {
    // Trailing punctuation belongs to the sentence, not the link.
    add(htmlUnescape(m[0].replace(/[.,;:!?)\]}]+$/, '')));
  }
  for (const m of (message.html_body ?? '').matchAll(HREF)) {
    add(htmlUnescape((m[1] ?? m[2] ?? m[3] ?? '').trim()));
  }
  return out;
}

/** The default code: a run of 4 to 8 digits on word boundaries. */
export const DEFAULT_CODE = /\b\d{4,8}\b/;

/**
 * The first match of pattern (default: 4 to 8 digits) in text_body, then in
 * the text of html_body, then in the subject; group 1 when the pattern has a
 * capture group. undefined when nothing matches.
 */
export function code(message: HasBodies, pattern: RegExp | string = DEFAULT_CODE): string | undefined {
  const re =
    typeof pattern === 'string' ? new RegExp(pattern) : new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, ''));
  for (const text of [message.text_body ?? '', htmlText(message.html_body ?? ''), message.subject ?? '']) {
    const m = re.exec(text);
    if (m) return m.length > 1 ? m[1] : m[0];
  }
  return undefined;
}
