// What the parts of the client share and the caller never sees.

/** A time no wait runs past: epoch milliseconds, a Date, or a function giving one (read at each wait). */
export type Deadline = number | Date | (() => number | Date | undefined);

/**
 * The key of a wait's own deadline in its options (a Recipient's: the test's
 * deadline, where the inbox is shared by the tests of a worker). A symbol, so
 * it is no public option.
 */
export const SCOPE_DEADLINE: unique symbol = Symbol('mayfly.scopeDeadline');

/** Milliseconds until d, Infinity without one. */
export function deadlineLeft(d: Deadline | undefined): number {
  const v = typeof d === 'function' ? d() : d;
  return v === undefined ? Infinity : Math.max(0, (v instanceof Date ? v.getTime() : v) - Date.now());
}
