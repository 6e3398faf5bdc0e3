//! Annotation filters: an object is selected when it carries an annotation, or carries it with
//! one value. The API server cannot select by annotation, so every cache applies them itself as
//! objects arrive ([`crate::cache::Selection`]).
//!
//! ```
//! use serde_json::json;
//! use wasmloop_contract::annotations::AnnotationMatch;
//! let ttl = AnnotationMatch::present("janitor/ttl").unwrap();
//! assert!(ttl.matches_object(&json!({"metadata": {"annotations": {"janitor/ttl": "1h"}}})));
//! let opted = AnnotationMatch::equal("roll/on-change", "true").unwrap();
//! assert!(!opted.matches_object(&json!({"metadata": {"annotations": {"roll/on-change": "false"}}})));
//! ```

use std::fmt;

use serde_json::Value;

use crate::validate::{is_label_key, quoted};

/// Longest annotation value a filter may ask for.
pub const MAX_ANNOTATION_VALUE: usize = 1024;
/// Most annotation filters one selector holds.
pub const MAX_ANNOTATION_MATCHES: usize = 16;

/// One annotation filter.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AnnotationMatch {
    key: String,
    value: Option<String>,
}

impl AnnotationMatch {
    /// The annotation `key` is present, whatever its value.
    ///
    /// # Errors
    /// When `key` is not a qualified name (`example.com/name`), as the API server requires.
    pub fn present(key: &str) -> Result<AnnotationMatch, String> {
        AnnotationMatch::new(key, None)
    }

    /// The annotation `key` is present with exactly `value`.
    ///
    /// # Errors
    /// As [`AnnotationMatch::present`], or when `value` is over [`MAX_ANNOTATION_VALUE`] bytes.
    pub fn equal(key: &str, value: &str) -> Result<AnnotationMatch, String> {
        AnnotationMatch::new(key, Some(value))
    }

    /// Either, as the contract's `annotation-match` carries it.
    ///
    /// # Errors
    /// As [`AnnotationMatch::equal`].
    pub fn new(key: &str, value: Option<&str>) -> Result<AnnotationMatch, String> {
        if !is_label_key(key) {
            return Err(format!(
                "annotation filter key {} is not a qualified name; write it as `example.com/name` or `name`",
                quoted(key)
            ));
        }
        if let Some(v) = value
            && (v.len() > MAX_ANNOTATION_VALUE || v.chars().any(char::is_control))
        {
            return Err(format!(
                "annotation filter value for {key} is over {MAX_ANNOTATION_VALUE} bytes or holds control characters; match on presence instead"
            ));
        }
        Ok(AnnotationMatch { key: key.to_owned(), value: value.map(str::to_owned) })
    }

    /// The annotation's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The value asked for; none for presence.
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// True when `annotation(key)` answers what this filter asks.
    pub fn matches<'a>(&self, annotation: impl Fn(&str) -> Option<&'a str>) -> bool {
        match (annotation(&self.key), &self.value) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(found), Some(wanted)) => found == wanted,
        }
    }

    /// True when the JSON object's `metadata.annotations` answers what this filter asks.
    pub fn matches_object(&self, object: &Value) -> bool {
        let annotations = object.pointer("/metadata/annotations");
        self.matches(|k| annotations.and_then(|a| a.get(k)).and_then(Value::as_str))
    }
}

impl fmt::Display for AnnotationMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            None => f.write_str(&self.key),
            Some(v) => write!(f, "{}={}", self.key, quoted(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn presence_matches_any_value_even_empty() {
        let m = AnnotationMatch::present("a.io/x").unwrap();
        assert!(m.matches_object(&json!({"metadata": {"annotations": {"a.io/x": ""}}})));
        assert!(!m.matches_object(&json!({"metadata": {"annotations": {"a.io/y": "1"}}})));
        assert!(!m.matches_object(&json!({"metadata": {}})));
    }

    #[test]
    fn a_value_must_be_equal() {
        let m = AnnotationMatch::equal("x", "1").unwrap();
        assert!(m.matches_object(&json!({"metadata": {"annotations": {"x": "1"}}})));
        assert!(!m.matches_object(&json!({"metadata": {"annotations": {"x": "10"}}})));
    }

    #[test]
    fn keys_are_qualified_names() {
        assert!(AnnotationMatch::present("").is_err());
        assert!(AnnotationMatch::present("a b").is_err());
        assert!(AnnotationMatch::present("-x/y").is_err());
        assert!(AnnotationMatch::equal("x", &"v".repeat(MAX_ANNOTATION_VALUE + 1)).is_err());
    }
}
