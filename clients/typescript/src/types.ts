// The API's resources, hand-written to match the served OpenAPI document
// (GET /v1/openapi.yaml, edge/openapi.yaml): one declaration per schema of
// components.schemas, with the schema's name (Error is ErrorResponse here, so
// as not to shadow the global Error). test/openapi.test.js reads these
// declarations with the TypeScript compiler and compares their properties,
// required-ness and enums with the document the edge serves.

/** `ready`: bodies available; `failed`: not parseable, bodies empty; `pending`: not yet parsed. */
export type MessageStatus = 'pending' | 'ready' | 'failed';

/** An inbox as the API shows it. Times are RFC 3339 strings (UTC). */
export interface Mailbox {
  id: string;
  address: string;
  kind: 'temporary' | 'permanent';
  expires_at: string | null;
  max_expires_at: string | null;
}

/** One item of the message list. */
export interface MessageSummary {
  id: string;
  from: string;
  /**
   * The envelope recipient the message arrived for, lower-cased: the inbox's
   * address, or a tagged address of it (`local+tag@domain`). A service older
   * than sub-addressing sends none (the document has it optional): this
   * client fills in the inbox's address, so it is always set on what it returns.
   */
  to?: string;
  subject: string;
  received_at: string;
  status: MessageStatus;
}

/** One message with its bodies (empty unless status is `ready`). */
export interface Message {
  id: string;
  from: string;
  /** The envelope recipient, lower-cased (as MessageSummary.to; always set by this client). */
  to?: string;
  subject: string;
  received_at: string;
  status: MessageStatus;
  text_body: string;
  /** Sanitized HTML: render it isolated (a sandboxed iframe), never inline. */
  html_body: string;
}

export interface Pagination {
  limit: number;
  offset: number;
  has_more: boolean;
}

export interface CreateMailboxRequest {
  lifetime_minutes?: number;
}

export interface ExtendMailboxRequest {
  extension_minutes: number;
}

export interface MailboxResponse {
  data: { mailbox: Mailbox };
}

export interface DomainsResponse {
  data: { domains: string[] };
}

export interface MessageListResponse {
  data: { items: MessageSummary[]; pagination: Pagination };
}

export interface MessageResponse {
  data: { message: Message };
}

/** The stable error codes; clients branch on these, never on the message. */
export type ErrorCode =
  | 'INVALID_JSON'
  | 'UNKNOWN_FIELD'
  | 'INVALID_FIELD'
  | 'INVALID_UUID'
  | 'INVALID_PAGINATION'
  | 'MALFORMED_REQUEST'
  | 'BODY_TOO_LARGE'
  | 'HEADERS_TOO_LARGE'
  | 'MAILBOX_SESSION_REQUIRED'
  | 'MAILBOX_SESSION_INVALID'
  | 'MAILBOX_CREDENTIAL_REQUIRED'
  | 'MAILBOX_CREDENTIAL_INVALID'
  | 'MAILBOX_NOT_FOUND'
  | 'MESSAGE_NOT_FOUND'
  | 'ROUTE_NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'RATE_LIMITED'
  | 'CREATION_RATE_LIMITED'
  | 'ACTIVE_INBOX_LIMIT'
  | 'GLOBAL_CREATION_LIMIT'
  | 'INTERNAL'
  | 'DEPENDENCY_UNAVAILABLE'
  | 'REQUEST_PROTECTION';

/** The error envelope of every error answer (the schema `Error`). */
export interface ErrorResponse {
  error: {
    code: ErrorCode;
    message: string;
    details?: { [key: string]: unknown };
  };
  request_id: string;
}
