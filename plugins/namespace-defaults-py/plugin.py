"""`namespace-defaults` in Python, the twin of `plugins/namespace-defaults` (Rust): every
Namespace labelled `wasmloop.dev/defaults=enabled` gets a default NetworkPolicy
(`default-deny`), ResourceQuota (`default-resourcequota`, its limits from the config's
`quota`) and, when the Namespace's `wasmloop.dev/team` label names a Group the config's
`teams` lists, a RoleBinding (`default-team`) of the ClusterRole `edit` (config `role`), as
Kyverno's generate rules with `synchronize: true` do. One deleted is put back, one edited is
set back, and all are pruned when the label goes; an object of the same name someone else made
is left alone, and the config's `excludedNamespaces` get nothing. The golden tests hold both
twins to the same actions.
"""

import json

from wasmloop import Grant, Kind, Manifest, PermanentError, Reconciler, apply, cache, event, kinds, prune

LABEL = "wasmloop.dev/defaults"
ENABLED = "enabled"
TEAM = "wasmloop.dev/team"
DEFAULT_QUOTA = {"requests.cpu": "4", "requests.memory": "16Gi", "limits.cpu": "4", "limits.memory": "16Gi"}
DEFAULT_EXCLUDED = ["kube-*", "wasmloop-system"]
FIX = "fix the plugin's configuration (config.yaml or --config)"
FIELDS = ("quota", "role", "teams", "excludedNamespaces")


def settings(config):
    """The config, refused as the Rust twin refuses it (not a mapping, unknown keys, wrong types)."""
    if not isinstance(config, dict):
        raise PermanentError(f"invalid plugin config: expected a mapping; {FIX}")
    unknown = sorted(set(config) - set(FIELDS))
    if unknown:
        raise PermanentError(f"invalid plugin config: unknown field `{unknown[0]}`, expected one of {', '.join(FIELDS)}; {FIX}")
    quota = config.get("quota", DEFAULT_QUOTA)
    role = config.get("role", "edit")
    teams = config.get("teams", [])
    excluded = config.get("excludedNamespaces", DEFAULT_EXCLUDED)
    strings = lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)  # noqa: E731
    if not isinstance(quota, dict) or not all(isinstance(v, str) for v in quota.values()) or not isinstance(role, str) or not strings(teams) or not strings(excluded):
        raise PermanentError(f"invalid plugin config: quota is a map of strings, role a string, teams and excludedNamespaces lists of strings; {FIX}")
    return quota, role, teams, excluded


def excludes(excluded, namespace):
    return any(namespace.startswith(p[:-1]) if p.endswith("*") else namespace == p for p in excluded)


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
        quota, role, teams, excluded = settings(request.config)
        labels = meta.get("labels") or {}
        if labels.get(LABEL) != ENABLED or excludes(excluded, request.name):
            if not request.owned_envelopes:
                return []
            gone = len(request.owned_envelopes)
            return [prune(), event("Normal", "DefaultsRemoved", f"{LABEL} is not {ENABLED} here: {gone} default object(s) removed")]
        team = labels.get(TEAM)
        allowed = team if team in teams else None
        owned = [(e.kind, e.name) for e in request.owned_envelopes]
        actions, created, taken = [], [], []
        for kind, name, obj in defaults_for(request.name, allowed, quota, role):
            if (kind, name) not in owned:
                if cache.get(Kind.of(obj["apiVersion"], kind), name, request.name) is not None:
                    taken.append(f"{kind} {name}")
                    continue
                created.append(f"{kind} {name}")
            actions.append(apply(obj))
        actions.append(prune())
        if taken:
            actions.append(event("Warning", "DefaultExists", f"{', '.join(taken)} exist(s) and are not this Namespace's; left alone: rename or remove them"))
        if team is not None and allowed is None:
            actions.append(event("Warning", "TeamNotAllowed", f"team {json.dumps(team)} is not in the plugin's teams; no RoleBinding: list it in the config's teams"))
        if created:
            actions.append(event("Normal", "DefaultsApplied", f"created or put back: {', '.join(created)}"))
        return actions
