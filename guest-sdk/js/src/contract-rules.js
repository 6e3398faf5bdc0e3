/**
 * The host's rules, asked of the contract's rules component (`wit/rules/rules.wit`, built from
 * `guest-sdk/rules`, shipped into `rules/` and transpiled by jco in `scripts/sdk-assets`, which
 * `npm ci` runs as this package's `prepare`): the test harness refuses what the host refuses, in
 * the host's words, and no rule is written twice. Not a public API; the harness (`testing.js`)
 * is its one user, and the plugin's own bundle never imports it.
 *
 * Each check returns `null` when the host accepts the value, else the host's sentence.
 *
 * @example
 * checkValue('namespace', 'team-a'); // null
 */

import { Apply, Delete, Event, Patch, Prune, Status } from './actions.js';
import { kindFields, kindRecord } from './manifest.js';

let component;
try {
  component = await import('../rules/rules.js');
} catch (e) {
  if (e?.code !== 'ERR_MODULE_NOT_FOUND') throw e;
  throw new Error(
    `the contract's rules component is missing (${new URL('../rules/rules.js', import.meta.url).pathname}): run scripts/sdk-assets in the checkout (npm ci runs it), which builds guest-sdk/rules and transpiles it with jco`,
  );
}
const { rules, cacheRules } = component;

const orNull = (answer) => answer ?? null;

/**
 * `rule` is one of the WIT's `value-rule` cases: `name`, `namespace`, `kind`, `api-version`,
 * `uid`, `event-reason`, `event-action`, `finalizer`, `plugin-name`.
 */
export const checkValue = (rule, value) => orNull(rules.checkValue(rule, value));

/** A label selector as a watch sends it to the API server. */
export const checkSelector = (text) => orNull(rules.checkSelector(text));

/**
 * Whether `text` selects these labels, as the host's cache filters; throws a `RangeError` with
 * the host's sentence when it does not parse. Labels that are not strings are no labels, as the
 * host reads JSON.
 */
export function selectorMatches(text, labels) {
  const pairs = labels !== null && typeof labels === 'object' ? Object.entries(labels).filter(([, v]) => typeof v === 'string') : [];
  return result(() => rules.selectorMatches(text, pairs));
}

function result(call) {
  try {
    return call();
  } catch (e) {
    // jco throws a result's `err` side as an error carrying it.
    if (typeof e?.payload === 'string') throw new RangeError(e.payload);
    throw e;
  }
}

/**
 * Whether the host's cache holds `obj` for a plugin with manifest `m`: its namespaces, labels,
 * fields, annotations and finalizer, as the informers select.
 */
export const cacheHolds = (m, obj) => result(() => cacheRules.holds(toJson(manifestRecord(m)), toJson(obj)));

/**
 * The keys the manifest's index `index` files `obj` under, as the host's index does; a
 * `RangeError` with the host's sentence when the manifest declares no such index.
 */
export const indexKeys = (m, index, obj) => result(() => cacheRules.indexKeys(toJson(manifestRecord(m)), index, toJson(obj)));

export const checkManifest = (m) => orNull(rules.checkManifest(toJson(manifestRecord(m))));

/**
 * The rules about a whole response: `kinds` are the WIT's `action-kind` names of its actions,
 * in order; `phase` the WIT's `phase` name.
 */
export const checkResponse = (kinds, failed, phase, pruneAllowed) => orNull(rules.checkResponse(kinds, failed, phase, pruneAllowed));

/** `action` as the glue sends it, `payload` its JSON text (an apply's object, a status, a patch). */
export const checkAction = (action, payload, deleted) => orNull(rules.checkAction(toJson(actionRecord(action, payload)), deleted));

/** A reference (`map`'s result) as the host checks a delete's target. */
export const checkRef = (ref) => checkAction(new Delete(ref), undefined, false);

const gvk = kindRecord;
const setting = (v) => v ?? null;
const kebab = (name) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
// A BigInt (a u64 setting) goes as the JSON number it is, which JSON.stringify cannot write.
const BIG = '\u0000bigint:';
const toJson = (value) => JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? BIG + v : v)).replace(/"\\u0000bigint:(-?\d+)"/g, '$1');

/** `m` as the WIT's `plugin-manifest` record in JSON, with `keep-fields`: what the glue hands the host. */
export function manifestRecord(m) {
  const scope = (g) => (g.namespaces === undefined ? 'primary-namespace' : g.namespaces === '*' ? 'any' : { namespaces: [...g.namespaces] });
  const s = m.settings;
  return {
    ...kindFields(m, kebab),
    writes: m.writes.map((g) => ({ kind: gvk(g.kind), verbs: ['apply', 'patch', 'delete'].filter((v) => g[v]), scope: scope(g) })),
    'keep-fields': m.keeps().map(([k, managedFields, lastApplied]) => ({ kind: gvk(k), 'managed-fields': managedFields, 'last-applied': lastApplied })),
    finalizer: m.finalizer ?? null,
    settings: {
      'max-concurrent-reconciles': setting(s.maxConcurrentReconciles),
      'deadline-ms': setting(s.deadlineMs),
      'memory-limit-bytes': setting(s.memoryLimitBytes),
      'response-limit-bytes': setting(s.responseLimitBytes),
      'resync-seconds': setting(s.resyncSeconds),
    },
  };
}

const ref = (r) => ({ 'api-version': r.apiVersion, kind: r.kind, name: r.name, namespace: r.namespace ?? null, uid: r.uid ?? null });

/** `a` as the WIT's `action` variant in JSON. */
export function actionRecord(a, payload) {
  if (a instanceof Apply) return { apply: { object: payload, force: a.force, uid: a.uid ?? null } };
  if (a instanceof Delete) return { delete: ref(a.target) };
  if (a instanceof Patch) return { patch: { target: ref(a.target), kind: a.kind, patch: payload } };
  if (a instanceof Status) return { status: payload };
  if (a instanceof Event) {
    return { event: { 'event-type': a.type === 'Normal' ? 'normal' : 'warning', reason: a.reason, message: a.message, action: a.action ?? null } };
  }
  if (a instanceof Prune) return 'prune';
  throw new TypeError(`not an action: ${a}`);
}
