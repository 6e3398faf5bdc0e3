/**
 * What a plugin declares about itself: its primary kind, what it owns, watches, reads and
 * writes. The host reads it once per load and refuses a manifest it cannot serve; so does the
 * test harness, so a test of a plugin the host would refuse fails.
 *
 * @example
 * const m = manifest({ name: 'hello', version: '0.1.0', primary: kinds.ConfigMap, owns: [kinds.Deployment], prune: true });
 */

import { Kind, hasKind } from './kinds.js';

/**
 * Which objects of `kind` the plugin wants to see. Every filter given must hold, and the host's
 * cache keeps only what they select:
 * - `namespace` or `namespaces`: only these namespaces (none: every namespace);
 * - `labels`: a label selector in Kubernetes syntax (`app=web,tier!=cache`);
 * - `fields`: a field selector the API server applies (`metadata.name=db`);
 * - `annotations`: annotations each object carries, key to value (`null`: only present);
 * - `generationChanged`: call the plugin only when `metadata.generation` changed (a primary's
 *   status-only updates do not call it).
 *
 * @example
 * watch(kinds.Secret, { fields: 'metadata.name=db' });
 */
export class Watch {
  constructor(kind, { namespace = undefined, labels = undefined, namespaces = [], fields = undefined, annotations = {}, generationChanged = false } = {}) {
    if (typeof namespaces === 'string') throw new TypeError(`watch namespaces ${JSON.stringify(namespaces)}: give an array of namespaces`);
    if (annotations === null || typeof annotations !== 'object' || Array.isArray(annotations)) {
      throw new TypeError('watch annotations: give an object of key to value (null: only present)');
    }
    Object.assign(this, { kind, namespace, labels, namespaces: Object.freeze([...namespaces]), fields, annotations: Object.freeze({ ...annotations }), generationChanged });
    Object.freeze(this);
  }

  /** Every namespace given, `namespace` and `namespaces` together. */
  get namespaceList() {
    return [...this.namespaces, ...(this.namespace === undefined || this.namespace === null ? [] : [this.namespace])];
  }
}

/**
 * An index the host keeps over a declared kind: `cache.byIndex(kind, name, key)` finds the
 * objects whose `fields` (paths such as `spec.template.spec.volumes[*].configMap.name`) reach
 * `key`, without reading every object of the kind.
 */
export class Index {
  constructor(name, kind, fields) {
    if (!Array.isArray(fields)) throw new TypeError(`index ${JSON.stringify(name)} fields: give an array of field paths`);
    Object.assign(this, { name, kind, fields: Object.freeze([...fields]) });
    Object.freeze(this);
  }
}

export function index(name, kind, fields) {
  return new Index(name, kind, fields);
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
    indexes = [],
  }) {
    Object.assign(this, { name, version, primary, owns, watches, reads, metadataOnly, writes, finalizer, prune, deliverDeleted, deliverPrevious, settings, keepManagedFields, keepLastApplied, indexes });
  }

  get primaryWatch() {
    return this.primary instanceof Watch ? this.primary : new Watch(this.primary);
  }

  get watchList() {
    return this.watches.map((w) => (w instanceof Watch ? w : new Watch(w)));
  }

  get readList() {
    return this.reads.map((r) => (r instanceof Watch ? r : new Watch(r)));
  }

  /** Every kind the plugin may read: primary, owned, watched and read. */
  declaredKinds() {
    const seen = [];
    for (const kind of [this.primaryWatch.kind, ...this.owns, ...this.watchList.map((w) => w.kind), ...this.readList.map((r) => r.kind)]) {
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
}

/**
 * The fields of the contract's `plugin-manifest` record that name the plugin and its kinds, as
 * the component's glue and the test harness both hand them on: `key` turns each field's
 * camelCase name into the one the receiver reads (the glue's own, or the kebab-case JSON of
 * the rules component).
 */
export function kindFields(m, key = (name) => name) {
  const gvk = kindRecord;
  const selector = (w) => ({
    kind: gvk(w.kind),
    namespaces: w.namespaceList,
    [key('labelSelector')]: w.labels,
    [key('fieldSelector')]: w.fields,
    annotations: Object.entries(w.annotations).map(([k, v]) => ({ key: k, value: v ?? undefined })),
    [key('generationChanged')]: w.generationChanged,
  });
  return {
    name: m.name,
    version: m.version,
    primary: selector(m.primaryWatch),
    owns: m.owns.map(gvk),
    watches: m.watchList.map(selector),
    reads: m.readList.map(selector),
    [key('metadataOnly')]: m.metadataOnly.map(gvk),
    indexes: m.indexes.map((i) => ({ name: i.name, kind: gvk(i.kind), fields: [...i.fields] })),
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
