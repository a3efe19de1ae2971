"use strict";
// A small Server-Sent Events parser (the WHATWG event-stream format) over
// decoded text chunks: it needs no EventSource and keeps no more than one
// unfinished line and one event's data.
Object.defineProperty(exports, "__esModule", { value: true });
exports.SSEParser = exports.MAX_LINE = void 0;
/** The longest line kept; a longer one ends the stream (a protocol error). */
exports.MAX_LINE = 1 << 20;
class SSEParser {
    #onComment;
    #buf = '';
    #event = '';
    #data = [];
    #id = '';
    #sawCR = false;
    /** The stream's retry field, in milliseconds, when it sent one. */
    retry;
    constructor(options = {}) {
        this.#onComment = options.onComment;
    }
    /** Feeds a chunk of text; returns the events it completed, in order. */
    push(chunk) {
        const out = [];
        if (chunk === '')
            return out;
        let s = chunk;
        if (this.#sawCR && s.startsWith('\n'))
            s = s.slice(1); // CRLF split across chunks
        this.#sawCR = false;
        let text = this.#buf + s;
        let start = 0;
        for (let i = 0; i < text.length; i++) {
            const ch = text.charCodeAt(i);
            if (ch !== 10 && ch !== 13)
                continue;
            this.#line(text.slice(start, i), out);
            if (ch === 13) {
                if (i + 1 === text.length)
                    this.#sawCR = true;
                else if (text.charCodeAt(i + 1) === 10)
                    i++;
            }
            start = i + 1;
        }
        text = text.slice(start);
        if (text.length > exports.MAX_LINE)
            throw new Error(`mayfly: an event-stream line over ${exports.MAX_LINE} characters`);
        this.#buf = text;
        return out;
    }
    #line(line, out) {
        if (line === '') {
            if (this.#data.length > 0) {
                out.push({ event: this.#event || 'message', data: this.#data.join('\n'), id: this.#id });
            }
            this.#event = '';
            this.#data = [];
            return;
        }
        if (line.startsWith(':')) {
            // A comment: the heartbeat, or why the service ends the stream.
            this.#onComment?.(line.slice(1));
            return;
        }
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        let value = i < 0 ? '' : line.slice(i + 1);
        if (value.startsWith(' '))
            value = value.slice(1);
        switch (field) {
            case 'event':
                this.#event = value;
                break;
            case 'data':
                this.#data.push(value);
                break;
            case 'id':
                if (!value.includes('\0'))
                    this.#id = value;
                break;
            case 'retry':
                if (/^\d+$/.test(value))
                    this.retry = Number(value);
                break;
        }
    }
}
exports.SSEParser = SSEParser;
