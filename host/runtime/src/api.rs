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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("target") && !path.ends_with("tests") {
                sources(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }

    /// Where each request-building call may appear: the modules that take only parsed names.
    /// The host's own flags (`--plugin-namespace`, the Leases' namespace) and a ConfigMap's
    /// pull secret are parsed too, so `Api::namespaced` is here alone as well; the Lease
    /// manager's namespace is the one string kube-lease-manager takes, made from a parsed `Namespace`.
    const ALLOWED: [(&str, &str); 6] = [
        ("Api::namespaced_with(", "runtime/src/api.rs"),
        ("::namespaced(", "runtime/src/api.rs"),
        (".with_namespace(", "src/leader.rs"),
        ("Api::all_with(", "runtime/src/api.rs"),
        ("pinned_kind(", "runtime/src/discovery.rs"),
        ("SubjectAccessReviewSpec {", "runtime/src/identity.rs"),
    ];

    #[test]
    fn request_paths_are_made_in_the_modules_that_take_only_parsed_names() {
        let host = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut files = Vec::new();
        // The product's code: the binary, the runtime and the sandbox (not the test
        // environment, nor the native baseline the benchmarks compare with).
        for dir in ["src", "runtime/src", "sandbox/src"] {
            sources(&host.join(dir), &mut files);
        }
        assert!(files.len() > 50, "the host's sources were found: {}", files.len());
        let mut misplaced = Vec::new();
        for file in &files {
            let whole = std::fs::read_to_string(file).unwrap();
            // The product's code, not its tests (this one names every call).
            let text = whole.split("#[cfg(test)]").next().unwrap_or_default();
            let shown = file.strip_prefix(host).unwrap().display().to_string();
            for (call, home) in ALLOWED {
                let uses = text.lines().filter(|l| l.contains(call) && !l.trim_start().starts_with("//")).count();
                if uses > 0 && shown != home {
                    misplaced.push(format!("{shown}: {call}"));
                }
            }
        }
        assert!(misplaced.is_empty(), "a request path made outside its module: {misplaced:?}");
    }
}
