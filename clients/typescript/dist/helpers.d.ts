interface HasBodies {
    subject?: string;
    text_body?: string;
    html_body?: string;
}
/** Unescapes HTML character references: the common named ones and every numeric one. */
export declare function htmlUnescape(s: string): string;
/** The text of an HTML body: tags removed, entities unescaped. */
export declare function htmlText(html: string): string;
/**
 * Every http and https link of a message: those in text_body, then the hrefs
 * of html_body, HTML-unescaped, in order of first appearance, each once.
 */
export declare function links(message: HasBodies): string[];
/** The default code: a run of 4 to 8 digits on word boundaries. */
export declare const DEFAULT_CODE: RegExp;
/**
 * The first match of pattern (default: 4 to 8 digits) in text_body, then in
 * the text of html_body, then in the subject; group 1 when the pattern has a
 * capture group. undefined when nothing matches.
 */
export declare function code(message: HasBodies, pattern?: RegExp | string): string | undefined;
export {};
