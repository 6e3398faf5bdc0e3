/**
 * What one reconcile sees: the primary, its owned children, the phase, the config and why it
 * runs (its triggers). Objects
 * cross the boundary as JSON text with their routing fields beside it; each is parsed the first
 * time the plugin reads it, so filtering children by kind parses nothing.
 */

import { ObjectRef } from './actions.js';

export const PHASES = ['apply', 'cleanup', 'deleted'];

/** One object as it crossed the boundary: routing fields and unparsed JSON. */
export class Envelope {
  constructor(apiVersion, kind, name, namespace, uid, json) {
    Object.assign(this, { apiVersion, kind, name, namespace, uid, json });
  }

  static of(obj) {
    const meta = obj?.metadata ?? {};
    for (const [key, value] of [['apiVersion', obj?.apiVersion], ['kind', obj?.kind], ['metadata.name', meta.name]]) {
      if (typeof value !== 'string' || !value) {
        throw new TypeError(`object has no ${key}: give every object apiVersion, kind and metadata.name`);
      }
    }
    return new Envelope(obj.apiVersion, obj.kind, meta.name, meta.namespace ?? undefined, meta.uid || '', JSON.stringify(obj));
  }

  isKind(kind) {
    return this.apiVersion === kind.apiVersion && this.kind === kind.kind;
  }

  parse() {
    return JSON.parse(this.json);
  }
}

export const TRIGGER_KINDS = ['primary-changed', 'owned-changed', 'related-changed', 'resync', 'requeue', 'retry', 'conflict'];

/**
 * Why a reconcile runs. `kind` is one of `TRIGGER_KINDS`; `ref` names the object of
 * `owned-changed`, `related-changed` and `conflict`; `generation` is `{ old, new }` for
 * `primary-changed`; `conflict` is `{ target, fields: [{ manager, field }], more }` for
 * `conflict`.
 *
 * @example
 * new Trigger('related-changed', { ref: new ObjectRef('v1', 'Secret', 'db', 'shop') });
 */
export class Trigger {
  constructor(kind, { ref = undefined, generation = undefined, conflict = undefined } = {}) {
    if (!TRIGGER_KINDS.includes(kind)) throw new RangeError(`trigger kind ${JSON.stringify(kind)}: one of ${TRIGGER_KINDS}`);
    Object.assign(this, { kind, ref, generation, conflict });
    Object.freeze(this);
  }
}

/**
 * A change of a related object, as `mapChange` sees it: its new state (its last, when
 * `deleted`: it was deleted or left the watch's selection).
 */
export class Related {
  constructor(object, deleted = false) {
    Object.assign(this, { object, deleted });
    Object.freeze(this);
  }
}

/**
 * What the plugin's `mapChange` returns, or its `map` on the object when it gives no
 * `mapChange`, or nothing: the component glue and the test harness map alike.
 */
export function mapChange(reconciler, change, config) {
  if (reconciler.mapChange) return reconciler.mapChange(change, config);
  return reconciler.map ? reconciler.map(change.object, config) : [];
}

/** One reconcile's input. `phase` is `'apply'`, `'cleanup'` or `'deleted'`. */
export class Request {
  #object;
  #owned;
  #previous;
  #config;

  constructor(object, owned, phase, previous = undefined, attempt = 0, config = '{}', triggers = [], triggersDropped = 0) {
    if (!PHASES.includes(phase)) throw new RangeError(`phase ${JSON.stringify(phase)}: one of ${PHASES}`);
    Object.assign(this, { envelope: object, ownedEnvelopes: owned, phase, previousEnvelope: previous, attempt, configJson: config });
    /** Why it runs: every trigger since the last call, oldest first (at most 32). */
    this.triggers = [...triggers];
    /** Triggers beyond those listed. */
    this.triggersDropped = triggersDropped;
  }

  get name() {
    return this.envelope.name;
  }

  get namespace() {
    return this.envelope.namespace;
  }

  get uid() {
    return this.envelope.uid;
  }

  /** A reference to the primary, pinned to its UID. */
  ref() {
    const e = this.envelope;
    return new ObjectRef(e.apiVersion, e.kind, e.name, e.namespace, e.uid || undefined);
  }

  /** `Kind namespace/name`, the way the host names an object in messages. */
  describe() {
    return `${this.envelope.kind} ${this.namespace ? `${this.namespace}/${this.name}` : this.name}`;
  }

  /** The primary: `spec` is the desired state, `status` the last reported. */
  get object() {
    this.#object ??= this.envelope.parse();
    return this.#object;
  }

  /** The primary's children of owned kinds, from the cache. */
  get owned() {
    this.#owned ??= this.ownedEnvelopes.map((e) => e.parse());
    return this.#owned;
  }

  /** The children of one kind; only those are parsed. */
  ownedOf(kind) {
    return this.ownedEnvelopes.filter((e) => e.isKind(kind)).map((e) => e.parse());
  }

  /** With `deliverPrevious`: the primary at this plugin's last successful reconcile. */
  get previous() {
    if (this.previousEnvelope === undefined) return undefined;
    this.#previous ??= this.previousEnvelope.parse();
    return this.#previous;
  }

  /** The plugin's configuration (`{}` when none is given). */
  get config() {
    this.#config ??= JSON.parse(this.configJson || '{}');
    return this.#config;
  }
}
