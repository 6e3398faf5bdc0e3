//! What the host knows plugins and their sources by.
//!
//! Both are typed: a [`PluginId`] is a realm and a name, a [`SourceId`] a file or an object
//! of a [`SourceKind`]. They are formatted for logs, reports, metric labels and status
//! messages, and never parsed back: code that needs the namespace or the name of an id asks
//! the id. The one parse, [`PluginId::parse`], reads the keys an operator writes in
//! `host.yaml`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmloop_contract::names::{Name, Namespace};

use crate::validate;

/// Text that names no plugin: the sentence says what the rule is and what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadPluginId(String);

/// A plugin as the host knows it: its name within its realm (the plugin namespace of the
/// ConfigMap or `WasmPlugin` that offered it; none for the operator's files). Names are
/// unique within a realm.
///
/// Shown as `NAME` or `NAMESPACE/NAME`, as `host.yaml` keys name plugins.
///
/// ```
/// use wasmloop_sandbox::PluginId;
/// use wasmloop_contract::names::Namespace;
/// let realm = Namespace::parse("team-b").unwrap();
/// let id = PluginId::new(Some(realm), "labeler").unwrap();
/// assert_eq!((id.name(), id.to_string().as_str()), ("labeler", "team-b/labeler"));
/// assert_eq!(PluginId::parse("team-b/labeler").unwrap(), id);
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PluginId(Arc<Parts>);

/// Shared: an id is cloned into every error, report and lane that names the plugin.
#[derive(PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Parts {
    realm: Option<Namespace>,
    name: Box<str>,
    /// The display form, made once: ids label metrics and logs on every call.
    shown: Box<str>,
}

impl PluginId {
    /// Plugin `name` of `realm`.
    ///
    /// # Errors
    /// When `name` is not a plugin name (1-63 characters of `a-z`, `0-9` and `-`).
    pub fn new(realm: Option<Namespace>, name: &str) -> Result<PluginId, BadPluginId> {
        validate::plugin_name(name).map_err(BadPluginId)?;
        let shown = match &realm {
            None => name.into(),
            Some(realm) => format!("{realm}/{name}").into_boxed_str(),
        };
        Ok(PluginId(Arc::new(Parts { realm, name: name.into(), shown })))
    }

    /// A `host.yaml` key: `NAME` for a plugin of the operator's files, `NAMESPACE/NAME` for
    /// one a plugin namespace offers.
    ///
    /// # Errors
    /// A sentence naming the key and what to write instead.
    pub fn parse(key: &str) -> Result<PluginId, BadPluginId> {
        let what = |e: &dyn fmt::Display| {
            BadPluginId(format!(
                "{}: {e}; write NAME for a plugin file, NAMESPACE/NAME for a plugin namespace's",
                validate::quoted(key)
            ))
        };
        let (realm, name) = match key.split_once('/') {
            Some((namespace, name)) => (Some(Namespace::parse(namespace).map_err(|e| what(&e))?), name),
            None => (None, key),
        };
        PluginId::new(realm, name).map_err(|e| what(&e))
    }

    /// The plugin namespace that offered the plugin; none for the operator's files.
    pub fn realm(&self) -> Option<&Namespace> {
        self.0.realm.as_ref()
    }

    /// The plugin's name, as its manifest gives it.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The display form, for metric labels and logs.
    pub fn as_str(&self) -> &str {
        &self.0.shown
    }
}

impl fmt::Display for PluginId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.shown)
    }
}

impl fmt::Debug for PluginId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0.shown, f)
    }
}

/// Compares the display form: what tests and `host.yaml` lookups hold is text.
impl PartialEq<str> for PluginId {
    fn eq(&self, other: &str) -> bool {
        &*self.0.shown == other
    }
}

impl PartialEq<&str> for PluginId {
    fn eq(&self, other: &&str) -> bool {
        &*self.0.shown == *other
    }
}

impl PartialEq<String> for PluginId {
    fn eq(&self, other: &String) -> bool {
        *self.0.shown == **other
    }
}

impl<'de> serde::Deserialize<'de> for PluginId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PluginId, D::Error> {
        let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
        PluginId::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for PluginId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.shown)
    }
}

/// The kind of object a plugin namespace offers plugins as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceKind {
    /// A ConfigMap labelled `wasmloop.dev/plugin`.
    ConfigMap,
    /// A `WasmPlugin` (`wasmloop.dev/v1alpha1`).
    WasmPlugin,
}

impl SourceKind {
    /// The kind's name, as the API gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::ConfigMap => "ConfigMap",
            SourceKind::WasmPlugin => "WasmPlugin",
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a plugin came from: a file or a crate the operator named, or an object in a plugin
/// namespace.
///
/// Shown as `file PATH`, `crate PATH` or `KIND NAMESPACE/NAME`.
///
/// ```
/// use wasmloop_sandbox::{SourceId, SourceKind};
/// use wasmloop_contract::names::{Name, Namespace};
/// let id = SourceId::object(SourceKind::WasmPlugin, Namespace::parse("team-a").unwrap(), Name::parse("hello").unwrap());
/// assert_eq!(id.to_string(), "WasmPlugin team-a/hello");
/// assert_eq!(id.as_object().map(|(kind, ns, _)| (kind, ns.as_str())), Some((SourceKind::WasmPlugin, "team-a")));
/// assert_eq!(SourceId::file("labeler.wasm").to_string(), "file labeler.wasm");
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceId {
    /// A component file (`run --plugin`, `dev`'s watched path).
    File(PathBuf),
    /// A plugin crate `dev` builds on save.
    Crate(PathBuf),
    /// A ConfigMap or `WasmPlugin` in a plugin namespace.
    Object {
        /// Which of the two.
        kind: SourceKind,
        /// The plugin namespace.
        namespace: Namespace,
        /// The object's name.
        name: Name,
    },
}

impl SourceId {
    /// The file at `path`.
    pub fn file(path: impl Into<PathBuf>) -> SourceId {
        SourceId::File(path.into())
    }

    /// Object `namespace/name` of `kind`.
    pub fn object(kind: SourceKind, namespace: Namespace, name: Name) -> SourceId {
        SourceId::Object { kind, namespace, name }
    }

    /// The object, when the source is one.
    pub fn as_object(&self) -> Option<(SourceKind, &Namespace, &Name)> {
        match self {
            SourceId::File(_) | SourceId::Crate(_) => None,
            SourceId::Object { kind, namespace, name } => Some((*kind, namespace, name)),
        }
    }

    /// The file or crate, when the source is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            SourceId::File(path) | SourceId::Crate(path) => Some(path),
            SourceId::Object { .. } => None,
        }
    }
}

impl fmt::Display for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceId::File(path) => write!(f, "file {}", path.display()),
            SourceId::Crate(path) => write!(f, "crate {}", path.display()),
            SourceId::Object { kind, namespace, name } => write!(f, "{kind} {namespace}/{name}"),
        }
    }
}

impl fmt::Debug for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(text: &str) -> Namespace {
        Namespace::parse(text).unwrap()
    }

    #[test]
    fn a_plugin_of_the_operators_files_is_shown_by_name_alone() {
        let id = PluginId::new(None, "labeler").unwrap();
        assert_eq!((id.as_str(), id.realm()), ("labeler", None));
    }

    #[test]
    fn a_plugin_of_a_realm_is_shown_with_its_namespace() {
        let id = PluginId::new(Some(ns("team-b")), "labeler").unwrap();
        assert_eq!(
            (id.as_str(), id.name(), id.realm().map(Namespace::as_str)),
            ("team-b/labeler", "labeler", Some("team-b"))
        );
    }

    #[test]
    fn plugins_of_one_name_in_two_realms_are_two_plugins() {
        let a = PluginId::new(Some(ns("team-a")), "p").unwrap();
        let b = PluginId::new(Some(ns("team-b")), "p").unwrap();
        assert_ne!(a, b);
        assert_ne!(a, PluginId::new(None, "p").unwrap());
    }

    #[test]
    fn a_plugin_name_with_a_slash_is_no_id() {
        assert!(PluginId::new(None, "team-b/p").is_err());
        assert!(PluginId::new(None, "").is_err());
    }

    #[test]
    fn a_host_yaml_key_parses_to_the_id_it_names() {
        assert_eq!(PluginId::parse("p").unwrap(), PluginId::new(None, "p").unwrap());
        assert_eq!(PluginId::parse("team-b/p").unwrap(), PluginId::new(Some(ns("team-b")), "p").unwrap());
    }

    #[test]
    fn a_bad_host_yaml_key_says_what_to_write() {
        let error = PluginId::parse("team-b/P_Q").unwrap_err().to_string();
        assert!(error.contains("write NAME for a plugin file, NAMESPACE/NAME"), "{error}");
        assert!(PluginId::parse("Team/p").is_err());
        assert!(PluginId::parse("a/b/c").is_err());
    }

    #[test]
    fn a_source_object_is_shown_by_kind_namespace_and_name() {
        let id = SourceId::object(SourceKind::ConfigMap, ns("team-a"), Name::parse("hello").unwrap());
        assert_eq!(id.to_string(), "ConfigMap team-a/hello");
        assert!(id.path().is_none());
    }

    #[test]
    fn a_configmap_and_a_wasmplugin_of_one_name_are_two_sources() {
        let name = Name::parse("hello").unwrap();
        let a = SourceId::object(SourceKind::ConfigMap, ns("team-a"), name.clone());
        let b = SourceId::object(SourceKind::WasmPlugin, ns("team-a"), name);
        assert_ne!(a, b);
    }

    #[test]
    fn a_file_source_is_no_object() {
        let id = SourceId::file("plugins/labeler.wasm");
        assert_eq!((id.to_string().as_str(), id.as_object()), ("file plugins/labeler.wasm", None));
    }
}
