interface HasBodies {
    subject?: string;
    text_body?: string;
    html_body?: string;
}
/**
 * Decodes the character references of s once: numeric ones, and named ones
 * ended by their ";" (a name without it is left: a link's "&region=eu"
 * stays, as a browser leaves it). The Go and Python clients know every
 * name of HTML; this one the common ones above.
 */
export declare function htmlUnescape(s: string): string;
/** The text of an HTML body: comments, scripts, styles and tags removed (each as a space), references decoded. */
export declare function htmlText(html: string): string;
/** A link of a message with the text it is shown as. */
export interface Link {
    url: string;
    /** The text of the link's first `<a>` that has one (tags removed, references decoded, spaces collapsed); "" when none labels it. */
    text: string;
}
/**
 * Every http and https link of a message with its text: those in text_body,
 * then the hrefs of html_body, HTML-unescaped, in order of first appearance,
 * each URL once. The text is that of the link's first `<a>` that has one (tags
 * removed, references decoded, white space collapsed): in a text+HTML mail the
 * link of the text part takes its anchor's text ("Verify your email"); "" for
 * a link no `<a>` labels.
 */
export declare function linksWithText(message: HasBodies): Link[];
/**
 * Every http and https link of a message: those in text_body, then the hrefs
 * of html_body, HTML-unescaped, in order of first appearance, each once.
 */
export declare function links(message: HasBodies): string[];
/** The default code: a run of 4 to 8 digits on word boundaries. */
export declare const DEFAULT_CODE: RegExp;
/**
 * The code of a message. With a pattern: its first match in text_body, then
 * in the text of html_body, then in the subject (group 1 when it has a
 * capture group). Without (the contract's rule), in the first of those texts
 * that has a run of 4 to 8 digits: the first run with a keyword (code, PIN,
 * OTP, verification, one-time, passcode; whole words, any case) among the 3
 * words before it; else the first run with one among the 3 words after it
 * ("482913 is your code"); the words stop at a sentence's end; else the last
 * run of 6 digits; else the first run. "Order #2026 placed 2026-11-24 … Your
 * verification code is 482913" gives 482913. undefined when nothing matches.
 */
export declare function code(message: HasBodies, pattern?: RegExp | string): string | undefined;
/** Every run of 4 to 8 digits, in order, of the text code() reads (the first of text_body, html text, subject that has one). */
export declare function codes(message: HasBodies): string[];
export {};
