/**
 * Kubernetes kinds, named the way the contract names them: group, version, kind.
 *
 * @example
 * Kind.of('apps/v1', 'Deployment').group // 'apps'
 */
export class Kind {
  /** `group` is empty for the core API (`v1` Pods, ConfigMaps, Nodes). */
  constructor(group, version, kind) {
    this.group = group;
    this.version = version;
    this.kind = kind;
    Object.freeze(this);
  }

  /** The kind of objects with this `apiVersion` and `kind`. */
  static of(apiVersion, kind) {
    const at = apiVersion.lastIndexOf('/');
    return at < 0 ? new Kind('', apiVersion, kind) : new Kind(apiVersion.slice(0, at), apiVersion.slice(at + 1), kind);
  }

  /** `apiVersion` as objects of this kind carry it. */
  get apiVersion() {
    return this.group ? `${this.group}/${this.version}` : this.version;
  }

  /** True when `obj` (a plain object) is of this kind. */
  matches(obj) {
    return obj?.apiVersion === this.apiVersion && obj?.kind === this.kind;
  }

  equals(other) {
    return other instanceof Kind && other.group === this.group && other.version === this.version && other.kind === this.kind;
  }

  toString() {
    return `${this.apiVersion}/${this.kind}`;
  }
}

/** True when `kinds` holds one equal to `kind`. */
export function hasKind(kinds, kind) {
  return kinds.some((k) => k.equals(kind));
}

// The kinds plugins name most often; any other is one Kind.of(...) away.
export const ConfigMap = new Kind('', 'v1', 'ConfigMap');
export const Secret = new Kind('', 'v1', 'Secret');
export const Service = new Kind('', 'v1', 'Service');
export const Pod = new Kind('', 'v1', 'Pod');
export const Namespace = new Kind('', 'v1', 'Namespace');
export const Node = new Kind('', 'v1', 'Node');
export const ServiceAccount = new Kind('', 'v1', 'ServiceAccount');
export const Deployment = new Kind('apps', 'v1', 'Deployment');
export const StatefulSet = new Kind('apps', 'v1', 'StatefulSet');
export const DaemonSet = new Kind('apps', 'v1', 'DaemonSet');
export const Job = new Kind('batch', 'v1', 'Job');
export const Ingress = new Kind('networking.k8s.io', 'v1', 'Ingress');
export const NetworkPolicy = new Kind('networking.k8s.io', 'v1', 'NetworkPolicy');
export const ResourceQuota = new Kind('', 'v1', 'ResourceQuota');
export const RoleBinding = new Kind('rbac.authorization.k8s.io', 'v1', 'RoleBinding');
