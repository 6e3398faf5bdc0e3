/**
 * What a reconcile asks the host to do, as plain values built by small helpers.
 *
 * @example
 * [apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' } }), status({ ready: true })]
 */

/** Names one object. With `uid` set the host only acts while the live object has it. */
export class ObjectRef {
  constructor(apiVersion, kind, name, namespace = undefined, uid = undefined) {
    Object.assign(this, { apiVersion, kind, name, namespace, uid });
    Object.freeze(this);
  }
}

/** A reference to `obj` (a plain object), pinned to its UID unless `withUid` is false. */
export function ref(obj, { withUid = true } = {}) {
  const meta = obj.metadata ?? {};
  return new ObjectRef(obj.apiVersion, obj.kind, meta.name, meta.namespace ?? undefined, withUid ? meta.uid || undefined : undefined);
}

export class Apply {
  constructor(object) {
    this.object = object;
  }
}
export class Delete {
  constructor(target) {
    this.target = target;
  }
}
export class Patch {
  constructor(target, kind, patch) {
    Object.assign(this, { target, kind, patch });
  }
}
export class Status {
  constructor(status) {
    this.status = status;
  }
}
export class Event {
  constructor(type, reason, message, action = undefined) {
    Object.assign(this, { type, reason, message, action });
  }
}
export class Prune {}
export class RequeueAfter {
  constructor(seconds) {
    this.seconds = seconds;
  }
}

export const ACTIONS = [Apply, Delete, Patch, Status, Event, Prune, RequeueAfter];
export const EVENT_TYPES = ['Normal', 'Warning'];
export const PATCH_KINDS = ['merge', 'json'];
const MAX_MILLIS = 2n ** 64n - 1n;

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * `seconds` as the contract's `u64` milliseconds: the one encoding of a duration, for the
 * component glue and the test harness alike. Throws for what has none (negative, infinite, not
 * a number).
 */
export function durationMillis(seconds, what) {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) {
    throw new RangeError(`${what} takes a finite duration of 0 seconds or more, not ${String(seconds)}`);
  }
  const ms = BigInt(Math.round(seconds * 1000));
  return ms > MAX_MILLIS ? MAX_MILLIS : ms;
}

/** Server-side apply `obj`. A namespaced object without a namespace goes to the primary's. */
export function apply(obj) {
  if (!isPlainObject(obj)) throw new TypeError('apply takes the object as a plain object');
  return new Apply(obj);
}

/** Delete `target`: an `ObjectRef` or the object itself (pinned to its UID). */
export function remove(target) {
  return new Delete(target instanceof ObjectRef ? target : ref(target));
}

/** Patch `target` with a JSON merge patch (an object) or, with `kind: 'json'`, RFC 6902 operations. */
export function patch(target, document, kind = 'merge') {
  if (!PATCH_KINDS.includes(kind)) throw new RangeError(`patch kind ${JSON.stringify(kind)}: use one of ${PATCH_KINDS}`);
  return new Patch(target instanceof ObjectRef ? target : ref(target), kind, document);
}

/** Set the primary's status to `content`. */
export function status(content) {
  if (!isPlainObject(content)) throw new TypeError('status takes the status content as a plain object');
  return new Status(content);
}

/** Record an Event on the primary. */
export function event(type, reason, message, action = undefined) {
  if (!EVENT_TYPES.includes(type)) throw new RangeError(`event type ${JSON.stringify(type)}: use one of ${EVENT_TYPES}`);
  return new Event(type, reason, message, action);
}

/** Ask the host to prune children this response does not apply (needs `prune: true`). */
export function prune() {
  return new Prune();
}

/** Reconcile this primary again after `seconds`. */
export function requeueAfter(seconds) {
  durationMillis(seconds, 'requeueAfter');
  return new RequeueAfter(seconds);
}
