/**
 * Run a plugin's logic under node (`node --test`), with no wasm and no cluster.
 *
 * `TestCase` plays the host: it builds the request, serves cache look-ups from the objects you
 * give it (only for kinds the manifest declares, and only what the plugin's watches select, as
 * the host does), strips cached objects as the host's cache does, collects log lines, and
 * refuses what the host would refuse (an undeclared read, a write no grant covers, a misused
 * prune, an action the host would not decode, a response over the host's limits, a payload that
 * is no JSON). `run` returns an `Outcome`.
 *
 * One difference stays: the host gives every reconcile a fresh instance of the plugin, so
 * module-level state never outlives a call there; under node the plugin's module is loaded
 * once per test process. Keep state out of module scope (the host would drop it anyway).
 *
 * @example
 * const outcome = new TestCase(configMap).run(plugin);
 * assert.deepEqual(outcome.status, { ok: true });
 */

import { Apply, Delete, Event, ObjectRef, Patch, Prune, Status, asObjectRef } from './actions.js';
import { CacheError, PermanentError } from './errors.js';
import { install } from './host.js';
import { Kind, hasKind } from './kinds.js';
import { manifestOf } from './manifest.js';
import * as outcome from './outcome.js';
import { Envelope, Related, Request, mapChange } from './request.js';
import * as rules from './contract-rules.js';

export const PAGE_SIZE = 500;
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';
/**
 * The host's default limits on a response, and the default ceiling of a plugin's own
 * `responseLimitBytes` (`host/sandbox/src/config.rs`; an operator may set others).
 */
export const MAX_ACTIONS = 10_000;
export const RESPONSE_LIMIT_BYTES = 4 << 20;
export const RESPONSE_LIMIT_CEILING = 16 << 20;

const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
const kindOf = (obj) => Kind.of(obj?.apiVersion ?? '', obj?.kind ?? '');
const labelsOf = (obj) => obj?.metadata?.labels ?? {};
const placeOf = (obj) => [obj?.metadata?.namespace ?? '', obj?.metadata?.name ?? ''];
const comparePlaces = (a, b) => (a[0] === b[0] ? (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0) : a[0] < b[0] ? -1 : 1);

/** `plugin`'s manifest, refused as the host would refuse it at load. */
export function checked(plugin) {
  const m = manifestOf(plugin);
  const error = rules.checkManifest(m);
  if (error !== null) throw new Error(`the host would refuse this plugin at load: plugin ${JSON.stringify(m.name)}: ${error}; fix its manifest()`);
  return m;
}

/**
 * `obj` as the host's cache holds it for this plugin: stripped first, then, for a metadata-only
 * kind, reduced to its metadata (managedFields never kept there).
 */
export function asCached(m, obj) {
  const copy = clone(obj);
  const meta = copy?.metadata;
  if (meta === null || typeof meta !== 'object') return copy;
  const kind = kindOf(copy);
  const metadataOnly = hasKind(m.metadataOnly, kind);
  if (metadataOnly || !hasKind(m.keepManagedFields, kind)) delete meta.managedFields;
  const annotations = meta.annotations;
  if (!hasKind(m.keepLastApplied, kind) && annotations && typeof annotations === 'object' && LAST_APPLIED in annotations) {
    delete annotations[LAST_APPLIED];
    if (Object.keys(annotations).length === 0) delete meta.annotations;
  }
  return metadataOnly ? { apiVersion: copy.apiVersion, kind: copy.kind, metadata: meta } : copy;
}

/**
 * `wasmloop_contract::cache::in_namespace`: a namespace asked for finds cluster-scoped objects
 * too (a Node is found whatever namespace is given).
 */
function inNamespace(wanted, obj) {
  const ns = placeOf(obj)[0];
  return wanted === undefined || !ns || ns === wanted;
}

class FakeHost {
  constructor(m, objects) {
    this.manifest = m;
    const latest = new Map();
    for (const obj of objects) latest.set(JSON.stringify([obj.apiVersion, obj.kind, ...placeOf(obj)]), asCached(m, obj));
    this.objects = [...latest.values()].filter((o) => this.#held(o));
    this.logs = [];
    this.undeclared = undefined;
  }

  #held(obj) {
    // The host's own answer: namespaces, labels, fields, annotations and the finalizer.
    return rules.cacheHolds(this.manifest, obj);
  }

  #of(kind) {
    if (!hasKind(this.manifest.declaredKinds(), kind)) {
      const message = `plugin ${JSON.stringify(this.manifest.name)} read kind ${kind}, which its manifest does not declare; add it to owns, watches or reads`;
      // The host fails the whole call for it, even if the plugin catches the error.
      this.undeclared ??= message;
      throw new CacheError('undeclared-kind', message);
    }
    return this.objects.filter((o) => kind.matches(o)).sort((a, b) => comparePlaces(placeOf(a), placeOf(b)));
  }

  get(kind, namespace, name) {
    const found = this.#of(kind).find((o) => {
      return placeOf(o)[1] === name && inNamespace(namespace, o);
    });
    return found === undefined ? null : clone(found);
  }

  page(kind, namespace, labelSelector, limit, token) {
    const ofKind = this.#of(kind);
    const text = labelSelector ?? '';
    try {
      // The host refuses a selector that does not parse even when nothing is cached.
      rules.selectorMatches(text, {});
    } catch (e) {
      throw new CacheError('invalid-selector', e.message);
    }
    const wanted = (labels) => rules.selectorMatches(text, labels);
    return pageOf(ofKind.filter((o) => inNamespace(namespace, o) && wanted(labelsOf(o))), limit, token);
  }

  indexPage(kind, index, key, namespace, limit, token) {
    const ofKind = this.#of(kind);
    if (!this.manifest.indexes.some((i) => i.kind.equals(kind) && i.name === index)) {
      throw new CacheError('unknown-index', `plugin ${this.manifest.name}: the manifest declares no index ${JSON.stringify(index)} on ${kind}; declare it under \`indexes\``);
    }
    const filed = ofKind.filter((o) => inNamespace(namespace, o) && rules.indexKeys(this.manifest, index, o).includes(key));
    return pageOf(filed, limit, token);
  }

  log(level, message) {
    this.logs.push([level, message]);
  }
}

/** One page of `items` (in (namespace, name) order) after `token`, as the host pages. */
function pageOf(items, limit, token) {
  let after;
  if (token !== undefined && token !== null) {
    try {
      after = JSON.parse(token).map(String);
    } catch {
      throw new CacheError('invalid-continue', `continue token ${JSON.stringify(token)} is no position this host produced`);
    }
  }
  const rest = items.filter((o) => after === undefined || comparePlaces(placeOf(o), after) > 0);
  const size = limit === 0 ? PAGE_SIZE : Math.min(limit, PAGE_SIZE);
  const page = rest.slice(0, size);
  const next = rest.length > size ? JSON.stringify(placeOf(page[page.length - 1])) : undefined;
  return [page.map(clone), next];
}

function ungranted(m, primary, action) {
  const primaryNs = primary.metadata?.namespace;
  let verb;
  let kind;
  let ns;
  if (action instanceof Apply) {
    [verb, kind, ns] = ['apply', kindOf(action.object), action.object.metadata?.namespace];
  } else if (action instanceof Patch || action instanceof Delete) {
    const t = action.target;
    [verb, kind, ns] = [action instanceof Patch ? 'patch' : 'delete', Kind.of(t.apiVersion, t.kind), t.namespace];
  } else {
    return null;
  }
  ns = ns || primaryNs;
  const implied = (verb === 'apply' || verb === 'delete') && ns === primaryNs && hasKind(m.owns, kind);
  if (implied || m.writes.some((g) => g.kind.equals(kind) && g.allows(verb, ns, primaryNs))) return null;
  const place = ns ? `in namespace ${ns}` : 'cluster-scoped';
  return `plugin ${JSON.stringify(m.name)}: no write grant lets it ${verb} ${kind} ${place}; declare one with grant(Kind.of(${JSON.stringify(kind.apiVersion)}, ${JSON.stringify(kind.kind)}), { ${verb}: true, namespaces: ... })`;
}

const KINDS = [
  [Apply, 'apply'],
  [Delete, 'delete'],
  [Patch, 'patch'],
  [Status, 'status'],
  [Event, 'event'],
  [Prune, 'prune'],
];
const kindName = (action) => KINDS.find(([type]) => action instanceof type)[1];

/**
 * The host's first refusal of a response's actions, in its order: the rules about the whole
 * response, then each action decoded and its grant checked. The host's rules answer through
 * the rules component; the grants are this harness's (the operator's confinement is not).
 * `encoded`: `[action, payload]` as the glue sends them.
 */
function refused(m, primary, phase, encoded, failed) {
  const where = `plugin ${JSON.stringify(m.name)}`;
  const whole = rules.checkResponse(encoded.map(([a]) => kindName(a)), failed, phase, Boolean(m.prune));
  if (whole !== null) return `${where}: ${whole}`;
  const field = failed ? 'error.actions' : 'actions';
  for (const [i, [action, payload]] of encoded.entries()) {
    if (action instanceof Prune) continue;
    const bad = rules.checkAction(action, payload, phase === 'deleted');
    if (bad !== null) return `${where}: ${field}[${i}]: ${bad}`;
    const denied = ungranted(m, primary, action);
    if (denied !== null) return denied;
  }
  return null;
}

/** The strings an action crosses the boundary as (`host/sandbox/src/lift.rs` counts each). */
function stringsOf(action) {
  const t = action.target;
  const strings = t instanceof ObjectRef ? [t.apiVersion, t.kind, t.name, t.namespace, t.uid] : [];
  if (action instanceof Apply) strings.push(outcome.toJson(action.object, 'an applied object'), action.uid);
  else if (action instanceof Status) strings.push(outcome.toJson(action.status, 'a status'));
  else if (action instanceof Patch) strings.push(outcome.toJson(action.patch, 'a patch'));
  else if (action instanceof Event) strings.push(action.reason, action.message, action.action);
  return strings;
}

/**
 * The host's limits on a response, counted as it lifts one: entries, then bytes of every string
 * (the plugin's responseLimitBytes, or the host's default).
 */
function overLimits(m, result) {
  const { error } = result;
  const actions = error === undefined ? result.actions : error.actions;
  const where = `plugin ${JSON.stringify(m.name)}`;
  if (actions.length > MAX_ACTIONS) return `${where}: it returned ${actions.length} actions, over the limit of ${MAX_ACTIONS}; return fewer`;
  const strings = actions.flatMap(stringsOf);
  if (error !== undefined) strings.push(error.message, error.reason);
  return overBytes(m, strings);
}

function overBytes(m, strings) {
  const size = strings.filter((s) => typeof s === 'string').reduce((n, s) => n + Buffer.byteLength(s), 0);
  const own = m.settings.responseLimitBytes;
  const limit = own === undefined || own === null ? RESPONSE_LIMIT_BYTES : Math.min(Number(own), RESPONSE_LIMIT_CEILING);
  if (size > limit) {
    return `plugin ${JSON.stringify(m.name)}: the response is at least ${size} bytes, over the ${limit}-byte cap; return fewer or smaller actions, or raise responseLimitBytes in the plugin's settings`;
  }
  return null;
}

/** What a native reconcile returned and logged. */
export class Outcome {
  constructor(result, logs) {
    this.result = result;
    this.logs = logs;
  }

  /** The actions; throws when the reconcile failed. */
  get actions() {
    const e = this.result.error;
    if (e !== undefined) throw new Error(`reconcile failed (${e.transient ? 'transient' : 'permanent'}): ${e.message}`);
    return this.result.actions;
  }

  /** The error; throws when the reconcile succeeded. */
  get error() {
    if (this.result.error === undefined) throw new Error(`reconcile succeeded with ${this.result.actions.length} action(s)`);
    return this.result.error;
  }

  applied(kind = undefined) {
    return this.actions.filter((a) => a instanceof Apply && (kind === undefined || kind.matches(a.object))).map((a) => a.object);
  }

  get status() {
    const found = this.actions.filter((a) => a instanceof Status);
    return found.length ? found[found.length - 1].status : undefined;
  }

  get events() {
    return this.actions.filter((a) => a instanceof Event);
  }

  get patches() {
    return this.actions.filter((a) => a instanceof Patch);
  }

  get deletes() {
    return this.actions.filter((a) => a instanceof Delete).map((a) => a.target);
  }

  get prunes() {
    return this.actions.some((a) => a instanceof Prune);
  }

  /** Seconds, the shortest asked for. */
  get requeueAfter() {
    const ms = this.result.requeueAfterMs;
    return ms === undefined ? undefined : Number(ms) / 1000;
  }

  logged(level, text) {
    return this.logs.some(([l, message]) => l === level && message.includes(text));
  }
}

/** One native reconcile, set up as the host would set it up. Builder methods chain. */
export class TestCase {
  constructor(primary) {
    Envelope.of(primary);
    Object.assign(this, { primary, ownedObjects: [], cachedObjects: [], configValue: {}, phaseName: 'apply', previousObject: undefined, attemptCount: 0, triggerList: [] });
  }

  /** Why the call happens (`request.triggers`), oldest first; the host keeps 32. */
  triggers(...triggers) {
    this.triggerList.push(...triggers);
    return this;
  }

  /** Children handed over in `request.owned` (and readable from the cache). */
  owned(...children) {
    this.ownedObjects.push(...children);
    return this;
  }

  /** Other objects in the cache. */
  cached(...objects) {
    this.cachedObjects.push(...objects);
    return this;
  }

  config(value) {
    this.configValue = value;
    return this;
  }

  phase(phase) {
    this.phaseName = phase;
    return this;
  }

  previous(obj) {
    this.previousObject = obj;
    return this;
  }

  attempt(n) {
    this.attemptCount = n;
    return this;
  }

  /** The request the plugin gets, its objects as the host's cache holds them. */
  request(m) {
    const cached = (o) => Envelope.of(asCached(m, o));
    return new Request(
      cached(this.primary),
      this.ownedObjects.map(cached),
      this.phaseName,
      this.previousObject === undefined ? undefined : cached(this.previousObject),
      this.attemptCount,
      JSON.stringify(this.configValue),
      this.triggerList.slice(-32),
      Math.max(0, this.triggerList.length - 32),
    );
  }

  #host(m) {
    return new FakeHost(m, [this.primary, ...this.ownedObjects, ...this.cachedObjects]);
  }

  /**
   * Runs `plugin.reconcile` and collects what it did, as the host would see it: the component
   * glue's encoding first, then the host's limits, its decoding and its grants.
   */
  run(plugin) {
    const m = checked(plugin);
    const request = this.request(m);
    const host = this.#host(m);
    const previous = install(host);
    let result;
    try {
      result = outcome.reconcile(plugin, request);
    } finally {
      install(previous);
    }
    let encoded;
    try {
      encoded = outcome.encode(result);
    } catch (e) {
      result = new outcome.Result({ error: outcome.asError(e) });
      encoded = outcome.encode(result);
    }
    const failed = result.error !== undefined;
    let denied = host.undeclared ?? overLimits(m, result);
    denied ??= refused(m, this.primary, this.phaseName, failed ? encoded.errorActions : encoded.actions, failed);
    if (denied !== null) result = new outcome.Result({ error: new PermanentError(denied) });
    return new Outcome(result, host.logs);
  }

  /**
   * Runs `plugin.mapChange` (or `plugin.map`) on `related`, deleted or not, with this case's
   * cache and config. Throws where the host would
   * fail the call: a result that is not an array of `ObjectRef`s of the primary's kind with valid
   * names, or a read of an undeclared kind.
   */
  map(plugin, related, { deleted = false } = {}) {
    const m = checked(plugin);
    const host = this.#host(m);
    const previous = install(host);
    let refs;
    try {
      refs = mapChange(plugin, new Related(asCached(m, related), deleted), clone(this.configValue));
    } finally {
      install(previous);
    }
    const where = `plugin ${JSON.stringify(m.name)}: map`;
    if (host.undeclared !== undefined) throw new Error(host.undeclared);
    if (!Array.isArray(refs)) throw new Error(`${where} must return an array of ObjectRef, not ${refs === null ? 'null' : typeof refs}`);
    if (refs.length > MAX_ACTIONS) throw new Error(`${where} returned ${refs.length} references, over the limit of ${MAX_ACTIONS}`);
    const primary = m.primaryWatch.kind;
    const named = refs.map((r, i) => {
      try {
        return asObjectRef(r);
      } catch (e) {
        throw new Error(`${where} result [${i}] is not an ObjectRef: ${e.message}`);
      }
    });
    const over = overBytes(m, named.flatMap((r) => [r.apiVersion, r.kind, r.name, r.namespace, r.uid]));
    if (over !== null) throw new Error(`${over} (map)`);
    named.forEach((r, i) => {
      const bad = rules.checkRef(r);
      if (bad !== null) throw new Error(`${where} result [${i}]: ${bad}`);
      if (!Kind.of(r.apiVersion, r.kind).equals(primary)) {
        throw new Error(`${where} returned ${r.apiVersion}/${r.kind} ${JSON.stringify(r.name)}, but it must name primaries (${primary}) by name`);
      }
    });
    return named;
  }
}

export { ObjectRef };
