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
# What the twins trim from spec.deploymentName: Rust's `char::is_ascii_whitespace`.
ASCII_WHITESPACE = " \t\n\x0c\r"


def desired_deployment(meta: dict, deployment_name: str, replicas) -> dict:
    """The Deployment a Foo (its ``metadata``) asks for. Owner references are the host's job."""
    labels = {"app": "nginx", "controller": meta.get("name") or ""}
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


def _i32(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31


def _malformed(what: str, why: str) -> PermanentError:
    # The Rust twin's words for an object its types do not fit (serde's detail aside).
    return PermanentError(f"cannot decode {what}: {why}; fix the object or the plugin's type for it")


def _field(obj: dict, key: str, default, fits, what: str, why: str):
    """``obj[key]`` (``default`` when absent) if it ``fits``: the Rust twin's serde types, where
    an absent field takes its default but a null one must fit too."""
    value = obj.get(key, default)
    if not fits(value):
        raise _malformed(what, f"{key} {why}")
    return value


def _struct(value, fields: tuple, what: str, name: str) -> dict:
    """``value`` as serde's derived struct reads it: an object, or a list of the fields in order
    (serde accepts both), shorter lists leaving the rest to their defaults."""
    if isinstance(value, dict):
        return value
    if isinstance(value, list) and len(value) <= len(fields):
        return dict(zip(fields, value))
    raise _malformed(what, f"{name} must be an object")


def _optional(fits):
    return lambda value: value is None or fits(value)


def _string(value) -> bool:
    return isinstance(value, str)


def decode_foo(request):
    """(metadata, spec, status) of the Foo, held to the Rust twin's types: a permanent error
    otherwise."""
    foo, what = request.object, request.describe()
    meta = _struct(foo.get("metadata", {}), ("name", "namespace"), what, "metadata")
    for key in ("name", "namespace"):
        _field(meta, key, None, _optional(_string), what, "must be a string")
    spec = _struct(foo.get("spec", {}), ("deploymentName", "replicas"), what, "spec")
    _field(spec, "deploymentName", "", _string, what, "must be a string")
    _field(spec, "replicas", None, _optional(_i32), what, "must be a 32-bit integer")
    reported = foo.get("status")
    if reported is not None:
        reported = _struct(reported, ("availableReplicas",), what, "status")
        _field(reported, "availableReplicas", 0, _i32, what, "must be a 32-bit integer")
    return meta, spec, reported


def decode_deployment(deployment: dict) -> dict:
    """The observed Deployment's owners and available replicas, held to the Rust twin's types
    (k8s-openapi's OwnerReference): a permanent error otherwise."""
    named = deployment.get("metadata") if isinstance(deployment.get("metadata"), dict) else {}
    ns, name = named.get("namespace"), named.get("name", "")
    what = f"Deployment {ns}/{name}" if ns else f"Deployment {name}"
    meta = _struct(deployment.get("metadata", {}), ("ownerReferences",), what, "metadata")
    owners = _field(meta, "ownerReferences", [], lambda v: isinstance(v, list), what, "must be a list")
    for owner in owners:
        # k8s-openapi reads a missing or null required field as "", a wrong type as an error.
        keys = ("apiVersion", "kind", "name", "uid")
        if not isinstance(owner, dict) or not all(_optional(_string)(owner.get(k)) for k in keys):
            raise _malformed(what, "an ownerReference's apiVersion, kind, name and uid must be strings")
        for key in ("controller", "blockOwnerDeletion"):
            _field(owner, key, None, _optional(lambda v: isinstance(v, bool)), what, "must be a boolean")
    observed = _struct(deployment.get("status", {}), ("availableReplicas",), what, "status")
    available = _field(observed, "availableReplicas", None, _optional(_i32), what, "must be a 32-bit integer")
    return {"owners": owners, "available": 0 if available is None else available}


def controlled_by(owners: list, uid: str) -> bool:
    return any(o.get("controller") is True and (o.get("uid") or "") == uid for o in owners)


class FooController(Reconciler):
    def manifest(self):
        return Manifest("foo-deployment", "0.1.0", primary=FOO, owns=[kinds.Deployment], prune=True)

    def reconcile(self, request):
        if request.phase != "apply":
            return []
        meta, spec, reported = decode_foo(request)
        spec_name, replicas = spec.get("deploymentName", ""), spec.get("replicas")
        # ASCII whitespace only, as the Rust and JavaScript twins trim.
        deployment_name = spec_name.strip(ASCII_WHITESPACE)
        if not deployment_name:
            # As in sample-controller: report and wait for the spec to change. An error, not a
            # success holding only the Warning: a success without the Deployment would let the
            # host prune the Deployment that exists.
            raise PermanentError(
                f"Foo {request.name}: spec.deploymentName must be specified; set it to the Deployment to manage",
                reason="InvalidSpec",
            )

        existing = cache.get(kinds.Deployment, deployment_name, request.namespace)
        observed = None if existing is None else decode_deployment(existing)
        if observed is not None and not controlled_by(observed["owners"], request.uid):
            raise TransientError(
                f'Resource "{deployment_name}" already exists and is not managed by Foo', reason="ErrResourceExists"
            )

        available = 0 if observed is None else observed["available"]
        # The Deployment is the whole desired set: any other Deployment this Foo controls (the
        # one it managed before deploymentName changed) goes.
        actions = [apply(desired_deployment(meta, spec_name, replicas)), prune()]
        if reported is None or reported.get("availableReplicas", 0) != available:
            actions.append(status({"availableReplicas": available}))
        actions.append(event("Normal", "Synced", "Foo synced successfully"))
        return actions
