"""`configmap-mirror` in Python, the twin of `plugins/configmap-mirror` (Rust): it copies a
ConfigMap labelled `wasmloop.dev/mirror=true` into the namespaces its annotation
`wasmloop.dev/mirror-to` lists (comma-separated), keeps the copies in step, removes copies
from namespaces dropped from the list, and deletes every copy when the source goes (through
a finalizer). The golden tests hold both to the same actions.

It reads across namespaces, so it shows the capability declarations: a selected watch on its
own copies, Namespaces watched metadata-only, and a grant to apply and delete ConfigMaps
anywhere.
"""

from wasmloop import Grant, Manifest, ObjectRef, Reconciler, Watch, apply, cache, delete, event, kinds

MIRROR_LABEL = "wasmloop.dev/mirror"
MIRROR_TO = "wasmloop.dev/mirror-to"
MIRROR_OF_UID = "wasmloop.dev/mirror-of-uid"
MIRROR_OF = "wasmloop.dev/mirror-of"
FINALIZER = "wasmloop.dev/mirror-cleanup"
# What the twins trim from each listed namespace: Rust's `char::is_ascii_whitespace`.
ASCII_WHITESPACE = " \t\n\x0c\r"


def targets(source: dict) -> list:
    """The namespaces the source asks for, sorted, without its own."""
    meta = source.get("metadata") or {}
    listed = (meta.get("annotations") or {}).get(MIRROR_TO) or ""
    own = meta.get("namespace") or ""
    # ASCII whitespace only, as the Rust twin trims.
    listed = {ns.strip(ASCII_WHITESPACE) for ns in listed.split(",")}
    return sorted(ns for ns in listed if ns and ns != own)


def copies(request) -> list:
    return cache.list(kinds.ConfigMap, selector=f"{MIRROR_OF_UID}={request.uid}")


def copy_of(source: dict, request, namespace: str) -> dict:
    meta = source.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if not k.startswith("wasmloop.dev/")}
    labels[MIRROR_OF_UID] = request.uid
    where = f"{request.namespace}/{request.name}" if request.namespace else request.name
    copy = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": request.name, "namespace": namespace, "labels": labels, "annotations": {MIRROR_OF: where}},
    }
    for field in ("data", "binaryData", "immutable"):
        if source.get(field) is not None:
            copy[field] = source[field]
    return copy


def namespace_of(obj: dict):
    return (obj.get("metadata") or {}).get("namespace")


class ConfigMapMirror(Reconciler):
    def manifest(self):
        return Manifest(
            "configmap-mirror",
            "0.1.0",
            primary=Watch(kinds.ConfigMap, labels=f"{MIRROR_LABEL}=true"),
            watches=[Watch(kinds.ConfigMap, labels=MIRROR_OF_UID), kinds.Namespace],
            metadata_only=[kinds.Namespace],
            writes=[Grant(kinds.ConfigMap, apply=True, delete=True, namespaces="*")],
            finalizer=FINALIZER,
        )

    def reconcile(self, request):
        existing = copies(request)
        if request.phase != "apply":
            return [delete(c) for c in existing]
        source = request.object
        wanted = targets(source)
        existing_uids = {(c.get("metadata") or {}).get("uid") for c in existing}
        actions, missing, taken = [], [], []
        # Counted from the copies applied, not by subtraction: a copy may outlive its
        # namespace in the cache, and be both missing and kept.
        mirrored = added = 0
        for namespace in wanted:
            if cache.get(kinds.Namespace, namespace) is None:
                missing.append(namespace)
                continue
            other = cache.get(kinds.ConfigMap, request.name, namespace)
            if other is not None and other["metadata"].get("uid") not in existing_uids:
                taken.append(f"{namespace}/{request.name}")
                continue
            mirrored += 1
            if not any(namespace_of(c) == namespace for c in existing):
                added += 1
            actions.append(apply(copy_of(source, request, namespace)))
        if taken:
            actions.append(event(
                "Warning",
                "TargetExists",
                f"ConfigMap(s) {', '.join(taken)} exist and are not copies of this one; they are left alone: "
                "rename the source or remove them",
            ))
        stale = [c for c in existing if namespace_of(c) not in wanted]
        actions.extend(delete(c) for c in stale)
        if added > 0 or stale:
            actions.append(event(
                "Normal",
                "Mirrored",
                f"mirrored to {mirrored} namespace(s), {added} copy(ies) added, {len(stale)} removed",
            ))
        if missing:
            actions.append(event(
                "Warning",
                "NamespaceNotFound",
                f"{MIRROR_TO} names namespace(s) {', '.join(missing)} that do not exist; the copies follow when they are created",
            ))
        return actions

    def map(self, related, config):
        if kinds.Namespace.matches(related):
            name = related["metadata"]["name"]
            sources = cache.list(kinds.ConfigMap, selector=f"{MIRROR_LABEL}=true")
            return [
                ObjectRef("v1", "ConfigMap", s["metadata"]["name"], s["metadata"]["namespace"])
                for s in sources
                if name in targets(s) and s["metadata"].get("namespace")
            ]
        source = ((related.get("metadata") or {}).get("annotations") or {}).get(MIRROR_OF) or ""
        namespace, slash, name = source.partition("/")
        return [ObjectRef("v1", "ConfigMap", name, namespace)] if slash else []
