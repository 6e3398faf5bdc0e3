/**
 * `foo-deployment` in JavaScript: Kubernetes' sample-controller as a wasmloop plugin, the twin of
 * `plugins/foo-deployment` (Rust) and `plugins/foo-deployment-py`. All three produce the same
 * actions on the same well-formed inputs; the golden tests hold them to it.
 *
 * A `Foo` (`samplecontroller.k8s.io/v1alpha1`) names a Deployment and a replica count. The
 * plugin keeps that Deployment in shape (labels `app: nginx` and `controller: <foo>`, one
 * `nginx:latest` container, the replica count), mirrors its `status.availableReplicas` into the
 * Foo's status and records a `Synced` Event. A Deployment of that name that this Foo does not
 * control is never touched: the Foo gets an `ErrResourceExists` Warning and backs off.
 */

import { Kind, PermanentError, TransientError, apply, cache, event, kinds, manifest, prune, rules, status } from '@wasmloop/sdk';

export const FOO = new Kind('samplecontroller.k8s.io', 'v1alpha1', 'Foo');
const IMAGE = 'nginx:latest';

/** The Deployment a Foo asks for. Owner references are the host's job. */
export function desiredDeployment(foo, deploymentName, replicas) {
  const meta = foo.metadata ?? {};
  const labels = { app: 'nginx', controller: meta.name ?? '' };
  const metadata = { name: deploymentName };
  if (meta.namespace !== undefined && meta.namespace !== null) metadata.namespace = meta.namespace;
  const spec = {
    selector: { matchLabels: { ...labels } },
    template: { metadata: { labels: { ...labels } }, spec: { containers: [{ name: 'nginx', image: IMAGE }] } },
  };
  if (replicas !== undefined && replicas !== null) spec.replicas = replicas;
  return { apiVersion: 'apps/v1', kind: 'Deployment', metadata, spec };
}

const controlledBy = (deployment, uid) =>
  (deployment.metadata?.ownerReferences ?? []).some((o) => o.controller === true && o.uid === uid);

const isI32 = (v) => Number.isInteger(v) && v >= -(2 ** 31) && v < 2 ** 31;

export default {
  manifest() {
    return manifest({ name: 'foo-deployment', version: '0.1.0', primary: FOO, owns: [kinds.Deployment], prune: true });
  },

  reconcile(request) {
    if (request.phase !== 'apply') return [];
    const foo = request.object;
    const spec = foo.spec ?? {};
    const specName = spec.deploymentName ?? '';
    if (typeof specName !== 'string' || !(spec.replicas === undefined || spec.replicas === null || isI32(spec.replicas))) {
      throw new PermanentError(`${request.describe()}: spec.deploymentName must be a string and spec.replicas a 32-bit integer`);
    }
    // Trimmed as the Rust twin's `str::trim` trims: `String.prototype.trim` also takes U+FEFF.
    const deploymentName = rules.rustTrim(specName);
    if (!deploymentName) {
      // As in sample-controller: report and wait for the spec to change. An error, not a
      // success holding only the Warning: a success without the Deployment would let the host
      // prune the Deployment that exists.
      throw new PermanentError(`Foo ${request.name}: spec.deploymentName must be specified; set it to the Deployment to manage`, {
        reason: 'InvalidSpec',
      });
    }

    const existing = cache.get(kinds.Deployment, deploymentName, request.namespace);
    if (existing !== null && !controlledBy(existing, request.uid)) {
      throw new TransientError(`Resource "${deploymentName}" already exists and is not managed by Foo`, { reason: 'ErrResourceExists' });
    }

    const available = existing?.status?.availableReplicas ?? 0;
    // The Deployment is the whole desired set: any other Deployment this Foo controls (the one
    // it managed before deploymentName changed) goes.
    const actions = [apply(desiredDeployment(foo, specName, spec.replicas)), prune()];
    const reported = foo.status;
    if (reported === undefined || reported === null || (reported.availableReplicas ?? 0) !== available) {
      actions.push(status({ availableReplicas: available }));
    }
    actions.push(event('Normal', 'Synced', 'Foo synced successfully'));
    return actions;
  },
};
