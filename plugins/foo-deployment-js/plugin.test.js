// foo-deployment's behaviour under node: the same cases as the Rust plugin's unit tests.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { kinds } from '@wasmloop/sdk';
import { TestCase } from '@wasmloop/sdk/testing';

import plugin from './plugin.js';

const foo = (deploymentName = 'example-foo', replicas = 1) => ({
  apiVersion: 'samplecontroller.k8s.io/v1alpha1',
  kind: 'Foo',
  metadata: { name: 'example-foo', namespace: 'default', uid: 'foo-uid' },
  spec: { deploymentName, replicas },
});

const deployment = (ownerUid, available = 0) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: {
    name: 'example-foo',
    namespace: 'default',
    uid: 'dep-uid',
    ownerReferences: ownerUid === undefined ? [] : [{ apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', name: 'example-foo', uid: ownerUid, controller: true }],
  },
  status: { availableReplicas: available },
});

test('a new Foo applies the nginx Deployment with its replicas and labels', () => {
  const [d] = new TestCase(foo('example-foo', 3)).run(plugin).applied(kinds.Deployment);
  assert.deepEqual([d.metadata.name, d.metadata.namespace, d.spec.replicas], ['example-foo', 'default', 3]);
  assert.deepEqual(d.spec.template.metadata.labels, { app: 'nginx', controller: 'example-foo' });
  assert.deepEqual(d.spec.template.spec.containers, [{ name: 'nginx', image: 'nginx:latest' }]);
});

test('a Foo with its Deployment asks to prune every other child', () => {
  assert.ok(new TestCase(foo()).run(plugin).prunes);
});

test('success records the Synced Event', () => {
  const last = new TestCase(foo()).run(plugin).events.at(-1);
  assert.deepEqual([last.type, last.reason, last.message], ['Normal', 'Synced', 'Foo synced successfully']);
});

test('available replicas of the owned Deployment are mirrored into status', () => {
  assert.deepEqual(new TestCase(foo('example-foo', 2)).owned(deployment('foo-uid', 2)).run(plugin).status, { availableReplicas: 2 });
});

test('an unchanged status is not written again', () => {
  const primary = { ...foo('example-foo', 2), status: { availableReplicas: 2 } };
  assert.equal(new TestCase(primary).owned(deployment('foo-uid', 2)).run(plugin).status, undefined);
});

test('a Deployment the Foo does not control is left alone with ErrResourceExists', () => {
  const { error } = new TestCase(foo()).cached(deployment(undefined)).run(plugin);
  assert.ok(error.transient);
  assert.equal(error.reason, 'ErrResourceExists');
  assert.equal(error.message, 'Resource "example-foo" already exists and is not managed by Foo');
});

test('an empty deploymentName fails permanently, so nothing is pruned', () => {
  const { error } = new TestCase(foo('')).cached(deployment('foo-uid', 1)).run(plugin);
  assert.ok(!error.transient);
  assert.equal(error.reason, 'InvalidSpec');
});

test('cleanup and deleted phases do nothing', () => {
  for (const phase of ['cleanup', 'deleted']) assert.deepEqual(new TestCase(foo()).phase(phase).run(plugin).actions, []);
});

test('a Deployment controlled by another Foo is left alone', () => {
  const { error } = new TestCase(foo()).cached(deployment('another-foo-uid')).run(plugin);
  assert.equal(error.reason, 'ErrResourceExists');
});

test('a malformed Foo is a permanent error naming the object', () => {
  const primary = foo();
  primary.spec.replicas = 'three';
  const { error } = new TestCase(primary).run(plugin);
  assert.ok(!error.transient);
  assert.match(error.message, /cannot decode Foo default\/example-foo: replicas must be a 32-bit integer/);
});

test('a Deployment the Rust twin cannot decode is a permanent error naming it', () => {
  const observed = deployment('foo-uid');
  observed.status.availableReplicas = '1';
  const { error } = new TestCase(foo()).owned(observed).run(plugin);
  assert.match(error.message, /cannot decode Deployment default\/example-foo: availableReplicas must be a 32-bit integer/);
});

test("a spec as serde's list form decodes as the Rust twin's does", () => {
  const primary = { ...foo(), spec: ['example-foo', 2] };
  const [d] = new TestCase(primary).run(plugin).applied(kinds.Deployment);
  assert.deepEqual([d.metadata.name, d.spec.replicas], ['example-foo', 2]);
});
