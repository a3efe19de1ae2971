/** A time no wait runs past: epoch milliseconds, a Date, or a function giving one (read at each wait). */
export type Deadline = number | Date | (() => number | Date | undefined);
/**
 * The key of a wait's own deadline in its options (a Recipient's: the test's
 * deadline, where the inbox is shared by the tests of a worker). A symbol, so
 * it is no public option.
 */
export declare const SCOPE_DEADLINE: unique symbol;
/** Milliseconds until d, Infinity without one. */
export declare function deadlineLeft(d: Deadline | undefined): number;
