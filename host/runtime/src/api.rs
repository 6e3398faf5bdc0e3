//! The one place the host turns names into request paths.
//!
//! kube-rs puts a namespace into a URL as it is given (`Api::namespaced_with` takes `&str`),
//! so a namespace `tenant-a/secrets?x=` would address Secrets. Every `Api` the host builds for
//! a namespace, and every discovery look-up of a kind, goes through here, and these functions
//! take only parsed names ([`Namespace`], [`Gvk`]): the strings kube needs are made from them
//! here and nowhere else.
//!
//! ```no_run
//! # fn demo(client: kube::Client, resource: &kube::api::ApiResource) {
//! use kube::api::DynamicObject;
//! use wasmloop_contract::names::Namespace;
//! let shop = Namespace::parse("shop").unwrap();
//! let api: kube::Api<DynamicObject> = wasmloop_runtime::api::dynamic_api(client, Some(&shop), resource);
//! # }
//! ```

use kube::api::{Api, ApiResource, GroupVersionKind};
use kube::{Client, Resource};
use wasmloop_contract::names::Namespace;
use wasmloop_sandbox::Gvk;

/// The API of `resource`'s objects in `namespace`; none is every namespace, or a
/// cluster-scoped kind.
pub fn dynamic_api<K>(client: Client, namespace: Option<&Namespace>, resource: &ApiResource) -> Api<K>
where
    K: Resource<DynamicType = ApiResource, Scope = kube::core::DynamicResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced_with(client, ns.as_str(), resource),
        None => Api::all_with(client, resource),
    }
}

/// The API of a built-in kind's objects in `namespace`.
pub fn typed_api<K>(client: Client, namespace: &Namespace) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    Api::namespaced(client, namespace.as_str())
}

/// The kind as discovery asks for it: `GET /apis/{group}/{version}` (or `/api/{version}`)
/// can only name a group and version that parsed.
pub fn group_version_kind(kind: &Gvk) -> GroupVersionKind {
    GroupVersionKind::gvk(kind.group(), kind.version(), kind.kind())
}
