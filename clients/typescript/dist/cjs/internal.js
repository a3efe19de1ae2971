"use strict";
// What the parts of the client share and the caller never sees.
Object.defineProperty(exports, "__esModule", { value: true });
exports.SCOPE_DEADLINE = void 0;
exports.deadlineLeft = deadlineLeft;
/**
 * The key of a wait's own deadline in its options (a Recipient's: the test's
 * deadline, where the inbox is shared by the tests of a worker). A symbol, so
 * it is no public option.
 */
exports.SCOPE_DEADLINE = Symbol('mayfly.scopeDeadline');
/** Milliseconds until d, Infinity without one. */
function deadlineLeft(d) {
    const v = typeof d === 'function' ? d() : d;
    return v === undefined ? Infinity : Math.max(0, (v instanceof Date ? v.getTime() : v) - Date.now());
}
