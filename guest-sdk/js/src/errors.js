/**
 * Errors a reconcile throws. The host records a Warning Event with the reason and message.
 *
 * A `TransientError` is retried with backoff (or after `retryAfter` seconds); a
 * `PermanentError` waits until the object or the plugin changes. Any other exception escaping
 * `reconcile` is a bug in the plugin: the host gets it as a transient error naming the
 * exception, and retries with backoff.
 */

import { Event, Status, durationMillis } from './actions.js';

export class ReconcileError extends Error {
  constructor(message, { reason = undefined, retryAfter = undefined, actions = [] } = {}) {
    super(message);
    if (typeof message !== 'string') throw new TypeError(`an error's message must be a string, not ${message === null ? 'null' : typeof message}`);
    if (reason !== undefined && reason !== null && typeof reason !== 'string') throw new TypeError(`an error's reason must be a string, not ${typeof reason}`);
    this.name = new.target.name;
    this.reason = reason ?? undefined;
    this.retryAfter = retryAfter;
    this.actions = [...actions];
    for (const action of this.actions) {
      if (!(action instanceof Status || action instanceof Event)) {
        throw new TypeError(`an error carries status and event actions only, not ${action?.constructor?.name}`);
      }
    }
    if (retryAfter !== undefined) durationMillis(retryAfter, 'retryAfter');
  }

  get transient() {
    return true;
  }
}

/** Retry with backoff: a conflict, a dependency not ready yet. */
export class TransientError extends ReconcileError {}

/** Do not retry until the object or the plugin changes: an invalid spec. */
export class PermanentError extends ReconcileError {
  constructor(message, { reason = undefined, actions = [] } = {}) {
    super(message, { reason, actions });
  }

  get transient() {
    return false;
  }
}

/**
 * The host refused a cache look-up. `kase` is the contract's case name (`undeclared-kind`,
 * `invalid-selector`, `out-of-scope`, `access-revoked`, `invalid-continue`). Left uncaught,
 * `access-revoked` is retried and the rest wait for a change, as in the Rust SDK.
 */
export class CacheError extends Error {
  constructor(kase, message) {
    super(message);
    this.name = 'CacheError';
    this.case = kase;
  }

  get transient() {
    return this.case === 'access-revoked';
  }
}
