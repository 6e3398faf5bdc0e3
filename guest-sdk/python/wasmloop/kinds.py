"""Kubernetes kinds, named the way the contract names them: group, version, kind."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """A kind. ``group`` is empty for the core API (``v1`` Pods, ConfigMaps, Nodes).

    >>> Kind.of("apps/v1", "Deployment").group
    'apps'
    >>> Kind.of("v1", "Pod").api_version
    'v1'
    """

    group: str
    version: str
    kind: str

    @staticmethod
    def of(api_version: str, kind: str) -> "Kind":
        """The kind of objects with this ``apiVersion`` and ``kind``."""
        group, _, version = api_version.rpartition("/")
        return Kind(group, version, kind)

    @property
    def api_version(self) -> str:
        """``apiVersion`` as objects of this kind carry it."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def matches(self, obj: dict) -> bool:
        """True when ``obj`` (a plain dict) is of this kind."""
        return obj.get("apiVersion") == self.api_version and obj.get("kind") == self.kind

    def __str__(self) -> str:
        return f"{self.api_version}/{self.kind}" if self.group else f"{self.version}/{self.kind}"


# The kinds plugins name most often; any other is one Kind.of(...) away.
ConfigMap = Kind("", "v1", "ConfigMap")
Secret = Kind("", "v1", "Secret")
Service = Kind("", "v1", "Service")
Pod = Kind("", "v1", "Pod")
Namespace = Kind("", "v1", "Namespace")
Node = Kind("", "v1", "Node")
ServiceAccount = Kind("", "v1", "ServiceAccount")
Deployment = Kind("apps", "v1", "Deployment")
StatefulSet = Kind("apps", "v1", "StatefulSet")
DaemonSet = Kind("apps", "v1", "DaemonSet")
Job = Kind("batch", "v1", "Job")
Ingress = Kind("networking.k8s.io", "v1", "Ingress")
NetworkPolicy = Kind("networking.k8s.io", "v1", "NetworkPolicy")
ResourceQuota = Kind("", "v1", "ResourceQuota")
RoleBinding = Kind("rbac.authorization.k8s.io", "v1", "RoleBinding")
