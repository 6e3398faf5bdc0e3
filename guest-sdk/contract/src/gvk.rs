//! Kinds and `apiVersion`s: `apps/v1` is group `apps`, version `v1`; `v1` is the core
//! group's.

use std::fmt;

/// A Kubernetes group, version and kind. `group` is empty for the core API.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Gvk {
    /// API group, empty for core.
    pub group: String,
    /// Version within the group.
    pub version: String,
    /// Kind name.
    pub kind: String,
}

/// Splits an `apiVersion` into group and version: `apps/v1` → (`apps`, `v1`), `v1` → (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

impl Gvk {
    /// Builds a kind from its `apiVersion` (`apps/v1`, or `v1` for core) and kind name.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        let (group, version) = split_api_version(api_version);
        Gvk { group: group.into(), version: version.into(), kind: kind.into() }
    }

    /// The `apiVersion` string: `group/version`, or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// True when an object's `apiVersion` and `kind` name this kind.
    pub fn matches(&self, api_version: &str, kind: &str) -> bool {
        kind == self.kind && Gvk::from_api_version(api_version, kind) == *self
    }
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)
    }
}
