export interface SSEEvent {
    /** The event type; "message" when the stream named none. */
    event: string;
    data: string;
    /** The last event id seen, as the stream set it. */
    id: string;
}
/** The longest line kept; a longer one ends the stream (a protocol error). */
export declare const MAX_LINE: number;
export interface SSEParserOptions {
    /** Called with each comment line's text (after the colon), in order with the events. */
    onComment?: (text: string) => void;
}
export declare class SSEParser {
    #private;
    /** The stream's retry field, in milliseconds, when it sent one. */
    retry: number | undefined;
    constructor(options?: SSEParserOptions);
    /** Feeds a chunk of text; returns the events it completed, in order. */
    push(chunk: string): SSEEvent[];
}
