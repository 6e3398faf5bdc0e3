"""`namespace-defaults` in Python, the twin of `plugins/namespace-defaults` (Rust): every
Namespace labelled `wasmloop.dev/defaults=enabled` gets a default NetworkPolicy
(`default-deny`), ResourceQuota (`default-resourcequota`, its limits from the config's
`quota`) and, when the Namespace's `wasmloop.dev/team` label names a Group, a RoleBinding
(`default-team`) of the ClusterRole `edit` (config `role`), as Kyverno's generate rules with
`synchronize: true` do. One deleted is put back, one edited is set back, and all are pruned
when the label goes. The golden tests hold both twins to the same actions.
"""

from wasmloop import Grant, Manifest, PermanentError, Reconciler, apply, event, kinds, prune

LABEL = "wasmloop.dev/defaults"
ENABLED = "enabled"
TEAM = "wasmloop.dev/team"
DEFAULT_QUOTA = {"requests.cpu": "4", "requests.memory": "16Gi", "limits.cpu": "4", "limits.memory": "16Gi"}


def settings(config):
    """The config, refused as the Rust twin's serde type refuses it (unknown keys, wrong types)."""
    if not isinstance(config, dict):
        raise PermanentError("invalid plugin config: expected a mapping; fix the plugin's configuration (config.yaml or --config)")
    unknown = sorted(set(config) - {"quota", "role"})
    if unknown:
        raise PermanentError(f"invalid plugin config: unknown field `{unknown[0]}`, expected `quota` or `role`; fix the plugin's configuration (config.yaml or --config)")
    quota = config.get("quota", DEFAULT_QUOTA)
    role = config.get("role", "edit")
    if not isinstance(quota, dict) or not all(isinstance(v, str) for v in quota.values()) or not isinstance(role, str):
        raise PermanentError("invalid plugin config: quota is a map of strings and role a string; fix the plugin's configuration (config.yaml or --config)")
    return quota, role


def defaults_for(namespace, team, quota, role):
    """The objects a Namespace gets: (kind, name, object)."""
    wanted = [
        ("NetworkPolicy", "default-deny", {
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny", "namespace": namespace},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        }),
        ("ResourceQuota", "default-resourcequota", {
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "default-resourcequota", "namespace": namespace},
            "spec": {"hard": dict(quota)},
        }),
    ]
    if team is not None:
        wanted.append(("RoleBinding", "default-team", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "default-team", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team}],
        }))
    return wanted


class NamespaceDefaults(Reconciler):
    def manifest(self):
        return Manifest(
            "namespace-defaults",
            "0.1.0",
            primary=kinds.Namespace,
            owns=[kinds.NetworkPolicy, kinds.ResourceQuota, kinds.RoleBinding],
            # A Namespace has no namespace, so its children live outside "the primary's".
            writes=[Grant(k, apply=True, delete=True, namespaces="*") for k in (kinds.NetworkPolicy, kinds.ResourceQuota, kinds.RoleBinding)],
            prune=True,
        )

    def reconcile(self, request):
        meta = request.object.get("metadata") or {}
        if request.phase != "apply" or meta.get("deletionTimestamp") is not None:
            return []
        labels = meta.get("labels") or {}
        if labels.get(LABEL) != ENABLED:
            if not request.owned_envelopes:
                return []
            gone = len(request.owned_envelopes)
            return [prune(), event("Normal", "DefaultsRemoved", f"{LABEL} is not {ENABLED}: {gone} default object(s) removed")]
        quota, role = settings(request.config)
        wanted = defaults_for(request.name, labels.get(TEAM), quota, role)
        owned = [(e.kind, e.name) for e in request.owned_envelopes]
        missing = [f"{kind} {name}" for kind, name, _ in wanted if (kind, name) not in owned]
        actions = [apply(obj) for _, _, obj in wanted]
        actions.append(prune())
        if missing:
            actions.append(event("Normal", "DefaultsApplied", f"created or put back: {', '.join(missing)}"))
        return actions
