// The test harness refuses and serves what the host would.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { CacheError, Grant, ObjectRef, TransientError, apply, cache, event, grant, kinds, log, manifest, patch, prune, remove, requeueAfter, status, watch } from '../src/index.js';
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
  ['metadata-only naming only the primary', { metadataOnly: [kinds.ConfigMap] }, 'must also be owned, watched or read'],
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
  assert.equal(shipped, repo, 'copy wit/plugin.wit into guest-sdk/js/wit/');
});
