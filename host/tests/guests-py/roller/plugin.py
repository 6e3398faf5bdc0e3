"""Test guest: the `roller` guest (`host/tests/guests/roller`, Rust) in Python, held to the same
actions by the golden tests (`host/tests/offline.rs`), so contract 0.3's features are shown to
cross the Python SDK as they cross the Rust one: annotation, generation and field filters, an
index and `map` through it, triggers, and an unforced apply that gives a field up on a conflict.

It rolls a Deployment by annotating its pod template (`wasmloop.dev/rolled-for`) for the
ConfigMaps whose change triggered the call, and writes what it saw into `roller-observed-NAME`.
"""

from wasmloop import CacheError, Grant, Index, Manifest, Reconciler, Watch, apply, cache, kinds, log, ref

MOUNTS = "configmap"
SECRET = "roll-secret"
ROLLED_FOR = "wasmloop.dev/rolled-for"


def shown(trigger):
    if trigger.kind == "primary-changed":
        old, new = trigger.generation
        g = lambda n: "-" if n is None else str(n)  # noqa: E731
        return f"primary {g(old)}->{g(new)}"
    if trigger.kind in ("owned-changed", "related-changed"):
        word = trigger.kind.split("-")[0]
        return f"{word} {trigger.ref.kind}/{trigger.ref.name}"
    if trigger.kind == "conflict":
        return f"conflict {trigger.conflict.target.name}"
    return trigger.kind


def names(kind, namespace):
    return ",".join(o["metadata"]["name"] for o in cache.list(kind, namespace))


class Roller(Reconciler):
    def manifest(self):
        return Manifest(
            "roller",
            "0.1.0",
            primary=Watch(kinds.Deployment, annotations={"wasmloop.dev/roll": None}, generation_changed=True),
            watches=[kinds.ConfigMap, Watch(kinds.Secret, fields=f"metadata.name={SECRET}")],
            indexes=[Index(MOUNTS, kinds.Deployment, [
                "spec.template.spec.volumes[*].configMap.name",
                "spec.template.spec.containers[*].envFrom[*].configMapRef.name",
            ])],
            writes=[Grant(kinds.Deployment, apply=True), Grant(kinds.ConfigMap, apply=True)],
        )

    def reconcile(self, request):
        if request.phase != "apply":
            return []
        replicas = (request.config or {}).get("replicas")
        namespace = request.namespace
        triggers = [shown(t) for t in request.triggers]
        rolled = [t.ref.name for t in request.triggers if t.kind == "related-changed" and t.ref.kind == "ConfigMap"]
        conflict = [f"{f.manager} {f.field}" for t in request.triggers if t.kind == "conflict" for f in t.conflict.fields]
        observation = f"roller-observed-{request.name}"
        last = cache.get(kinds.ConfigMap, observation, namespace) or {}
        counted = (last.get("data") or {}).get("calls", "")
        calls = int(counted) if counted.isdigit() else 0
        observed = {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": observation},
            "data": {
                "calls": str(calls + 1),
                "triggers": ";".join(triggers),
                "deployments": names(kinds.Deployment, namespace),
                "secrets": names(kinds.Secret, namespace),
                "conflict": ";".join(conflict),
            },
        }
        actions = [apply(observed)]
        desired = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": request.name}}
        sets = False
        if replicas is not None and not conflict:
            desired["spec"] = {"replicas": replicas}
            sets = True
        template = ((request.object.get("spec") or {}).get("template") or {}).get("metadata") or {}
        kept = (template.get("annotations") or {}).get(ROLLED_FOR)
        roll = ",".join(rolled) if rolled else kept if isinstance(kept, str) else None
        if roll is not None:
            spec = desired.setdefault("spec", {})
            spec["template"] = {"metadata": {"annotations": {ROLLED_FOR: roll}}}
            sets = True
        if sets:
            actions.append(apply(desired, force=False))
        return actions

    def map(self, related, config):
        meta = related.get("metadata") or {}
        namespace = meta.get("namespace")
        try:
            if related.get("kind") == "ConfigMap":
                users = cache.by_index(kinds.Deployment, MOUNTS, meta.get("name"), namespace)
            else:
                users = cache.list(kinds.Deployment, namespace)
        except CacheError:
            users = []
        log.info(f"map of {related.get('kind')} {meta.get('name')} found {len(users)}")
        return [ref(u) for u in users]
