//! The host's view of a plugin's manifest: validated once at load.

use serde::Serialize;

use crate::Selector;
use crate::bindings::{Gvk, wit};

/// Which objects of a kind a plugin wants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KindSelector {
    /// The kind.
    #[serde(serialize_with = "gvk_text")]
    pub kind: Gvk,
    /// Only this namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// A label selector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// Settings a plugin proposes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Concurrent reconciles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent_reconciles: Option<u32>,
    /// Call deadline in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u32>,
    /// Memory ceiling in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    /// Response cap in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_limit_bytes: Option<u64>,
    /// Periodic requeue in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync_seconds: Option<u32>,
}

/// The contract a plugin was built for, which decides what its manifest means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Contract {
    /// `wasmloop:plugin@0.1.x`, served through the adapter: every declared kind is writable,
    /// as 0.1 allowed, and Kubernetes RBAC of the plugin's identity is the only wall.
    #[serde(rename = "0.1")]
    V0_1,
    /// `wasmloop:plugin@0.2.x`: writes need a grant (`writes`) unless implied.
    #[serde(rename = "0.2")]
    V0_2,
}

/// Verbs of a write grant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WriteVerbs {
    /// Server-side apply.
    pub apply: bool,
    /// Merge or JSON patch.
    pub patch: bool,
    /// Delete.
    pub delete: bool,
}

/// Where a write grant applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum WriteScope {
    /// The primary's namespace (cluster-scoped objects, for a cluster-scoped primary).
    PrimaryNamespace,
    /// These namespaces.
    Namespaces(Vec<String>),
    /// Everywhere, cluster-scoped objects included.
    Any,
}

/// Leave to write a kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WriteGrant {
    /// The kind.
    #[serde(serialize_with = "gvk_text")]
    pub kind: Gvk,
    /// The verbs.
    pub verbs: WriteVerbs,
    /// Where.
    pub scope: WriteScope,
}

/// A validated manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Plugin name (field manager `wasmloop/<name>`).
    pub name: String,
    /// Plugin version.
    pub version: String,
    /// The primary kind.
    pub primary: KindSelector,
    /// Owned child kinds.
    #[serde(serialize_with = "gvk_list")]
    pub owns: Vec<Gvk>,
    /// Watched related kinds.
    pub watches: Vec<KindSelector>,
    /// Kinds only read.
    #[serde(serialize_with = "gvk_list")]
    pub reads: Vec<Gvk>,
    /// Kinds served as metadata only.
    #[serde(serialize_with = "gvk_list", skip_serializing_if = "Vec::is_empty")]
    pub metadata_only: Vec<Gvk>,
    /// Write grants beyond the implied ones.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<WriteGrant>,
    /// The contract the plugin was built for.
    pub contract: Contract,
    /// The finalizer held on primaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalizer: Option<String>,
    /// Prune owned children not applied.
    pub prune: bool,
    /// Deliver phase `deleted`.
    pub deliver_deleted: bool,
    /// Deliver `previous`.
    pub deliver_previous: bool,
    /// Proposed settings.
    pub settings: Settings,
}

fn gvk_text<S: serde::Serializer>(g: &Gvk, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(g)
}

fn gvk_list<S: serde::Serializer>(gs: &[Gvk], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(gs.iter().map(ToString::to_string))
}

fn selector(s: wit::KindSelector) -> KindSelector {
    KindSelector { kind: s.kind, namespace: s.namespace, label_selector: s.label_selector }
}

fn check_kind(kind: &Gvk, role: &str) -> Result<(), String> {
    if kind.version.is_empty() || kind.kind.is_empty() {
        return Err(format!(
            "the {role} kind ({kind}) has no version or kind name; declare it with Manifest::primary::<K>() (or owns/watches/reads) and a type that implements Kind"
        ));
    }
    Ok(())
}

/// A write grant's namespaces are at most this many.
const MAX_GRANT_NAMESPACES: usize = 64;

fn grant(g: wit::WriteGrant) -> Result<WriteGrant, String> {
    check_kind(&g.kind, "written")?;
    let verbs = WriteVerbs {
        apply: g.verbs.contains(wit::WriteVerbs::APPLY),
        patch: g.verbs.contains(wit::WriteVerbs::PATCH),
        delete: g.verbs.contains(wit::WriteVerbs::DELETE),
    };
    if verbs == WriteVerbs::default() {
        return Err(format!("the write grant on {} names no verb; give apply, patch or delete", g.kind));
    }
    let scope = match g.scope {
        wit::WriteScope::PrimaryNamespace => WriteScope::PrimaryNamespace,
        wit::WriteScope::Any => WriteScope::Any,
        wit::WriteScope::Namespaces(list) => {
            if list.is_empty() || list.len() > MAX_GRANT_NAMESPACES {
                return Err(format!(
                    "the write grant on {} lists {} namespaces; list 1 to {MAX_GRANT_NAMESPACES}, or use scope any",
                    g.kind,
                    list.len()
                ));
            }
            for ns in &list {
                crate::validate::namespace(ns).map_err(|e| format!("the write grant on {}: {e}", g.kind))?;
            }
            WriteScope::Namespaces(list)
        }
    };
    Ok(WriteGrant { kind: g.kind, verbs, scope })
}

fn check_settings(s: &Settings) -> Result<(), String> {
    let zero = [
        ("max-concurrent-reconciles", s.max_concurrent_reconciles.map(u64::from)),
        ("deadline-ms", s.deadline_ms.map(u64::from)),
        ("memory-limit-bytes", s.memory_limit_bytes),
        ("response-limit-bytes", s.response_limit_bytes),
        ("resync-seconds", s.resync_seconds.map(u64::from)),
    ]
    .into_iter()
    .find(|(_, v)| *v == Some(0));
    match zero {
        Some((name, _)) => {
            Err(format!("setting {name} is 0; leave it unset for the host default, or give a positive value"))
        }
        None => Ok(()),
    }
}

fn check_selector(s: &KindSelector, role: &str) -> Result<(), String> {
    check_kind(&s.kind, role)?;
    if let Some(sel) = &s.label_selector {
        sel.parse::<Selector>().map_err(|e| format!("{role} {}: {e}", s.kind))?;
    }
    Ok(())
}

/// A finalizer must be a qualified name (`domain/name`), as the API server demands.
fn check_finalizer(f: &str) -> Result<(), String> {
    let ok = f.split_once('/').is_some_and(|(domain, name)| {
        domain.contains('.')
            && !name.is_empty()
            && f.len() <= 316
            && f.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '/' | '_'))
    });
    if ok { Ok(()) } else { Err(format!("finalizer {f:?} must look like `example.com/name`")) }
}

impl Manifest {
    /// Validates a manifest as the guest returned it (a 0.1 one comes through the adapter).
    ///
    /// # Errors
    /// A sentence naming the first invalid field.
    pub(crate) fn from_wit(m: wit::PluginManifest, contract: Contract) -> Result<Manifest, String> {
        let manifest = Manifest {
            name: m.name,
            version: m.version,
            primary: selector(m.primary),
            owns: m.owns,
            watches: m.watches.into_iter().map(selector).collect(),
            reads: m.reads,
            metadata_only: m.metadata_only,
            writes: m.writes.into_iter().map(grant).collect::<Result<_, _>>()?,
            contract,
            finalizer: m.finalizer,
            prune: m.prune,
            deliver_deleted: m.deliver_deleted,
            deliver_previous: m.deliver_previous,
            settings: Settings {
                max_concurrent_reconciles: m.settings.max_concurrent_reconciles,
                deadline_ms: m.settings.deadline_ms,
                memory_limit_bytes: m.settings.memory_limit_bytes,
                response_limit_bytes: m.settings.response_limit_bytes,
                resync_seconds: m.settings.resync_seconds,
            },
        };
        let name_ok = !manifest.name.is_empty()
            && manifest.name.len() <= 63
            && manifest.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !name_ok {
            return Err(format!("name {:?} must be 1-63 characters of a-z, 0-9 and '-'", manifest.name));
        }
        check_selector(&manifest.primary, "primary")?;
        manifest.owns.iter().try_for_each(|k| check_kind(k, "owned"))?;
        manifest.watches.iter().try_for_each(|w| check_selector(w, "watched"))?;
        manifest.reads.iter().try_for_each(|k| check_kind(k, "read"))?;
        if let Some(k) = manifest.metadata_only.iter().find(|k| {
            !(manifest.owns.contains(k) || manifest.reads.contains(k) || manifest.watches.iter().any(|w| &w.kind == *k))
        }) {
            return Err(format!(
                "metadata-only kind {k} is not under owns, watches or reads; declare how the plugin sees it there too"
            ));
        }
        if let Some(f) = &manifest.finalizer {
            check_finalizer(f)?;
        }
        check_settings(&manifest.settings)?;
        Ok(manifest)
    }

    /// Every kind the plugin may read or act on.
    pub fn declared_kinds(&self) -> impl Iterator<Item = &Gvk> {
        std::iter::once(&self.primary.kind)
            .chain(&self.owns)
            .chain(self.watches.iter().map(|w| &w.kind))
            .chain(&self.reads)
    }

    /// True when the plugin declared `kind`.
    pub fn declares(&self, kind: &Gvk) -> bool {
        self.declared_kinds().any(|k| k == kind)
    }

    /// True when the plugin names this `apiVersion` and `kind` anywhere in its manifest, so
    /// that a write of it is a question of grants ([`crate::capability::permits`]), not of a
    /// kind it never declared. Allocates nothing: it runs for every action of every reconcile.
    pub fn writes_api(&self, api_version: &str, kind: &str) -> bool {
        let (group, version) = wasmloop_sdk::kind::split_api_version(api_version);
        let is = |k: &Gvk| k.kind == kind && k.version == version && k.group == group;
        self.declared_kinds().any(is) || self.writes.iter().any(|g| is(&g.kind))
    }

    /// True when the plugin is served objects of `kind` as metadata only.
    pub fn is_metadata_only(&self, kind: &Gvk) -> bool {
        self.metadata_only.contains(kind)
    }

    /// The field manager of the plugin's writes.
    pub fn field_manager(&self) -> String {
        format!("wasmloop/{}", self.name)
    }
}
