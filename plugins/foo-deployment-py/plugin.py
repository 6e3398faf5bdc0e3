"""`foo-deployment` in Python: Kubernetes' sample-controller as a wasmloop plugin, the twin
of `plugins/foo-deployment` (Rust). Both produce the same actions on the same inputs; the
golden tests hold them to it.

A `Foo` (`samplecontroller.k8s.io/v1alpha1`) names a Deployment and a replica count. The
plugin keeps that Deployment in shape (labels `app: nginx` and `controller: <foo>`, one
`nginx:latest` container, the replica count), mirrors its `status.availableReplicas` into the
Foo's status and records a `Synced` Event. A Deployment of that name that this Foo does not
control is never touched: the Foo gets an `ErrResourceExists` Warning and backs off until
someone resolves the clash.
"""

from wasmloop import Kind, Manifest, PermanentError, Reconciler, TransientError, apply, cache, event, kinds, prune, status

FOO = Kind("samplecontroller.k8s.io", "v1alpha1", "Foo")
IMAGE = "nginx:latest"


def desired_deployment(foo: dict, deployment_name: str, replicas) -> dict:
    """The Deployment a Foo asks for. Owner references are the host's job."""
    meta = foo["metadata"]
    labels = {"app": "nginx", "controller": meta.get("name", "")}
    metadata = {"name": deployment_name}
    if meta.get("namespace") is not None:
        metadata["namespace"] = meta["namespace"]
    spec = {
        "selector": {"matchLabels": dict(labels)},
        "template": {
            "metadata": {"labels": dict(labels)},
            "spec": {"containers": [{"name": "nginx", "image": IMAGE}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec}


def controlled_by(deployment: dict, uid: str) -> bool:
    owners = (deployment.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("controller") is True and o.get("uid") == uid for o in owners)


def spec_of(request) -> tuple:
    """(deploymentName, replicas), or a permanent error naming the Foo when malformed."""
    spec = request.object.get("spec") or {}
    name, replicas = spec.get("deploymentName", ""), spec.get("replicas")
    whole = isinstance(replicas, int) and not isinstance(replicas, bool) and -(2**31) <= replicas < 2**31
    if not isinstance(name, str) or not (replicas is None or whole):
        raise PermanentError(f"{request.describe()}: spec.deploymentName must be a string and spec.replicas a 32-bit integer")
    return name, replicas


class FooController(Reconciler):
    def manifest(self):
        return Manifest("foo-deployment", "0.1.0", primary=FOO, owns=[kinds.Deployment], prune=True)

    def reconcile(self, request):
        if request.phase != "apply":
            return []
        spec_name, replicas = spec_of(request)
        deployment_name = spec_name.strip()
        if not deployment_name:
            # As in sample-controller: report and wait for the spec to change. An error, not a
            # success holding only the Warning: a success without the Deployment would let the
            # host prune the Deployment that exists.
            raise PermanentError(
                f"Foo {request.name}: spec.deploymentName must be specified; set it to the Deployment to manage",
                reason="InvalidSpec",
            )

        existing = cache.get(kinds.Deployment, deployment_name, request.namespace)
        if existing is not None and not controlled_by(existing, request.uid):
            raise TransientError(
                f'Resource "{deployment_name}" already exists and is not managed by Foo', reason="ErrResourceExists"
            )

        available = ((existing or {}).get("status") or {}).get("availableReplicas") or 0
        # The Deployment is the whole desired set: any other Deployment this Foo controls (the
        # one it managed before deploymentName changed) goes.
        actions = [apply(desired_deployment(request.object, spec_name, replicas)), prune()]
        reported = request.object.get("status")
        if reported is None or reported.get("availableReplicas", 0) != available:
            actions.append(status({"availableReplicas": available}))
        actions.append(event("Normal", "Synced", "Foo synced successfully"))
        return actions
