import { MayflyError } from './errors.js';
import type { CallOptions, Page } from './client.js';
import type { InboxCore } from './internal.js';
import type { RequestKind } from './retry.js';
import type { Message } from './types.js';
/** An answer came: the running wait's service is reachable. */
export declare function answered(c: InboxCore, signal: AbortSignal | undefined): void;
/** A transport failure of the running wait's call. */
export declare function failed(c: InboxCore, signal: AbortSignal | undefined, err: NetworkError): void;
export declare function alive(c: InboxCore): void;
/** A message or summary with its `to`: the inbox's address when the service sent none (a service older than sub-addressing). */
export declare function fill<T extends {
    to?: string;
}>(c: InboxCore, m: T): T;
export declare function headers(c: InboxCore, url: string, accept: string, json?: boolean): Record<string, string>;
/** One page of the message list (GET /messages), each summary with its `to`. */
export declare function listPage(c: InboxCore, limit: number, offset: number, signal: CallOptions | AbortSignal | undefined, attempts: number): Promise<Page>;
/** One message with its bodies (GET /messages/{id}), with its `to`. */
export declare function getMessage(c: InboxCore, id: string, signal: CallOptions | AbortSignal | undefined, attempts: number): Promise<Message>;
/** One API call with the retries of the contract; the data envelope's content. */
export declare function call<T>(c: InboxCore, method: string, path: string, body: object | undefined, kind: RequestKind, opts: CallOptions | AbortSignal | undefined, attempts?: number): Promise<T>;
/** The typed error of an error answer; marks the inbox gone when the answer says so. */
export declare function errorOf(c: InboxCore, res: Response, method: string, url: string, path: string): Promise<MayflyError>;
/** A transport failure (no HTTP answer); refused says nothing was sent. */
export declare class NetworkError extends MayflyError {
    readonly refused: boolean;
    constructor(method: string, url: string, cause: unknown, refused: boolean);
}
export declare function refused(err: unknown): boolean;
/** Transient: what a wait or a stream outlives (the network, 5xx, the request rate). */
export declare function transient(err: unknown): boolean;
export declare function sleep(ms: number, signal: AbortSignal | undefined): Promise<void>;
