/**
 * What a plugin declares about itself: its primary kind, what it owns, watches, reads and
 * writes. The host reads it once per load and refuses a manifest it cannot serve; so does the
 * test harness, so a test of a plugin the host would refuse fails.
 *
 * @example
 * const m = manifest({ name: 'hello', version: '0.1.0', primary: kinds.ConfigMap, owns: [kinds.Deployment], prune: true });
 */

import { Kind, hasKind } from './kinds.js';

/** Objects of `kind` the plugin wants to see, optionally in one namespace and through a label selector. */
export class Watch {
  constructor(kind, { namespace = undefined, labels = undefined } = {}) {
    Object.assign(this, { kind, namespace, labels });
    Object.freeze(this);
  }
}

export function watch(kind, options = {}) {
  return new Watch(kind, options);
}

/**
 * Leave to write `kind` beyond what is implied. `namespaces`: undefined means the primary's
 * namespace, a list means those namespaces, `'*'` means anywhere.
 */
export class Grant {
  constructor(kind, { apply = false, patch = false, delete: del = false, namespaces = undefined } = {}) {
    if (!(apply || patch || del)) throw new RangeError(`grant on ${kind} allows no verb: set apply, patch or delete`);
    if (typeof namespaces === 'string' && namespaces !== '*') {
      throw new RangeError(`grant namespaces ${JSON.stringify(namespaces)}: give a list, or "*" for anywhere`);
    }
    const scope = namespaces === undefined || namespaces === '*' ? namespaces : Object.freeze([...namespaces]);
    Object.assign(this, { kind, apply, patch, delete: del, namespaces: scope });
    Object.freeze(this);
  }

  /** True when this grant lets the plugin `verb` an object of its kind there. */
  allows(verb, namespace, primaryNamespace) {
    if (!this[verb]) return false;
    if (this.namespaces === undefined) return namespace === primaryNamespace;
    if (this.namespaces === '*') return true;
    return namespace !== undefined && this.namespaces.includes(namespace);
  }
}

export function grant(kind, options) {
  return new Grant(kind, options);
}

/**
 * The settings and the largest value each one's WIT type holds: the glue would wrap a larger
 * one silently (a u32 is lowered as `value >>> 0`), so a deadline of 2**32 + 1000 would be 1 s.
 */
export const SETTINGS = {
  maxConcurrentReconciles: 2 ** 32 - 1,
  deadlineMs: 2 ** 32 - 1,
  memoryLimitBytes: 2n ** 64n - 1n,
  responseLimitBytes: 2n ** 64n - 1n,
  resyncSeconds: 2 ** 32 - 1,
};

/** A plugin's manifest. Fields mirror the contract's `plugin-manifest` record. */
export class Manifest {
  constructor({
    name,
    version,
    primary,
    owns = [],
    watches = [],
    reads = [],
    metadataOnly = [],
    writes = [],
    finalizer = undefined,
    prune = false,
    deliverDeleted = false,
    deliverPrevious = false,
    settings = {},
    keepManagedFields = [],
    keepLastApplied = [],
  }) {
    Object.assign(this, { name, version, primary, owns, watches, reads, metadataOnly, writes, finalizer, prune, deliverDeleted, deliverPrevious, settings, keepManagedFields, keepLastApplied });
  }

  get primaryWatch() {
    return this.primary instanceof Watch ? this.primary : new Watch(this.primary);
  }

  get watchList() {
    return this.watches.map((w) => (w instanceof Watch ? w : new Watch(w)));
  }

  /** Every kind the plugin may read: primary, owned, watched and read. */
  declaredKinds() {
    const seen = [];
    for (const kind of [this.primaryWatch.kind, ...this.owns, ...this.watchList.map((w) => w.kind), ...this.reads]) {
      if (!hasKind(seen, kind)) seen.push(kind);
    }
    return seen;
  }

  /** `[kind, managedFields, lastApplied]` for every kind that keeps a stripped field. */
  keeps() {
    const kinds = [];
    for (const kind of [...this.keepManagedFields, ...this.keepLastApplied]) if (!hasKind(kinds, kind)) kinds.push(kind);
    return kinds.map((k) => [k, hasKind(this.keepManagedFields, k), hasKind(this.keepLastApplied, k)]);
  }

  /**
   * Which objects of `kind` the host caches for this plugin: `null` for all of them, else only
   * what these selected watches select. The primary is always whole.
   */
  visible(kind) {
    if (kind.equals(this.primaryWatch.kind) || hasKind(this.owns, kind) || hasKind(this.reads, kind)) return null;
    const watches = this.watchList.filter((w) => w.kind.equals(kind));
    // One watch of every namespace that selects everything sees it all; a watch of one
    // namespace sees only that namespace, selector or not.
    if (watches.length === 0 || watches.some((w) => !(w.labels ?? '').trim() && w.namespace === undefined)) return null;
    return watches;
  }
}

/**
 * The fields of the contract's `plugin-manifest` record that name the plugin and its kinds, as
 * the component's glue and the test harness both hand them on: `key` turns each field's
 * camelCase name into the one the receiver reads (the glue's own, or the kebab-case JSON of
 * the rules component).
 */
export function kindFields(m, key = (name) => name) {
  const gvk = kindRecord;
  const selector = (w) => ({ kind: gvk(w.kind), namespace: w.namespace, [key('labelSelector')]: w.labels });
  return {
    name: m.name,
    version: m.version,
    primary: selector(m.primaryWatch),
    owns: m.owns.map(gvk),
    watches: m.watchList.map(selector),
    reads: m.reads.map(gvk),
    [key('metadataOnly')]: m.metadataOnly.map(gvk),
  };
}

/** A kind as the contract's `gvk` record. */
export const kindRecord = (k) => ({ group: k?.group, version: k?.version, kind: k?.kind });

export function manifest(fields) {
  return new Manifest(fields);
}

/** What `reconciler.manifest()` returns, as a `Manifest` (a plain object is taken as its fields). */
export function manifestOf(reconciler) {
  const m = reconciler.manifest();
  return m instanceof Manifest ? m : new Manifest(m);
}
