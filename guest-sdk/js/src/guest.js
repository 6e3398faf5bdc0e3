// The WIT glue: the component's imports and exports in the SDK's terms. Imported only by the
// entry module `wasmloop-js build` writes; everything else in the SDK runs under node too.

import { getObject, listByIndex, listObjects } from 'wasmloop:plugin/cache@0.3.0';
import { log as witLog } from 'wasmloop:plugin/log@0.3.0';

import { Apply, Delete, Event, ObjectRef, Patch, Status, asObjectRef } from './actions.js';
import { CacheError } from './errors.js';
import { install } from './host.js';
import * as outcome from './outcome.js';
import { SETTINGS, kindFields, kindRecord, manifestOf } from './manifest.js';
import { Envelope, Related, Request, Trigger, mapChange } from './request.js';

const gvk = kindRecord;

function cacheError(e) {
  const payload = e?.payload;
  if (payload && typeof payload.tag === 'string') return new CacheError(payload.tag, payload.val);
  return e;
}

const componentHost = {
  get(kind, namespace, name) {
    let found;
    try {
      found = getObject(gvk(kind), namespace, name);
    } catch (e) {
      throw cacheError(e);
    }
    return found === undefined || found === null ? null : JSON.parse(found.json);
  },
  page(kind, namespace, labelSelector, limit, token) {
    let page;
    try {
      page = listObjects(gvk(kind), namespace, labelSelector, limit, token);
    } catch (e) {
      throw cacheError(e);
    }
    return [page.items.map((o) => JSON.parse(o.json)), page.continueToken];
  },
  indexPage(kind, index, key, namespace, limit, token) {
    let page;
    try {
      page = listByIndex(gvk(kind), index, key, namespace, limit, token);
    } catch (e) {
      throw cacheError(e);
    }
    return [page.items.map((o) => JSON.parse(o.json)), page.continueToken];
  },
  log(level, message) {
    witLog(level, message);
  },
};

const envelope = (o) => new Envelope(o.apiVersion, o.kind, o.name, o.namespace, o.uid, o.json);
const objectRef = (r) => ({ apiVersion: r.apiVersion, kind: r.kind, name: r.name, namespace: r.namespace, uid: r.uid });
const fromRef = (r) => new ObjectRef(r.apiVersion, r.kind, r.name, r.namespace, r.uid);
// A generation is an s64, a BigInt here; any a cluster holds is a safe integer.
const generation = (g) => (g === undefined || g === null ? undefined : Number(g));

function trigger(t) {
  switch (t.tag) {
    case 'primary-changed':
      return new Trigger(t.tag, { generation: { old: generation(t.val.old), new: generation(t.val.new) } });
    case 'owned-changed':
    case 'related-changed':
      return new Trigger(t.tag, { ref: fromRef(t.val) });
    case 'conflict': {
      const { target, fields, more } = t.val;
      const conflict = { target: fromRef(target), fields: fields.map(({ manager, field }) => ({ manager, field })), more };
      return new Trigger(t.tag, { ref: conflict.target, conflict });
    }
    default:
      return new Trigger(t.tag);
  }
}

function action([a, payload]) {
  if (a instanceof Apply) return { tag: 'apply', val: { object: payload, force: a.force, uid: a.uid } };
  if (a instanceof Delete) return { tag: 'delete', val: objectRef(a.target) };
  if (a instanceof Patch) return { tag: 'patch', val: { target: objectRef(a.target), kind: a.kind, patch: payload } };
  if (a instanceof Status) return { tag: 'status', val: payload };
  if (a instanceof Event) {
    return { tag: 'event', val: { eventType: a.type === 'Normal' ? 'normal' : 'warning', reason: a.reason, message: a.message, action: a.action } };
  }
  return { tag: 'prune' };
}

function witManifest(m) {
  const scope = (g) => {
    if (g.namespaces === undefined) return { tag: 'primary-namespace' };
    if (g.namespaces === '*') return { tag: 'any' };
    return { tag: 'namespaces', val: [...g.namespaces] };
  };
  const s = m.settings;
  // The glue would wrap a value past its WIT type's range (a u32 as `value >>> 0`): refuse it
  // instead. The ranges are the WIT types'; the test harness refuses these (and 0) in the host's words.
  const within = (key) => {
    const v = s[key];
    if (v === undefined || v === null) return undefined;
    const max = BigInt(SETTINGS[key]);
    const n = typeof v === 'bigint' || Number.isInteger(v) ? BigInt(v) : -1n;
    if (n < 0n || n > max) throw new RangeError(`plugin ${m.name}: setting ${key} must be an integer from 0 to ${max}`);
    return n;
  };
  const u32 = (key) => {
    const n = within(key);
    return n === undefined ? undefined : Number(n);
  };
  return {
    ...kindFields(m),
    writes: m.writes.map((g) => ({ kind: gvk(g.kind), verbs: { apply: g.apply, patch: g.patch, delete: g.delete }, scope: scope(g) })),
    finalizer: m.finalizer,
    prune: m.prune,
    deliverDeleted: m.deliverDeleted,
    deliverPrevious: m.deliverPrevious,
    settings: {
      maxConcurrentReconciles: u32('maxConcurrentReconciles'),
      deadlineMs: u32('deadlineMs'),
      memoryLimitBytes: within('memoryLimitBytes'),
      responseLimitBytes: within('responseLimitBytes'),
      resyncSeconds: u32('resyncSeconds'),
    },
  };
}

/** The `plugin` and `cacheOptions` exports for `reconciler` (`{ manifest, reconcile, map?, mapChange? }`). */
export function exportsFor(reconciler) {
  install(componentHost);
  const plugin = {
    manifest() {
      return witManifest(manifestOf(reconciler));
    },
    reconcile(r) {
      const request = new Request(
        envelope(r.object),
        r.owned.map(envelope),
        r.phase,
        r.previous === undefined || r.previous === null ? undefined : envelope(r.previous),
        r.attempt,
        r.config,
        r.triggers.map(trigger),
        r.triggersDropped,
      );
      let result = outcome.reconcile(reconciler, request);
      let encoded;
      try {
        encoded = outcome.encode(result);
      } catch (e) {
        result = new outcome.Result({ error: outcome.asError(e) });
        encoded = { actions: [], errorActions: [], retryAfterMs: undefined };
      }
      const { error } = result;
      if (error === undefined) return { actions: encoded.actions.map(action), requeueAfterMs: result.requeueAfterMs };
      const failure = new Error(error.message);
      const { retryAfterMs } = encoded;
      failure.payload = { message: error.message, transient: error.transient, reason: error.reason, retryAfterMs, actions: encoded.errorActions.map(action) };
      throw failure;
    },
    map(change, config) {
      const related = change.object;
      try {
        const refs = mapChange(reconciler, new Related(JSON.parse(related.json), change.deleted), JSON.parse(config || '{}'));
        return refs.map((r) => objectRef(asObjectRef(r)));
      } catch (e) {
        // map has no error channel: say why in the host's log before the call fails.
        witLog('error', `map of ${related.kind} ${related.name}: ${outcome.asError(e).message}`);
        throw e;
      }
    },
  };
  const cacheOptions = {
    keepFields() {
      return manifestOf(reconciler).keeps().map(([kind, managedFields, lastApplied]) => ({ kind: gvk(kind), fields: { managedFields, lastApplied } }));
    },
  };
  return { plugin, cacheOptions };
}
