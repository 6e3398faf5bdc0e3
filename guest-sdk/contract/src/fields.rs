//! Fields of an object named by path: Kubernetes field selectors (`metadata.name=db,type!=Opaque`),
//! which the API server applies to a watch, and index paths
//! (`spec.template.spec.volumes[*].configMap.name`), which the host evaluates to file an
//! object under keys.
//!
//! Every cache a plugin reads through (the host's informers, the offline cache, the SDK's test
//! host) evaluates a field selector the same way, [`FieldSelector::matches_object`]: the field's
//! JSON value as text, an absent field as the empty string, as the API server's field sets hold
//! them.
//!
//! ```
//! use serde_json::json;
//! use wasmloop_contract::fields::{FieldPath, FieldSelector};
//! let tls: FieldSelector = "type=kubernetes.io/tls".parse().unwrap();
//! assert!(tls.matches_object(&json!({"type": "kubernetes.io/tls"})));
//! let volumes: FieldPath = "spec.volumes[*].configMap.name".parse().unwrap();
//! let pod = json!({"spec": {"volumes": [{"configMap": {"name": "a"}}, {"secret": {}}]}});
//! assert_eq!(volumes.values(&pod), vec!["a".to_owned()]);
//! ```

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::validate::{MAX_NAME, cut, quoted};

/// Most requirements a field selector holds.
pub const MAX_FIELD_REQUIREMENTS: usize = 16;
/// Longest field path, in bytes.
pub const MAX_FIELD_PATH: usize = 256;
/// Most segments of a field path.
pub const MAX_FIELD_SEGMENTS: usize = 16;

/// One requirement of a field selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldRequirement {
    /// `path=value` or `path==value`.
    Equals(FieldPath, String),
    /// `path!=value`.
    NotEquals(FieldPath, String),
}

/// A parsed field selector: every requirement must hold. Values hold no `,`, `=`, `!` or `\`,
/// so the text the API server receives ([`FieldSelector::as_str`], canonical) means what it
/// meant here.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
    text: Box<str>,
}

/// Why a field selector or path was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError(String);

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FieldError {}

impl FieldSelector {
    /// Its requirements.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Its canonical text, as sent to the API server.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// True when `object` (a whole object as JSON) satisfies every requirement.
    pub fn matches_object(&self, object: &Value) -> bool {
        self.requirements.iter().all(|r| match r {
            FieldRequirement::Equals(path, value) => path.text(object) == *value,
            FieldRequirement::NotEquals(path, value) => path.text(object) != *value,
        })
    }

    /// True when it selects on nothing but `metadata.name` and `metadata.namespace`: fields
    /// an object keeps for life, so it never leaves the selection while it exists.
    pub fn on_immutable_fields(&self) -> bool {
        self.requirements.iter().all(|r| {
            let path = match r {
                FieldRequirement::Equals(p, _) | FieldRequirement::NotEquals(p, _) => p,
            };
            matches!(path.to_string().as_str(), "metadata.name" | "metadata.namespace")
        })
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn canonical(requirements: &[FieldRequirement]) -> String {
    let terms: Vec<String> = requirements
        .iter()
        .map(|r| match r {
            FieldRequirement::Equals(p, v) => format!("{p}={v}"),
            FieldRequirement::NotEquals(p, v) => format!("{p}!={v}"),
        })
        .collect();
    terms.join(",")
}

impl FromStr for FieldSelector {
    type Err = FieldError;

    fn from_str(text: &str) -> Result<Self, FieldError> {
        if text.trim().is_empty() {
            return Err(FieldError("the field selector is empty; leave it unset to select every object".into()));
        }
        let terms: Vec<&str> = text.split(',').collect();
        if terms.len() > MAX_FIELD_REQUIREMENTS {
            return Err(FieldError(format!(
                "the field selector has {} requirements; give at most {MAX_FIELD_REQUIREMENTS}",
                terms.len()
            )));
        }
        let requirements = terms.into_iter().map(requirement).collect::<Result<Vec<_>, _>>()?;
        let text = canonical(&requirements).into_boxed_str();
        Ok(FieldSelector { requirements, text })
    }
}

fn requirement(term: &str) -> Result<FieldRequirement, FieldError> {
    let (path, value, equal) = if let Some((p, v)) = term.split_once("!=") {
        (p, v, false)
    } else if let Some((p, v)) = term.split_once("==") {
        (p, v, true)
    } else if let Some((p, v)) = term.split_once('=') {
        (p, v, true)
    } else {
        return Err(FieldError(format!(
            "field selector term {} has no operator; write `field=value` or `field!=value`",
            quoted(term)
        )));
    };
    let path: FieldPath = path.trim().parse()?;
    if path.any_list() {
        return Err(FieldError(format!(
            "field selector field {path} names list items; the API server selects on plain fields"
        )));
    }
    let value = value.trim();
    if value.len() > MAX_NAME || value.chars().any(|c| c.is_control() || matches!(c, ',' | '=' | '!' | '\\')) {
        return Err(FieldError(format!(
            "field selector value {} for {path} is not one the API server reads back the same; give at most {MAX_NAME} characters without `,`, `=`, `!` or `\\`",
            quoted(value)
        )));
    }
    Ok(if equal {
        FieldRequirement::Equals(path, value.to_owned())
    } else {
        FieldRequirement::NotEquals(path, value.to_owned())
    })
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Segment {
    field: String,
    /// `[*]`: the field is a list, and the path goes on in each of its items.
    each: bool,
}

/// A dotted path from an object's root, with `[*]` after a list's name for each of its items.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldPath {
    segments: Vec<Segment>,
    text: Box<str>,
}

impl FieldPath {
    fn any_list(&self) -> bool {
        self.segments.iter().any(|s| s.each)
    }

    /// Its text, as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// True when the path stays inside `metadata`, which metadata-only objects keep.
    pub fn in_metadata(&self) -> bool {
        self.segments.first().is_some_and(|s| s.field == "metadata" && !s.each)
    }

    /// The field's value as the API server's field sets hold it: a string as itself, a number
    /// or a boolean as its JSON text, anything else (absent, null, an object) as empty.
    fn text(&self, object: &Value) -> String {
        let mut found = Vec::new();
        walk(&self.segments, object, &mut found, 1);
        found.pop().unwrap_or_default()
    }

    /// Every string, number or boolean the path reaches, as text, in order and without
    /// repeats; at most `limit` of them.
    pub fn values_at_most(&self, object: &Value, limit: usize) -> Vec<String> {
        let mut found = Vec::new();
        walk(&self.segments, object, &mut found, limit);
        found
    }

    /// [`FieldPath::values_at_most`] with no limit beyond the object's own size.
    pub fn values(&self, object: &Value) -> Vec<String> {
        self.values_at_most(object, usize::MAX)
    }
}

/// Keys one object is filed under at most: an object whose paths reach more is filed under
/// the first ones, so a list of thousands cannot grow an index without bound.
pub const MAX_KEYS_PER_OBJECT: usize = 64;

/// Longest value filed: longer ones (a whole document in an annotation) are no names.
pub const MAX_KEY: usize = 1024;

/// The keys an index over `paths` files `object` under: what each path reaches, in the
/// paths' order, without repeats, at most [`MAX_KEYS_PER_OBJECT`], none over [`MAX_KEY`]
/// bytes. The host's indexes, its offline cache and every SDK's test host file by this.
///
/// ```
/// use serde_json::json;
/// use wasmloop_contract::fields::{FieldPath, index_keys};
/// let paths: Vec<FieldPath> = vec!["spec.volumes[*].configMap.name".parse().unwrap()];
/// let pod = json!({"spec": {"volumes": [{"configMap": {"name": "a"}}, {"secret": {}}, {"configMap": {"name": "b"}}]}});
/// assert_eq!(index_keys(&paths, &pod), ["a", "b"]);
/// ```
pub fn index_keys(paths: &[FieldPath], object: &Value) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for path in paths {
        for value in path.values_at_most(object, MAX_KEYS_PER_OBJECT) {
            if keys.len() == MAX_KEYS_PER_OBJECT {
                return keys;
            }
            if value.len() <= MAX_KEY && !keys.contains(&value) {
                keys.push(value);
            }
        }
    }
    keys
}

fn walk(path: &[Segment], at: &Value, found: &mut Vec<String>, limit: usize) {
    if found.len() >= limit {
        return;
    }
    let Some((first, rest)) = path.split_first() else {
        let text = match at {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => return,
        };
        if !found.contains(&text) {
            found.push(text);
        }
        return;
    };
    let Some(next) = at.get(&first.field) else { return };
    if first.each {
        for item in next.as_array().into_iter().flatten() {
            walk(rest, item, found, limit);
        }
    } else {
        walk(rest, next, found, limit);
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for FieldPath {
    type Err = FieldError;

    fn from_str(text: &str) -> Result<Self, FieldError> {
        let refuse = |why: &str| {
            FieldError(format!(
                "field path {} {why}; write it as `spec.volumes[*].configMap.name`",
                quoted(&cut(text.to_owned(), 96))
            ))
        };
        if text.is_empty() || text.len() > MAX_FIELD_PATH {
            return Err(refuse(&format!("is empty or over {MAX_FIELD_PATH} bytes")));
        }
        let parts: Vec<&str> = text.split('.').collect();
        if parts.len() > MAX_FIELD_SEGMENTS {
            return Err(refuse(&format!("has over {MAX_FIELD_SEGMENTS} parts")));
        }
        let segment = |part: &str| {
            let (field, each) = match part.strip_suffix("[*]") {
                Some(field) => (field, true),
                None => (part, false),
            };
            let plain =
                !field.is_empty() && field.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
            plain.then(|| Segment { field: field.to_owned(), each })
        };
        parts
            .into_iter()
            .map(|p| {
                segment(p).ok_or_else(|| {
                    refuse(
                        "has a part that is not a field name (letters, digits, `-`, `_`), optionally followed by `[*]`",
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|segments| FieldPath { segments, text: text.into() })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_field_selector_reads_back_as_the_api_server_reads_it() {
        let text = "metadata.name=db,type!=Opaque";
        let s: FieldSelector = text.parse().unwrap();
        assert_eq!(s.to_string(), text);
        assert_eq!("metadata.name==db".parse::<FieldSelector>().unwrap().to_string(), "metadata.name=db");
    }

    #[test]
    fn an_absent_field_is_the_empty_string() {
        let unscheduled: FieldSelector = "spec.nodeName=".parse().unwrap();
        assert!(unscheduled.matches_object(&json!({"spec": {}})));
        assert!(!unscheduled.matches_object(&json!({"spec": {"nodeName": "n1"}})));
        let scheduled: FieldSelector = "spec.nodeName!=".parse().unwrap();
        assert!(scheduled.matches_object(&json!({"spec": {"nodeName": "n1"}})));
    }

    #[test]
    fn numbers_and_booleans_compare_as_their_text() {
        let s: FieldSelector = "spec.replicas=3,spec.paused=true".parse().unwrap();
        assert!(s.matches_object(&json!({"spec": {"replicas": 3, "paused": true}})));
    }

    #[test]
    fn selectors_the_api_server_would_read_otherwise_are_refused() {
        for bad in ["", "name", "a=b\\,c", "a=b=c", "spec.volumes[*].name=x", "a..b=c", "a=\u{7}"] {
            assert!(bad.parse::<FieldSelector>().is_err(), "{bad:?} parsed");
        }
        let many = vec!["a=b"; MAX_FIELD_REQUIREMENTS + 1].join(",");
        assert!(many.parse::<FieldSelector>().unwrap_err().to_string().contains("at most 16"));
    }

    #[test]
    fn only_name_and_namespace_are_immutable() {
        assert!("metadata.name=a,metadata.namespace!=b".parse::<FieldSelector>().unwrap().on_immutable_fields());
        assert!(!"status.phase=Running".parse::<FieldSelector>().unwrap().on_immutable_fields());
    }

    #[test]
    fn a_path_reaches_every_item_of_each_list_it_names() {
        let path: FieldPath = "spec.containers[*].envFrom[*].configMapRef.name".parse().unwrap();
        let pod = json!({"spec": {"containers": [
            {"envFrom": [{"configMapRef": {"name": "a"}}, {"secretRef": {"name": "s"}}]},
            {"envFrom": [{"configMapRef": {"name": "b"}}, {"configMapRef": {"name": "a"}}]},
            {}
        ]}});
        assert_eq!(path.values(&pod), vec!["a", "b"]);
        assert_eq!(path.values_at_most(&pod, 1), vec!["a"]);
    }

    #[test]
    fn a_path_that_meets_no_value_yields_none() {
        let path: FieldPath = "spec.volumes[*].configMap.name".parse().unwrap();
        assert!(path.values(&json!({"spec": {"volumes": {"not": "a list"}}})).is_empty());
        assert!(path.values(&json!({})).is_empty());
        assert!(path.values(&json!({"spec": {"volumes": [{"configMap": {"name": {"x": 1}}}]}})).is_empty());
    }

    #[test]
    fn paths_hold_field_names_only() {
        for bad in ["", ".a", "a.", "a[0]", "a[*]b", "a b", "$.a", "a/b"] {
            assert!(bad.parse::<FieldPath>().is_err(), "{bad:?} parsed");
        }
        assert!("metadata.labels".parse::<FieldPath>().unwrap().in_metadata());
        assert!(!"spec.x".parse::<FieldPath>().unwrap().in_metadata());
    }
}
