/**
 * `foo-deployment` in JavaScript: Kubernetes' sample-controller as a wasmloop plugin, the twin of
 * `plugins/foo-deployment` (Rust) and `plugins/foo-deployment-py`. All three produce the same
 * actions on the same inputs, malformed ones included (serde's words aside); the golden tests
 * hold them to it.
 *
 * A `Foo` (`samplecontroller.k8s.io/v1alpha1`) names a Deployment and a replica count. The
 * plugin keeps that Deployment in shape (labels `app: nginx` and `controller: <foo>`, one
 * `nginx:latest` container, the replica count), mirrors its `status.availableReplicas` into the
 * Foo's status and records a `Synced` Event. A Deployment of that name that this Foo does not
 * control is never touched: the Foo gets an `ErrResourceExists` Warning and backs off.
 */

import { Kind, PermanentError, TransientError, apply, cache, event, kinds, manifest, prune, status } from '@wasmloop/sdk';

export const FOO = new Kind('samplecontroller.k8s.io', 'v1alpha1', 'Foo');
const IMAGE = 'nginx:latest';

/** The Deployment a Foo (its `metadata`) asks for. Owner references are the host's job. */
export function desiredDeployment(meta, deploymentName, replicas) {
  const labels = { app: 'nginx', controller: meta.name ?? '' };
  const metadata = { name: deploymentName };
  if (!isNone(meta.namespace)) metadata.namespace = meta.namespace;
  const spec = {
    selector: { matchLabels: { ...labels } },
    template: { metadata: { labels: { ...labels } }, spec: { containers: [{ name: 'nginx', image: IMAGE }] } },
  };
  if (!isNone(replicas)) spec.replicas = replicas;
  return { apiVersion: 'apps/v1', kind: 'Deployment', metadata, spec };
}

const isI32 = (v) => Number.isInteger(v) && v >= -(2 ** 31) && v < 2 ** 31;
const isString = (v) => typeof v === 'string';
const isNone = (v) => v === undefined || v === null;
const optional = (fits) => (v) => isNone(v) || fits(v);

/** The Rust twin's words for an object its types do not fit (serde's detail aside). */
const malformed = (what, why) => new PermanentError(`cannot decode ${what}: ${why}; fix the object or the plugin's type for it`);

/**
 * `obj[key]` (`fallback` when absent) if it `fits`: the Rust twin's serde types, where an absent
 * field takes its default but a null one must fit too.
 */
function field(obj, key, fallback, fits, what, why) {
  const value = key in obj ? obj[key] : fallback;
  if (!fits(value)) throw malformed(what, `${key} ${why}`);
  return value;
}

/**
 * `value` as serde's derived struct reads it: an object, or an array of the fields in order
 * (serde accepts both), shorter arrays leaving the rest to their defaults.
 */
function struct(value, fields, what, name) {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value;
  if (Array.isArray(value) && value.length <= fields.length) return Object.fromEntries(value.map((v, i) => [fields[i], v]));
  throw malformed(what, `${name} must be an object`);
}

/** `[metadata, spec, status]` of the Foo, held to the Rust twin's types: a permanent error otherwise. */
export function decodeFoo(request) {
  const [foo, what] = [request.object, request.describe()];
  const meta = struct('metadata' in foo ? foo.metadata : {}, ['name', 'namespace'], what, 'metadata');
  for (const key of ['name', 'namespace']) field(meta, key, null, optional(isString), what, 'must be a string');
  const spec = struct('spec' in foo ? foo.spec : {}, ['deploymentName', 'replicas'], what, 'spec');
  field(spec, 'deploymentName', '', isString, what, 'must be a string');
  field(spec, 'replicas', null, optional(isI32), what, 'must be a 32-bit integer');
  let reported = foo.status;
  if (!isNone(reported)) {
    reported = struct(reported, ['availableReplicas'], what, 'status');
    field(reported, 'availableReplicas', 0, isI32, what, 'must be a 32-bit integer');
  }
  return [meta, spec, isNone(reported) ? undefined : reported];
}

/**
 * The observed Deployment's owners and available replicas, held to the Rust twin's types
 * (k8s-openapi's OwnerReference): a permanent error otherwise.
 */
export function decodeDeployment(deployment) {
  const named = deployment.metadata !== null && typeof deployment.metadata === 'object' ? deployment.metadata : {};
  const [ns, name] = [named.namespace, named.name ?? ''];
  const what = ns ? `Deployment ${ns}/${name}` : `Deployment ${name}`;
  const meta = struct('metadata' in deployment ? deployment.metadata : {}, ['ownerReferences'], what, 'metadata');
  const owners = field(meta, 'ownerReferences', [], Array.isArray, what, 'must be a list');
  for (const owner of owners) {
    // k8s-openapi reads a missing or null required field as "", a wrong type as an error.
    if (owner === null || typeof owner !== 'object' || Array.isArray(owner) || !['apiVersion', 'kind', 'name', 'uid'].every((k) => optional(isString)(owner[k]))) {
      throw malformed(what, "an ownerReference's apiVersion, kind, name and uid must be strings");
    }
    for (const key of ['controller', 'blockOwnerDeletion']) field(owner, key, null, optional((v) => typeof v === 'boolean'), what, 'must be a boolean');
  }
  const observed = struct('status' in deployment ? deployment.status : {}, ['availableReplicas'], what, 'status');
  const available = field(observed, 'availableReplicas', null, optional(isI32), what, 'must be a 32-bit integer');
  return { owners, available: isNone(available) ? 0 : available };
}

const controlledBy = (owners, uid) => owners.some((o) => o.controller === true && (o.uid ?? '') === uid);

export default {
  manifest() {
    return manifest({ name: 'foo-deployment', version: '0.1.0', primary: FOO, owns: [kinds.Deployment], prune: true });
  },

  reconcile(request) {
    if (request.phase !== 'apply') return [];
    const [meta, spec, reported] = decodeFoo(request);
    const [specName, replicas] = [spec.deploymentName ?? '', spec.replicas];
    // ASCII whitespace only, as the Rust and Python twins trim.
    const deploymentName = specName.replace(/^[ \t\n\f\r]+|[ \t\n\f\r]+$/g, '');
    if (!deploymentName) {
      // As in sample-controller: report and wait for the spec to change. An error, not a
      // success holding only the Warning: a success without the Deployment would let the host
      // prune the Deployment that exists.
      throw new PermanentError(`Foo ${request.name}: spec.deploymentName must be specified; set it to the Deployment to manage`, {
        reason: 'InvalidSpec',
      });
    }

    const existing = cache.get(kinds.Deployment, deploymentName, request.namespace);
    const observed = existing === null ? null : decodeDeployment(existing);
    if (observed !== null && !controlledBy(observed.owners, request.uid)) {
      throw new TransientError(`Resource "${deploymentName}" already exists and is not managed by Foo`, { reason: 'ErrResourceExists' });
    }

    const available = observed === null ? 0 : observed.available;
    // The Deployment is the whole desired set: any other Deployment this Foo controls (the one
    // it managed before deploymentName changed) goes.
    const actions = [apply(desiredDeployment(meta, specName, replicas)), prune()];
    if (reported === undefined || (reported.availableReplicas ?? 0) !== available) {
      actions.push(status({ availableReplicas: available }));
    }
    actions.push(event('Normal', 'Synced', 'Foo synced successfully'));
    return actions;
  },
};
