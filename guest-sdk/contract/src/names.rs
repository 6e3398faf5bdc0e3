//! Names the host may put into a request, a path, a metric label or a log line, as types that
//! only validation builds.
//!
//! A manifest, an action, a cache call, a ConfigMap or `host.yaml` hands the host text; the
//! boundary that reads it parses that text into these types ([`Namespace::parse`],
//! [`Gvk::new`], ...), and everything past it takes the types, never `&str`. So a namespace
//! such as `tenant-a/secrets?x=` is refused where it arrives and cannot reach a URL later,
//! whichever call site forgets to check: there is nothing left to forget.
//!
//! Each type holds its text as the API server would accept it (the rules are
//! [`crate::validate`]'s), derefs to `str` for reading, and has no way in but `parse`.
//!
//! ```
//! use wasmloop_contract::names::{Gvk, Namespace};
//! let ns = Namespace::parse("tenant-a").unwrap();
//! assert_eq!(ns.as_str(), "tenant-a");
//! assert!(Namespace::parse("tenant-a/secrets?x=").is_err());
//! let deployments = Gvk::from_api_version("apps/v1", "Deployment").unwrap();
//! assert_eq!((deployments.group().as_str(), deployments.version().as_str()), ("apps", "v1"));
//! assert!(Gvk::new("", "v1/namespaces/wasmloop-system/secrets/x", "Secret").is_err());
//! ```

use std::fmt;

use crate::selector::Selector;
use crate::validate;

/// Text from outside that is not a valid name of its kind. The message names the value (cut
/// to [`validate::MAX_QUOTED`] bytes) and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(String);

impl Invalid {
    /// The sentence naming the value and the rule.
    pub fn message(&self) -> &str {
        &self.0
    }

    /// The same sentence behind `context` (`primary kind: ...`).
    #[must_use]
    pub fn within(self, context: impl fmt::Display) -> Invalid {
        Invalid(format!("{context}: {}", self.0))
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

impl From<Invalid> for String {
    fn from(invalid: Invalid) -> String {
        invalid.0
    }
}

/// A string newtype with `parse` as its only constructor.
macro_rules! validated {
    ($(#[$doc:meta])* $name:ident, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Box<str>);

        impl $name {
            /// `text`, when it is valid.
            ///
            /// # Errors
            /// A sentence naming the value and the rule it breaks.
            pub fn parse(text: &str) -> Result<$name, Invalid> {
                let check: fn(&str) -> Result<(), String> = $check;
                check(text).map_err(Invalid)?;
                Ok($name(text.into()))
            }

            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }

        impl std::str::FromStr for $name {
            type Err = Invalid;
            fn from_str(text: &str) -> Result<$name, Invalid> {
                $name::parse(text)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = Invalid;
            fn try_from(text: &str) -> Result<$name, Invalid> {
                $name::parse(text)
            }
        }

        impl TryFrom<&String> for $name {
            type Error = Invalid;
            fn try_from(text: &String) -> Result<$name, Invalid> {
                $name::parse(text)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                $name::parse(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}

validated!(
    /// A namespace: a DNS-1123 label.
    Namespace,
    validate::namespace
);

validated!(
    /// An object's name, as it may stand in a request path ([`validate::name`]).
    Name,
    validate::name
);

validated!(
    /// An API group: empty for the core group, else a DNS-1123 subdomain.
    Group,
    |group| validate::group_version(group, "v1")
);

validated!(
    /// An API version: a DNS-1035 label (`v1`, `v1beta2`).
    Version,
    |version| validate::group_version("", version)
);

validated!(
    /// A kind's name: letters and digits, starting with a letter.
    Kind,
    validate::kind
);

validated!(
    /// A field manager the host writes as: `wasmloop/` and a plugin's name.
    FieldManager,
    validate::field_manager
);

/// A kind: group, version and kind name, each valid. `group` is empty for the core API.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gvk {
    group: Group,
    version: Version,
    kind: Kind,
}

impl Gvk {
    /// The kind `kind` of `group` and `version`.
    ///
    /// # Errors
    /// A sentence naming the first part that is not valid, and its rule.
    pub fn new(group: &str, version: &str, kind: &str) -> Result<Gvk, Invalid> {
        Ok(Gvk { group: Group::parse(group)?, version: Version::parse(version)?, kind: Kind::parse(kind)? })
    }

    /// The kind of an object with this `apiVersion` (`apps/v1`, or `v1` for core) and `kind`.
    ///
    /// # Errors
    /// A sentence naming what is not valid in either.
    pub fn from_api_version(api_version: &str, kind: &str) -> Result<Gvk, Invalid> {
        validate::api_version(api_version).map_err(Invalid)?;
        let (group, version) = crate::gvk::split_api_version(api_version);
        Gvk::new(group, version, kind)
    }

    /// The group, empty for core.
    pub fn group(&self) -> &Group {
        &self.group
    }

    /// The version.
    pub fn version(&self) -> &Version {
        &self.version
    }

    /// The kind's name.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// The `apiVersion`: `group/version`, or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// True when an object's `apiVersion` and `kind` name this kind. Allocates nothing.
    pub fn matches(&self, api_version: &str, kind: &str) -> bool {
        let (group, version) = crate::gvk::split_api_version(api_version);
        *self.kind == *kind && *self.version == *version && *self.group == *group
    }
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.group.as_str() {
            "" => write!(f, "{}/{}", self.version, self.kind),
            group => write!(f, "{group}/{}/{}", self.version, self.kind),
        }
    }
}

impl fmt::Debug for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gvk({self})")
    }
}

/// A label selector the API server accepts: parsed, and every key and value held to the
/// server's rules ([`crate::selector::for_server`]). Its text is the canonical form, so
/// equal selectors compare equal.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelSelector(Box<str>);

impl LabelSelector {
    /// `text`, when it parses and the API server would accept it.
    ///
    /// # Errors
    /// A sentence naming what does not parse, or the key or value that breaks a rule.
    pub fn parse(text: &str) -> Result<LabelSelector, Invalid> {
        let selector: Selector = text.parse().map_err(|e: crate::selector::SelectorError| Invalid(e.to_string()))?;
        LabelSelector::from_selector(&selector)
    }

    /// `selector`, when the API server would accept it.
    ///
    /// # Errors
    /// A sentence naming the key or value that breaks a rule.
    pub fn from_selector(selector: &Selector) -> Result<LabelSelector, Invalid> {
        crate::selector::for_server(selector).map_err(Invalid)?;
        Ok(LabelSelector(selector.to_string().into()))
    }

    /// The selector.
    pub fn selector(&self) -> Selector {
        self.0.parse().expect("a LabelSelector is a selector that parsed")
    }

    /// The canonical text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = Invalid;
    fn from_str(text: &str) -> Result<LabelSelector, Invalid> {
        LabelSelector::parse(text)
    }
}

impl serde::Serialize for LabelSelector {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_smuggled_namespace_is_refused_with_the_value_cut_and_the_rule() {
        let long = format!("tenant-a/secrets?x={}", "a".repeat(5000));
        let error = Namespace::parse(&long).unwrap_err();
        assert!(error.message().contains("is not a valid namespace"), "{error}");
        assert!(error.message().len() < 400, "the value is quoted cut: {} bytes", error.message().len());
    }

    #[test]
    fn a_smuggled_version_or_group_is_not_a_kind() {
        for (group, version, kind) in [
            ("", "v1/namespaces/wasmloop-system/secrets/registry-creds", "Secret"),
            ("apps/v1/x", "v1", "Deployment"),
            ("", "v1", "ConfigMap/../secrets"),
            ("", "", "ConfigMap"),
            ("Apps", "v1", "Deployment"),
        ] {
            assert!(Gvk::new(group, version, kind).is_err(), "{group}/{version}/{kind}");
        }
        assert!(Gvk::from_api_version("v1/namespaces/x", "Secret").is_err());
        assert_eq!(Gvk::new("", "v1", "ConfigMap").unwrap().api_version(), "v1");
    }

    #[test]
    fn a_gvk_matches_an_objects_api_version_and_kind() {
        let deployments = Gvk::from_api_version("apps/v1", "Deployment").unwrap();
        assert!(deployments.matches("apps/v1", "Deployment"));
        assert!(!deployments.matches("v1", "Deployment"));
        assert!(!deployments.matches("apps/v1beta1", "Deployment"));
        assert_eq!(deployments.to_string(), "apps/v1/Deployment");
    }

    #[test]
    fn label_selectors_are_held_to_the_servers_rules_and_kept_canonical() {
        assert_eq!(LabelSelector::parse("app = web ,tier").unwrap().as_str(), "app=web,tier");
        assert!(LabelSelector::parse("app=a&b=c").is_err());
        assert!(LabelSelector::parse("a in (").is_err());
    }

    #[test]
    fn field_managers_are_wasmloop_and_a_plugin_name() {
        assert!(FieldManager::parse("wasmloop/mirror").is_ok());
        for bad in ["mirror", "wasmloop/", "wasmloop/Bad Name", "wasmloop/a\nb"] {
            assert!(FieldManager::parse(bad).is_err(), "{bad:?}");
        }
    }
}
