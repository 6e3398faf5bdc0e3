/**
 * What a reconcile asks the host to do, as plain values built by small helpers.
 *
 * @example
 * [apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' } }), status({ ready: true })]
 */

/** Names one object. With `uid` set the host only acts while the live object has it. */
export class ObjectRef {
  constructor(apiVersion, kind, name, namespace = undefined, uid = undefined) {
    // null is "none", as the component's glue reads it.
    Object.assign(this, { apiVersion, kind, name, namespace: namespace ?? undefined, uid: uid ?? undefined });
    // The contract's strings: anything else would fail in the component, not here.
    for (const field of ['apiVersion', 'kind', 'name']) mustBeString(this, field);
    for (const field of ['namespace', 'uid']) mustBeString(this, field, true);
    Object.freeze(this);
  }
}

function mustBeString(value, field, optional = false) {
  const got = value[field];
  if (typeof got !== 'string' && !(optional && got === undefined)) {
    throw new TypeError(`${value.constructor.name}.${field} must be a string${optional ? ' or undefined' : ''}, not ${got === null ? 'null' : typeof got}`);
  }
}

/**
 * `r` as an `ObjectRef`: itself, or a plain object with its fields, checked alike (what `map`
 * returns reaches the host through this, in the component and under the harness).
 */
export function asObjectRef(r) {
  return r instanceof ObjectRef ? r : new ObjectRef(r?.apiVersion, r?.kind, r?.name, r?.namespace, r?.uid);
}

/** A reference to `obj` (a plain object), pinned to its UID unless `withUid` is false. */
export function ref(obj, { withUid = true } = {}) {
  const meta = obj.metadata ?? {};
  return new ObjectRef(obj.apiVersion, obj.kind, meta.name, meta.namespace ?? undefined, withUid ? meta.uid || undefined : undefined);
}

/**
 * Server-side apply of `object`: the plugin's whole intent for the fields it manages (field
 * manager `wasmloop/<name>`), so a field it applied before and leaves out now is removed. Apply
 * a partial object naming only the fields the plugin owns. `force` takes fields other managers
 * own; without it, an apply that would take one writes nothing and the next reconcile carries a
 * `conflict` trigger naming them. `uid`: act only while the live object has this UID.
 */
export class Apply {
  constructor(object, { force = true, uid = undefined } = {}) {
    if (!isPlainObject(object)) throw new TypeError('apply takes the object as a plain object');
    if (typeof force !== 'boolean') throw new TypeError(`Apply.force must be a boolean, not ${typeof force}`);
    Object.assign(this, { object, force, uid: uid ?? undefined });
    mustBeString(this, 'uid', true);
  }
}
export class Delete {
  constructor(target) {
    if (!(target instanceof ObjectRef)) throw new TypeError('a delete targets an ObjectRef');
    this.target = target;
  }
}
export class Patch {
  constructor(target, kind, patch) {
    if (!(target instanceof ObjectRef)) throw new TypeError('a patch targets an ObjectRef');
    if (!PATCH_KINDS.includes(kind)) throw new RangeError(`patch kind ${JSON.stringify(kind)}: use one of ${PATCH_KINDS}`);
    Object.assign(this, { target, kind, patch });
  }
}
export class Status {
  constructor(status) {
    if (!isPlainObject(status)) throw new TypeError('status takes the status content as a plain object');
    this.status = status;
  }
}
export class Event {
  constructor(type, reason, message, action = undefined) {
    if (!EVENT_TYPES.includes(type)) throw new RangeError(`event type ${JSON.stringify(type)}: use one of ${EVENT_TYPES}`);
    Object.assign(this, { type, reason, message, action: action ?? undefined });
    for (const field of ['reason', 'message']) mustBeString(this, field);
    mustBeString(this, 'action', true);
  }
}
export class Prune {}
export class RequeueAfter {
  constructor(seconds) {
    durationMillis(seconds, 'requeueAfter');
    this.seconds = seconds;
  }
}

export const ACTIONS = [Apply, Delete, Patch, Status, Event, Prune, RequeueAfter];
export const EVENT_TYPES = ['Normal', 'Warning'];
export const PATCH_KINDS = ['merge', 'json', 'strategic'];
const MAX_MILLIS = 2n ** 64n - 1n;

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** `x` to the nearest integer, ties to even (as Rust rounds a float's nanoseconds). */
function roundHalfEven(x) {
  const floor = Math.floor(x);
  const rest = x - floor;
  if (rest !== 0.5) return Math.round(x);
  return floor % 2 === 0 ? floor : floor + 1;
}

/**
 * `seconds` as the contract's `u64` milliseconds: the one encoding of a duration, for the
 * component glue and the test harness alike. Throws for what has none (negative, infinite, not
 * a number).
 */
export function durationMillis(seconds, what) {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) {
    throw new RangeError(`${what} takes a finite duration of 0 seconds or more, not ${String(seconds)}`);
  }
  // As the Rust SDK's `Duration::from_secs_f64(s).as_millis()`: to the nearest nanosecond
  // (ties to even), then whole milliseconds, the rest dropped; so 0.003 is 3 ms and 0.0015 is
  // 1. Past 2**53 ns a float holds no nanoseconds to round. Past the contract's range the
  // wait is as good as forever: clamped, not an overflow.
  const nanos = seconds * 1e9;
  if (nanos < 2 ** 53) return BigInt(roundHalfEven(nanos)) / 1_000_000n;
  const ms = Math.floor(seconds * 1000);
  return ms >= Number(MAX_MILLIS) ? MAX_MILLIS : BigInt(ms);
}

/**
 * Server-side apply `obj`. A namespaced object without a namespace goes to the primary's.
 * `{ force: false }` reports another manager's fields instead of taking them; `{ uid }` makes
 * the live object's UID a precondition.
 */
export function apply(obj, options = {}) {
  return new Apply(obj, options);
}

/** Delete `target`: an `ObjectRef` or the object itself (pinned to its UID). */
export function remove(target) {
  return new Delete(target instanceof ObjectRef ? target : ref(target));
}

/**
 * Patch `target` with a JSON merge patch (an object), with `kind` `'json'` RFC 6902 operations,
 * or with `'strategic'` a strategic merge patch (built-in kinds: lists merge by their key).
 */
export function patch(target, document, kind = 'merge') {
  return new Patch(target instanceof ObjectRef ? target : ref(target), kind, document);
}

/** Set the primary's status to `content`. */
export function status(content) {
  return new Status(content);
}

/** Record an Event on the primary. */
export function event(type, reason, message, action = undefined) {
  return new Event(type, reason, message, action);
}

/** Ask the host to prune children this response does not apply (needs `prune: true`). */
export function prune() {
  return new Prune();
}

/** Reconcile this primary again after `seconds`. */
export function requeueAfter(seconds) {
  return new RequeueAfter(seconds);
}
