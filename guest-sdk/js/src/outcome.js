// One reconcile's result in the contract's terms, shared by the component glue and the test
// harness so that a test sees exactly what the host would. Not a public API.

import { ACTIONS, Apply, Patch, RequeueAfter, Status, durationMillis } from './actions.js';
import { CacheError, PermanentError, ReconcileError, TransientError } from './errors.js';

/** `error` is undefined on success; `actions` never hold a `RequeueAfter`. */
export class Result {
  constructor({ actions = [], requeueAfterMs = undefined, error = undefined } = {}) {
    Object.assign(this, { actions, requeueAfterMs, error });
  }
}

export function toJson(value, what) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new TypeError(`${what} is not JSON: ${e.message}`);
  }
  if (text === undefined) throw new TypeError(`${what} is not JSON: ${typeof value}`);
  return text;
}

const payloadOf = (a) => (a instanceof Apply ? [a.object, 'an applied object'] : a instanceof Status ? [a.status, 'a status'] : a instanceof Patch ? [a.patch, 'a patch'] : undefined);

function encoded(action, where) {
  const payload = payloadOf(action);
  return [action, payload === undefined ? undefined : toJson(payload[0], `${where}: ${payload[1]}`)];
}

/**
 * `result` as the component glue encodes it, the one place that decides what encodes: the glue
 * sends it, the test harness checks it. Throws for what does not encode (a payload that is no
 * JSON, a retry delay of no duration), which fails the call as a bug in the plugin would.
 */
export function encode(result) {
  const actions = result.actions.map((a, i) => encoded(a, `actions[${i}]`));
  const { error } = result;
  if (error === undefined) return { actions, errorActions: [], retryAfterMs: undefined };
  const errorActions = error.actions.map((a, i) => encoded(a, `error.actions[${i}]`));
  const retryAfterMs = error.retryAfter === undefined || error.retryAfter === null ? undefined : durationMillis(error.retryAfter, 'retryAfter');
  return { actions, errorActions, retryAfterMs };
}

function split(actions) {
  if (!Array.isArray(actions)) {
    throw new TypeError(`reconcile must return an array of actions, not ${actions === null ? 'null' : typeof actions}`);
  }
  const result = new Result();
  actions.forEach((action, i) => {
    if (!ACTIONS.some((type) => action instanceof type)) {
      throw new TypeError(`actions[${i}] is not an action: build actions with apply, status, event, ...`);
    }
    if (action instanceof RequeueAfter) {
      const ms = durationMillis(action.seconds, 'requeueAfter');
      result.requeueAfterMs = result.requeueAfterMs === undefined || ms < result.requeueAfterMs ? ms : result.requeueAfterMs;
    } else {
      result.actions.push(action);
    }
  });
  return result;
}

function where(e) {
  const frame = String(e?.stack ?? '').split('\n').map((l) => l.match(/([^/\s(@]+\.[cm]?js):(\d+)/)).find(Boolean);
  return frame ? ` (at ${frame[1]}:${frame[2]})` : '';
}

/** Any exception as the error the host gets. */
export function asError(e) {
  if (e instanceof ReconcileError) return e;
  if (e instanceof CacheError) {
    // As the Rust SDK: only lost access is worth retrying; the rest fail alike until the
    // plugin or the object changes.
    return e.transient ? new TransientError(e.message) : new PermanentError(e.message);
  }
  // A bug in the plugin: retried with backoff, as a guest panic is.
  const name = e?.name ?? typeof e;
  const message = e?.message ?? String(e);
  return new TransientError(`plugin threw ${name}: ${message}${where(e)}`);
}

export function reconcile(plugin, request) {
  try {
    return split(plugin.reconcile(request));
  } catch (e) {
    return new Result({ error: asError(e) });
  }
}
