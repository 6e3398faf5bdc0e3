//! Which writes a plugin may make: its declared write grants and the implied ones, within the
//! namespace the operator confines it to, as one pure decision. The executor asks it once the
//! target's namespace is settled by discovery (a namespaced object without one is in the
//! primary's; a cluster-scoped one has none), before it builds a URL. The sandbox asks it
//! earlier, while decoding the response, for every place an object the plugin left without a
//! namespace could turn out to be, so `wasmloop reconcile` shows a refusal offline too.
//! Kubernetes RBAC of the plugin's identity is the second wall.
//!
//! Grants are the plugin's own declaration: they keep a plugin's writes to what it says it
//! does, visible before it runs (`wasmloop inspect`). Against a hostile author, the walls are
//! the ones it does not write: the operator's confinement and its identity's RBAC.
//!
//! Implied, with no grant: `status` and `event`, which can name no object but the primary,
//! and `apply` and `delete` of owned kinds in the primary's namespace (their owner reference
//! cannot cross namespaces). Anything else needs a `write-grant` (kind, verbs, scope).

use std::fmt;

use crate::bindings::Gvk;
use crate::manifest::{Contract, Manifest, WriteScope};

/// A write verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Server-side apply.
    Apply,
    /// Merge or JSON patch.
    Patch,
    /// Delete.
    Delete,
}

impl Verb {
    /// The verb as the contract spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Apply => "apply",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }
}

/// A write no grant covers, or one outside the operator's confinement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotGranted {
    /// The verb.
    pub verb: Verb,
    /// The kind.
    pub kind: String,
    /// The target's namespace; none for a cluster-scoped object.
    pub namespace: Option<String>,
    /// The namespace the operator confines the plugin to, when that is what refused it.
    pub confined_to: Option<String>,
}

impl fmt::Display for NotGranted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (verb, kind) = (self.verb.as_str(), &self.kind);
        let place = match &self.namespace {
            Some(ns) => format!("in namespace {ns}"),
            None => "cluster-scoped".to_owned(),
        };
        if let Some(confined) = &self.confined_to {
            return write!(
                f,
                "the operator confines it to namespace {confined}, so it may not {verb} {kind} {place}; change plugins.<name>.namespace in host.yaml if it should"
            );
        }
        let scope = match &self.namespace {
            Some(ns) => format!("primary-namespace (if it is the primary's), namespaces [{ns}] or any"),
            None => "any (or primary-namespace, for a cluster-scoped primary)".to_owned(),
        };
        write!(
            f,
            "no write grant lets it {verb} {kind} {place}; declare one under writes in the manifest: kind {kind}, verb {verb}, scope {scope}"
        )
    }
}

fn implied(manifest: &Manifest, verb: Verb, kind: &Gvk, in_primary_namespace: bool) -> bool {
    // Children of owned kinds carry the primary's owner reference, which cannot cross
    // namespaces: applying and deleting them in the primary's namespace is the plugin's job.
    matches!(verb, Verb::Apply | Verb::Delete) && in_primary_namespace && manifest.owns.contains(kind)
}

fn covers(scope: &WriteScope, namespace: Option<&str>, in_primary_namespace: bool) -> bool {
    match scope {
        WriteScope::Any => true,
        WriteScope::PrimaryNamespace => in_primary_namespace,
        WriteScope::Namespaces(list) => namespace.is_some_and(|ns| list.iter().any(|l| l == ns)),
    }
}

/// Where a plugin writes from: the primary's namespace (none: a cluster-scoped primary) and the
/// namespace the operator confines the plugin to, if any.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bounds<'a> {
    /// The primary's namespace.
    pub primary_namespace: Option<&'a str>,
    /// `plugins.<name>.namespace` of host.yaml.
    pub confined_to: Option<&'a str>,
}

/// Whether `manifest` lets its plugin `verb` an object of `kind` in `namespace` (none: a
/// cluster-scoped object) within `bounds`.
///
/// A plugin the operator confines to a namespace writes there only (no cluster-scoped
/// objects), whatever it declares. Within that, a 0.1 plugin may write every kind it declares,
/// as 0.1 allowed; a 0.2 plugin may apply and delete owned kinds in the primary's namespace,
/// and anything a grant covers.
///
/// # Errors
/// [`NotGranted`], which says what to declare.
///
/// ```
/// # use wasmloop_sandbox::capability::{permits, Bounds, Verb};
/// # fn demo(manifest: &wasmloop_sandbox::Manifest, kind: &wasmloop_sandbox::Gvk) {
/// let bounds = Bounds { primary_namespace: Some("shop"), confined_to: None };
/// if let Err(refused) = permits(manifest, bounds, Verb::Patch, kind, Some("kube-system")) {
///     eprintln!("plugin {}: {refused}", manifest.name);
/// }
/// # }
/// ```
pub fn permits(
    manifest: &Manifest,
    bounds: Bounds<'_>,
    verb: Verb,
    kind: &Gvk,
    namespace: Option<&str>,
) -> Result<(), NotGranted> {
    let refusal = |confined_to: Option<&str>| NotGranted {
        verb,
        kind: kind.to_string(),
        namespace: namespace.map(str::to_owned),
        confined_to: confined_to.map(str::to_owned),
    };
    if let Some(confined) = bounds.confined_to
        && namespace != Some(confined)
    {
        return Err(refusal(Some(confined)));
    }
    let in_primary_namespace = namespace == bounds.primary_namespace;
    let allowed = match manifest.contract {
        Contract::V0_1 => manifest.declares(kind),
        Contract::V0_2 | Contract::V0_3 => {
            implied(manifest, verb, kind, in_primary_namespace)
                || manifest.writes.iter().any(|g| {
                    &g.kind == kind
                        && match verb {
                            Verb::Apply => g.verbs.apply,
                            Verb::Patch => g.verbs.patch,
                            Verb::Delete => g.verbs.delete,
                        }
                        && covers(&g.scope, namespace, in_primary_namespace)
                })
        }
    };
    if allowed { Ok(()) } else { Err(refusal(None)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{WriteGrant, WriteVerbs};

    fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
        Gvk::new(group, version, kind).unwrap()
    }

    fn manifest(contract: Contract, writes: Vec<WriteGrant>) -> Manifest {
        Manifest {
            owns: vec![gvk("apps", "v1", "Deployment")],
            reads: vec![crate::KindSelector::of(gvk("", "v1", "Secret"))],
            writes,
            contract,
            ..Manifest::declaring("p", gvk("example.com", "v1", "Foo"))
        }
    }

    fn grant(kind: Gvk, verbs: WriteVerbs, scope: WriteScope) -> WriteGrant {
        WriteGrant { kind, verbs, scope }
    }

    const PATCH: WriteVerbs = WriteVerbs { apply: false, patch: true, delete: false };
    const ALL: WriteVerbs = WriteVerbs { apply: true, patch: true, delete: true };

    #[test]
    fn writes_are_allowed_exactly_where_an_implied_or_declared_grant_covers_them() {
        let deployment = gvk("apps", "v1", "Deployment");
        let configmap = gvk("", "v1", "ConfigMap");
        let secret = gvk("", "v1", "Secret");
        let node = gvk("", "v1", "Node");
        let grants = vec![
            grant(configmap.clone(), PATCH, WriteScope::PrimaryNamespace),
            grant(secret.clone(), ALL, WriteScope::Namespaces(vec!["vault".parse().unwrap()])),
            grant(node.clone(), PATCH, WriteScope::Any),
        ];
        let m2 = manifest(Contract::V0_2, grants);
        let m1 = manifest(Contract::V0_1, Vec::new());
        let shop = Some("shop");
        #[rustfmt::skip]
        let cases: &[(&Manifest, Verb, &Gvk, Option<&str>, bool)] = &[
            // Owned kinds: apply and delete in the primary's namespace, nothing else.
            (&m2, Verb::Apply, &deployment, shop, true),
            (&m2, Verb::Delete, &deployment, shop, true),
            (&m2, Verb::Patch, &deployment, shop, false),
            (&m2, Verb::Apply, &deployment, Some("kube-system"), false),
            // A primary-namespace grant: that verb, that namespace.
            (&m2, Verb::Patch, &configmap, shop, true),
            (&m2, Verb::Delete, &configmap, shop, false),
            (&m2, Verb::Patch, &configmap, Some("other"), false),
            (&m2, Verb::Patch, &configmap, None, false),
            // Listed namespaces only; reading a kind grants no write.
            (&m2, Verb::Delete, &secret, Some("vault"), true),
            (&m2, Verb::Delete, &secret, shop, false),
            // Any: every namespace and cluster-scoped objects.
            (&m2, Verb::Patch, &node, None, true),
            (&m2, Verb::Patch, &node, Some("x"), true),
            (&m2, Verb::Delete, &node, None, false),
            // No grant at all.
            (&m2, Verb::Apply, &gvk("", "v1", "Pod"), shop, false),
            // 0.1: every declared kind, anywhere; nothing undeclared.
            (&m1, Verb::Patch, &secret, Some("kube-system"), true),
            (&m1, Verb::Apply, &deployment, Some("other"), true),
            (&m1, Verb::Delete, &configmap, shop, false),
        ];
        let bounds = Bounds { primary_namespace: shop, confined_to: None };
        for (m, verb, kind, ns, expected) in cases {
            let got = permits(m, bounds, *verb, kind, *ns).is_ok();
            assert_eq!(got, *expected, "{:?} {verb:?} {kind} in {ns:?}", m.contract);
        }
    }

    #[test]
    fn a_cluster_scoped_primary_implies_writes_of_cluster_scoped_children_only() {
        let mut m = manifest(Contract::V0_2, Vec::new());
        let (role, configmap) = (gvk("rbac.authorization.k8s.io", "v1", "ClusterRole"), gvk("", "v1", "ConfigMap"));
        m.owns = vec![role.clone(), configmap.clone()];
        let cluster = Bounds::default();
        assert!(permits(&m, cluster, Verb::Apply, &role, None).is_ok());
        assert!(permits(&m, cluster, Verb::Apply, &configmap, Some("shop")).is_err());
    }

    #[test]
    fn an_operator_confinement_holds_whatever_the_plugin_declares_or_was_built_for() {
        let node = gvk("", "v1", "Node");
        let m2 = manifest(Contract::V0_2, vec![grant(node.clone(), PATCH, WriteScope::Any)]);
        let mut m1 = manifest(Contract::V0_1, Vec::new());
        m1.reads.push(crate::KindSelector::of(node.clone()));
        let confined = Bounds { primary_namespace: Some("t"), confined_to: Some("t") };
        // A cluster-scoped primary confined too: "its namespace" is no way out.
        let cluster_primary = Bounds { primary_namespace: None, confined_to: Some("t") };
        for m in [&m1, &m2] {
            for bounds in [confined, cluster_primary] {
                assert!(permits(m, bounds, Verb::Patch, &node, None).is_err(), "{:?} {bounds:?}", m.contract);
                assert!(permits(m, bounds, Verb::Patch, &node, Some("other")).is_err());
            }
            assert!(permits(m, confined, Verb::Patch, &node, Some("t")).is_ok(), "{:?}", m.contract);
        }
        let refused = permits(&m2, confined, Verb::Patch, &node, None).unwrap_err().to_string();
        assert!(
            refused.starts_with("the operator confines it to namespace t, so it may not patch v1/Node cluster-scoped"),
            "{refused}"
        );
    }

    #[test]
    fn a_refusal_names_the_verb_the_kind_the_place_and_what_to_declare() {
        let m = manifest(Contract::V0_2, Vec::new());
        let bounds = Bounds { primary_namespace: Some("shop"), confined_to: None };
        let refused =
            permits(&m, bounds, Verb::Patch, &gvk("", "v1", "ConfigMap"), Some("kube-system")).unwrap_err().to_string();
        for part in ["patch v1/ConfigMap in namespace kube-system", "under writes", "namespaces [kube-system]"] {
            assert!(refused.contains(part), "{refused}");
        }
    }
}
