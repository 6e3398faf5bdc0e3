// The test harness refuses and serves what the host would.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { CacheError, Grant, ObjectRef, TransientError, Trigger, apply, cache, event, grant, index, kinds, log, manifest, patch, prune, ref, remove, requeueAfter, status, watch } from '../src/index.js';
import { durationMillis } from '../src/actions.js';
import { TestCase } from '../src/testing.js';

const PRIMARY = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', namespace: 'ns', uid: 'u' } };

/** A plugin with this manifest (primary ConfigMap unless given) and reconcile function. */
const plugin = (reconcile, fields = {}) => ({
  manifest: () => manifest({ name: 'p', version: '0', primary: kinds.ConfigMap, ...fields }),
  reconcile,
});

const cm = (name, ns = 'ns', labels = {}) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: ns, uid: `${ns}-${name}`, labels } });

test('reading an undeclared kind fails the call even when the plugin catches it', () => {
  const reconcile = () => {
    try {
      cache.get(kinds.Secret, 's');
    } catch (e) {
      assert.ok(e instanceof CacheError);
    }
    return [status({ ok: true })];
  };
  const { error } = new TestCase(PRIMARY).run(plugin(reconcile));
  assert.ok(!error.transient);
  assert.match(error.message, /read kind v1\/Secret, which its manifest does not declare/);
});

test('an apply outside what is owned or granted is refused naming the grant to declare', () => {
  const { error } = new TestCase(PRIMARY).run(plugin(() => [apply(cm('b', 'elsewhere'))], { owns: [kinds.ConfigMap] }));
  assert.match(error.message, /no write grant lets it apply v1\/ConfigMap in namespace elsewhere/);
});

test('a grant covers writes in its namespaces', () => {
  const granted = plugin(() => [remove(cm('b', 'elsewhere'))], { writes: [grant(kinds.ConfigMap, { delete: true, namespaces: ['elsewhere'] })] });
  assert.equal(new TestCase(PRIMARY).run(granted).deletes.length, 1);
});

test('prune is refused without the manifest allowing it and outside phase apply', () => {
  assert.match(new TestCase(PRIMARY).run(plugin(() => [prune()])).error.message, /prune needs the manifest to allow it/);
  assert.match(new TestCase(PRIMARY).phase('cleanup').run(plugin(() => [prune()], { prune: true })).error.message, /phase apply only, not cleanup/);
});

test('a list comes in pages in namespace and name order', () => {
  const objects = [cm('b', 'y'), cm('a', 'y'), cm('c', 'x')];
  const reconcile = () => [status({ names: [...cache.pages(kinds.ConfigMap, { limit: 2 })].map((p) => p.map((o) => `${o.metadata.namespace}/${o.metadata.name}`)) })];
  assert.deepEqual(new TestCase(PRIMARY).cached(...objects).run(plugin(reconcile)).status, { names: [['ns/a', 'x/c'], ['y/a', 'y/b']] });
});

test('a kind watched only through a selector holds only what it selects', () => {
  const reconcile = () => [status({ n: cache.list(kinds.Pod).length })];
  const pod = (name, app) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'ns', labels: { app } } });
  const outcome = new TestCase(PRIMARY).cached(pod('a', 'web'), pod('b', 'db')).run(plugin(reconcile, { watches: [watch(kinds.Pod, { labels: 'app=web' })] }));
  assert.deepEqual(outcome.status, { n: 1 });
});

test('cached objects arrive without managed fields or the last-applied annotation', () => {
  const other = { ...cm('b'), metadata: { ...cm('b').metadata, managedFields: [{}], annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}' } } };
  const reconcile = () => [status({ meta: Object.keys(cache.get(kinds.ConfigMap, 'b', 'ns').metadata).sort() })];
  assert.deepEqual(new TestCase(PRIMARY).cached(other).run(plugin(reconcile)).status, { meta: ['labels', 'name', 'namespace', 'uid'] });
});

test('an unexpected exception is a transient error naming it', () => {
  const { error } = new TestCase(PRIMARY).run(plugin((r) => [status({ v: r.object.data.missing })]));
  assert.ok(error.transient);
  assert.match(error.message, /^plugin threw TypeError: /);
});

test('the shortest requeue wins and is not an action', () => {
  const outcome = new TestCase(PRIMARY).run(plugin(() => [requeueAfter(30), requeueAfter(5)]));
  assert.equal(outcome.requeueAfter, 5);
  assert.deepEqual(outcome.actions, []);
});

test('log lines are collected', () => {
  assert.ok(new TestCase(PRIMARY).run(plugin(() => (log.info('hello'), []))).logged('info', 'hello'));
});

for (const [name, fields, refusal] of [
  ['a finalizer not in domain/name form', { finalizer: 'cleanup' }, 'must look like `example.com/name`'],
  ['metadata-only naming only the primary', { metadataOnly: [kinds.ConfigMap] }, 'metadata-only kind v1/ConfigMap is not under owns, watches or reads'],
  ['an empty set in a selector', { primary: watch(kinds.ConfigMap, { labels: 'a in ()' }) }, 'holds 0 values'],
  ['a grant on no namespaces', { writes: [new Grant(kinds.Pod, { apply: true, namespaces: [] })] }, 'lists 0 namespaces'],
  ['a grant on an invalid namespace', { writes: [new Grant(kinds.Pod, { apply: true, namespaces: ['Team_A'] })] }, 'is not a valid namespace'],
]) {
  test(`a manifest with ${name} is refused as the host refuses it`, () => {
    assert.throws(() => new TestCase(PRIMARY).run(plugin(() => [], fields)), (e) => e.message.includes('the host would refuse this plugin at load') && e.message.includes(refusal));
  });
}

const writer = (actions) =>
  plugin(actions, { owns: [kinds.ConfigMap], deliverDeleted: true, writes: [grant(kinds.ConfigMap, { apply: true, patch: true, delete: true, namespaces: '*' })] });

for (const [name, actions, phase, refusal] of [
  ['an event reason with spaces', () => [event('Normal', 'Not synced', 'x')], 'apply', "actions[0]: the event reason \"Not synced\" must be a CamelCase word"],
  ['an apply without a name', () => [apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: {} })], 'apply', 'needs apiVersion, kind and metadata.name'],
  ['an apply with an invalid name', () => [apply(cm('Bad Name'))], 'apply', 'is not a valid object name'],
  ['a status in phase deleted', () => [status({ ok: true })], 'deleted', 'in phase deleted the primary is gone'],
  ['a merge patch that is a list', () => [patch(cm('b'), [{ op: 'remove', path: '/x' }])], 'apply', 'a merge patch must be a JSON object'],
  ['a delete with an invalid UID', () => [remove(new ObjectRef('v1', 'ConfigMap', 'b', 'ns', 'not a uid'))], 'apply', 'is not a valid UID'],
]) {
  test(`${name} fails the call as the host fails it`, () => {
    const { error } = new TestCase(PRIMARY).phase(phase).run(writer(actions));
    assert.ok(!error.transient);
    assert.ok(error.message.includes(refusal), error.message);
  });
}

test('the actions of an error are checked as a success s are', () => {
  const reconcile = () => {
    throw new TransientError('not yet', { actions: [event('Warning', 'Not ready', 'waiting')] });
  };
  assert.match(new TestCase(PRIMARY).run(plugin(reconcile)).error.message, /error\.actions\[0\]: the event reason "Not ready"/);
});

test('a duration that is not finite is refused where it is given', () => {
  for (const bad of [Infinity, NaN, -1, '5']) {
    assert.throws(() => new TransientError('later', { retryAfter: bad }), /retryAfter takes a finite duration/);
    assert.throws(() => requeueAfter(bad), /requeueAfter takes a finite duration/);
  }
});

test('the SDK ships the contract it is built against', () => {
  const shipped = readFileSync(new URL('../wit/plugin.wit', import.meta.url), 'utf8');
  const repo = readFileSync(new URL('../../../wit/plugin.wit', import.meta.url), 'utf8');
  assert.equal(shipped, repo, 'run scripts/sdk-assets (npm ci runs it): it ships wit/plugin.wit into the SDK');
});

test('a namespace asked for finds cluster-scoped objects as the host does', () => {
  const node = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1', uid: 'n' } };
  const seen = [];
  const reconcile = (request) => {
    seen.push(cache.get(kinds.Node, 'n1', request.namespace), cache.list(kinds.Node, { namespace: 'default' }).length);
    return [];
  };
  new TestCase(PRIMARY).cached(node).run(plugin(reconcile, { reads: [kinds.Node] }));
  assert.equal(seen[0]?.metadata.name, 'n1');
  assert.equal(seen[1], 1);
});

test('a null namespace is none, as the component reads it', () => {
  const found = [];
  new TestCase(PRIMARY).cached(cm('b', 'other')).run(plugin(() => found.push(cache.get(kinds.ConfigMap, 'b', null), cache.list(kinds.ConfigMap, { namespace: null }).length) && []));
  assert.equal(found[0]?.metadata.namespace, 'other');
  assert.equal(found[1], 2);
  assert.equal(event('Normal', 'Seen', 'ok', null).action, undefined);
});

test('a watch of one namespace without a selector sees only that namespace', () => {
  const pods = ['a', 'b'].map((ns) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: ns, uid: ns } }));
  const seen = [];
  new TestCase(PRIMARY).cached(...pods).run(plugin(() => seen.push(...cache.list(kinds.Pod)) && [], { watches: [watch(kinds.Pod, { namespace: 'a' })] }));
  assert.deepEqual(seen.map((o) => o.metadata.namespace), ['a']);
});

test('a metadata-only object loses the last-applied annotation before it is reduced', () => {
  const secret = { ...cm('b'), kind: 'Secret', data: { k: 'dg==' } };
  secret.metadata.annotations = { 'kubectl.kubernetes.io/last-applied-configuration': '{}', kept: 'yes' };
  const seen = [];
  const lean = plugin(() => seen.push(cache.get(kinds.Secret, 'b', 'ns')) && [], { reads: [kinds.Secret], metadataOnly: [kinds.Secret] });
  new TestCase(PRIMARY).cached(secret).run(lean);
  assert.deepEqual(seen[0], { apiVersion: 'v1', kind: 'Secret', metadata: { ...secret.metadata, annotations: { kept: 'yes' } } });
});

const mapper = (refs) => ({
  manifest: () => manifest({ name: 'p', version: '0', primary: kinds.ConfigMap, watches: [kinds.Secret] }),
  reconcile: () => [],
  map: () => refs,
});
const SECRET = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's', namespace: 'ns', uid: 's' } };

test('map fails where the host refuses its result', () => {
  const cases = [
    [[{ name: 'a' }], /result \[0\] is not an ObjectRef/],
    [[new ObjectRef('v1', 'ConfigMap', '../x', 'ns')], /result \[0\]: /],
    [[new ObjectRef('v1', 'Secret', 's', 'ns')], /must name primaries \(v1\/ConfigMap\)/],
    [new ObjectRef('v1', 'ConfigMap', 'a', 'ns'), /must return an array of ObjectRef/],
  ];
  for (const [refs, refused] of cases) assert.throws(() => new TestCase(PRIMARY).map(mapper(refs), SECRET), refused);
  const good = [new ObjectRef('v1', 'ConfigMap', 'a', 'ns')];
  assert.deepEqual(new TestCase(PRIMARY).map(mapper(good), SECRET), good);
});

test('more actions than the host takes fail the call', () => {
  const { error } = new TestCase(PRIMARY).run(plugin(() => Array(10_001).fill(status({}))));
  assert.match(error.message, /10001 actions, over the limit of 10000/);
});

test("a response over the plugin's byte limit fails the call", () => {
  const big = plugin(() => [status({ x: 'y'.repeat(2000) })], { settings: { responseLimitBytes: 1000 } });
  assert.match(new TestCase(PRIMARY).run(big).error.message, /over the 1000-byte cap/);
});

test("an error's actions must encode as JSON as the glue requires", () => {
  const cyclic = {};
  cyclic.self = cyclic;
  const { error } = new TestCase(PRIMARY).run(plugin(() => {
    throw new TransientError('not yet', { actions: [status(cyclic)] });
  }));
  assert.match(error.message, /error\.actions\[0\]: a status is not JSON/);
  assert.deepEqual(error.actions, []);
});

test('a retry delay changed to no duration fails as the glue would', () => {
  const { error } = new TestCase(PRIMARY).run(plugin(() => {
    const e = new TransientError('not yet', { retryAfter: 1 });
    e.retryAfter = Infinity;
    throw e;
  }));
  assert.ok(error.transient);
  assert.match(error.message, /plugin threw RangeError: retryAfter takes a finite duration/);
});

test('an event, a ref or an error of the wrong types is refused where it is built', () => {
  assert.throws(() => event('Info', 'Reason', 'message'), RangeError);
  assert.throws(() => event('Normal', 'Reason', 5), TypeError);
  assert.throws(() => new ObjectRef('v1', 'ConfigMap', 5), TypeError);
  assert.throws(() => new TransientError(['not', 'a', 'string']), TypeError);
});

test("a wait past the contract's range is clamped, not an overflow", () => {
  assert.equal(requeueAfter(1e306).seconds, 1e306);
  const { requeueAfter: seconds } = new TestCase(PRIMARY).run(plugin(() => [requeueAfter(1e306)]));
  assert.equal(seconds, Number(2n ** 64n - 1n) / 1000);
});

test('a cluster-scoped object under a watch of one namespace is served as the host serves it', () => {
  const node = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1', uid: 'n', labels: { role: 'x' } } };
  const seen = [];
  const watching = plugin(() => seen.push(...cache.list(kinds.Node)) && [], { watches: [watch(kinds.Node, { namespace: 'ns', labels: 'role=x' })] });
  new TestCase(PRIMARY).cached(node).run(watching);
  assert.deepEqual(seen.map((o) => o.metadata.name), ['n1']);
});

test("a plugin's byte limit is held to the host's ceiling", () => {
  const ceiling = 16 << 20;
  const huge = plugin(() => [status({ x: 'y'.repeat(ceiling) })], { settings: { responseLimitBytes: 2 ** 30 } });
  assert.match(new TestCase(PRIMARY).run(huge).error.message, new RegExp(`over the ${ceiling}-byte cap`));
});

test('map takes plain objects with the fields of an ObjectRef, as the glue does', () => {
  const refs = [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'a', namespace: 'ns' }];
  assert.deepEqual(new TestCase(PRIMARY).map(mapper(refs), SECRET), [new ObjectRef('v1', 'ConfigMap', 'a', 'ns')]);
});

test('a setting past its WIT type is refused, not wrapped by the glue', () => {
  const cases = [
    [{ deadlineMs: 2 ** 32 + 1000 }, "setting deadline-ms is 4294968296, which the contract's type cannot carry"],
    [{ memoryLimitBytes: 2n ** 64n }, "setting memory-limit-bytes is 1.8446744073709552e+19, which the contract's type cannot carry"],
    [{ resyncSeconds: 1.5 }, "setting resync-seconds is 1.5, which the contract's type cannot carry"],
    [{ maxConcurrentReconciles: 0 }, 'setting max-concurrent-reconciles is 0; leave it unset for the host default'],
  ];
  for (const [settings, refusal] of cases) {
    assert.throws(() => new TestCase(PRIMARY).run(plugin(() => [], { settings })), (e) => e.message.includes(refusal), refusal);
  }
  const largest = plugin(() => [status({})], { settings: { deadlineMs: 2 ** 32 - 1, memoryLimitBytes: 2n ** 64n - 1n } });
  assert.deepEqual(new TestCase(PRIMARY).run(largest).status, {});
});

test("a payload the host's serde_json cannot read fails the call as the host's decoding would", () => {
  let deep = {};
  for (let i = 0; i < 200; i++) deep = { d: deep };
  const cases = [
    [status(deep), /actions\[0\]: a status action is not valid JSON: recursion limit exceeded/],
    [status({ cut: '😀ok'.slice(1) }), /actions\[0\]: a status action is not valid JSON: lone leading surrogate/],
    [status(new Date(0)), /actions\[0\]: a status action must be a JSON object/],
  ];
  for (const [action, expected] of cases) {
    assert.match(new TestCase(PRIMARY).run(plugin(() => [action])).error.message, expected);
  }
});

test('an applied object is checked as the JSON the glue sends, without inherited fields', () => {
  const object = cm('b');
  const inherited = { apiVersion: 'v1', kind: 'ConfigMap', metadata: Object.create({ name: 'b' }) };
  const { error } = new TestCase(PRIMARY).run(plugin(() => [apply(inherited)], { owns: [kinds.ConfigMap] }));
  assert.match(error.message, /an apply action's object needs apiVersion, kind and metadata.name/);
  assert.equal(new TestCase(PRIMARY).run(plugin(() => [apply(object)], { owns: [kinds.ConfigMap] })).actions.length, 1);
});

// Rust's `Duration::from_secs_f64(s).as_millis()` on each, as the Python SDK's test has it.
test('a wait is whole milliseconds as the Rust SDK counts them', () => {
  const cases = [[0.003, 3n], [0.0015, 1n], [0.0005, 0n], [0.0009999999, 1n], [1, 1000n], [2.5, 2500n], [4503599627370.497, 4503599627370497n]];
  for (const [seconds, millis] of cases) assert.equal(durationMillis(seconds, 'requeueAfter'), millis, String(seconds));
});

test("an error's actions changed after it was built are held to status and events", () => {
  const reconcile = () => {
    const error = new TransientError('not yet', { actions: [status({ phase: 'Waiting' })] });
    error.actions.push(prune());
    throw error;
  };
  assert.match(new TestCase(PRIMARY).run(plugin(reconcile)).error.message, /error\.actions\[1\]: a failed reconcile may only set status and record events/);
});

// ---- contract 0.3 -------------------------------------------------------------------------

const deployment = (name, configMaps = [], ns = 'ns') => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name, namespace: ns, uid: name },
  spec: { template: { spec: { volumes: configMaps.map((c) => ({ name: c, configMap: { name: c } })) } } },
});

/** Maps a ConfigMap to the Deployments that mount it, through an index. */
const roller = {
  manifest: () => manifest({
    name: 'roller',
    version: '0',
    primary: kinds.Deployment,
    watches: [kinds.ConfigMap],
    indexes: [index('configmap', kinds.Deployment, ['spec.template.spec.volumes[*].configMap.name'])],
  }),
  reconcile: () => [],
  map: (related) => cache.byIndex(kinds.Deployment, 'configmap', related.metadata.name, { namespace: related.metadata.namespace }).map((d) => ref(d)),
};

test('map through an index finds the objects that name the key', () => {
  const c = new TestCase(deployment('web')).cached(deployment('web', ['settings']), deployment('db', ['other']), deployment('api', ['settings'], 'far'));
  assert.deepEqual(c.map(roller, cm('settings')).map((r) => r.name), ['web']);
});

test('a look-up by an undeclared index is refused as the host refuses it', () => {
  const reconcile = () => {
    cache.byIndex(kinds.Deployment, 'secret', 'x');
    return [];
  };
  const { error } = new TestCase(deployment('web')).run(plugin(reconcile, { primary: kinds.Deployment }));
  assert.match(error.message, /the manifest declares no index "secret" on apps\/v1\/Deployment/);
});

test('an annotation filter keeps unannotated objects out of the cache', () => {
  const tagged = { ...cm('tagged'), metadata: { ...cm('tagged').metadata, annotations: { team: 'a' } } };
  const seen = plugin(() => [status({ names: cache.list(kinds.ConfigMap).map((c) => c.metadata.name) })], { primary: watch(kinds.ConfigMap, { annotations: { team: 'a' } }) });
  assert.deepEqual(new TestCase(tagged).cached(cm('plain')).run(seen).status, { names: ['tagged'] });
});

test('a field selected read holds only the named objects', () => {
  const secret = (name) => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: 'ns' } });
  const seen = plugin(() => [status({ names: cache.list(kinds.Secret).map((s) => s.metadata.name) })], { reads: [watch(kinds.Secret, { fields: 'metadata.name=db' })] });
  assert.deepEqual(new TestCase(PRIMARY).cached(secret('db'), secret('api')).run(seen).status, { names: ['db'] });
});

test('triggers reach the reconcile', () => {
  const told = new Trigger('related-changed', { ref: new ObjectRef('v1', 'ConfigMap', 'settings', 'ns') });
  const seen = plugin((request) => [status({ why: request.triggers.map((t) => t.kind), what: request.triggers[0].ref.name })]);
  assert.deepEqual(new TestCase(PRIMARY).triggers(told, new Trigger('resync')).run(seen).status, { why: ['related-changed', 'resync'], what: 'settings' });
});

test('an apply keeps its force and precondition', () => {
  const [action] = new TestCase(PRIMARY).run(plugin(() => [apply(cm('child'), { force: false, uid: 'u-1' })], { owns: [kinds.ConfigMap] })).actions;
  assert.deepEqual([action.force, action.uid], [false, 'u-1']);
});

test('an apply whose precondition is no uid is refused as the host refuses it', () => {
  const { error } = new TestCase(PRIMARY).run(plugin(() => [apply(cm('child'), { uid: 'not a uid!' })], { owns: [kinds.ConfigMap] }));
  assert.match(error.message, /an apply action's precondition/);
});

test('a strategic merge patch that is no object is refused', () => {
  const granted = plugin(() => [patch(cm('b'), [], 'strategic')], { writes: [grant(kinds.ConfigMap, { patch: true })] });
  assert.match(new TestCase(PRIMARY).run(granted).error.message, /a strategic merge patch must be a JSON object/);
});

test('mapChange is told of a deletion', () => {
  const told = { ...roller, mapChange: (change, config) => (change.deleted ? [] : roller.map(change.object, config)) };
  const c = new TestCase(deployment('web')).cached(deployment('web', ['settings']));
  assert.deepEqual(c.map(told, cm('settings'), { deleted: true }), []);
  assert.deepEqual(c.map(told, cm('settings')).map((r) => r.name), ['web']);
});
