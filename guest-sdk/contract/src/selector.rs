//! Kubernetes label selectors in their string form: `app=web,tier!=cache,env in (a,b),!legacy`.
//!
//! ```
//! use wasmloop_contract::selector::Selector;
//! let s: Selector = "app=web,env in (prod,staging),!legacy".parse().unwrap();
//! let labels = [("app", "web"), ("env", "prod")];
//! assert!(s.matches(|k| labels.iter().find(|(l, _)| *l == k).map(|(_, v)| *v)));
//! ```

use std::fmt;
use std::str::FromStr;

use crate::validate::{
    MAX_LABEL, MAX_QUOTED, MAX_SELECTOR_REQUIREMENTS, MAX_SELECTOR_VALUES, cut, is_label_key, is_label_value, quoted,
};

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value` (also true when the key is absent).
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)` (also true when the key is absent).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

/// A parsed label selector: all requirements must hold. The empty selector matches
/// everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(pub Vec<Requirement>);

/// The selector in its string form: `app=web,env in (a,b),!legacy`. A selector the API server
/// accepts ([`for_server`]) parses back to itself; one only the lenient cache
/// filter accepts (a value holding `=` or a space) may not, which is why only a
/// [`crate::names::LabelSelector`]'s text keys or makes a watch.
///
/// ```
/// use wasmloop_contract::selector::Selector;
/// let text = "app=web,tier!=cache,env in (a,b),env notin (c),legacy,!beta";
/// let s: Selector = text.parse().unwrap();
/// assert_eq!(s.to_string(), text);
/// assert_eq!(s.to_string().parse::<Selector>().unwrap(), s);
/// ```
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match requirement {
                Requirement::Equals(k, v) => write!(f, "{k}={v}")?,
                Requirement::NotEquals(k, v) => write!(f, "{k}!={v}")?,
                Requirement::In(k, vs) => write!(f, "{k} in ({})", vs.join(","))?,
                Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", vs.join(","))?,
                Requirement::Exists(k) => write!(f, "{k}")?,
                Requirement::DoesNotExist(k) => write!(f, "!{k}")?,
            }
        }
        Ok(())
    }
}

/// A selector string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorError {
    /// The selector as given.
    pub selector: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid label selector {}: {}; use the Kubernetes form `key=value,key!=value,key in (a,b),!key`",
            quoted(&self.selector),
            cut(self.reason.clone(), MAX_QUOTED * 2)
        )
    }
}

impl std::error::Error for SelectorError {}

impl Selector {
    /// True when every requirement holds for the labels that `label` looks up.
    pub fn matches<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::DoesNotExist(k) => label(k).is_none(),
        })
    }

    /// True when every requirement holds for the `metadata.labels` of a JSON object.
    pub fn matches_object(&self, object: &serde_json::Value) -> bool {
        let labels = object.pointer("/metadata/labels").and_then(|l| l.as_object());
        self.matches(|k| labels.and_then(|l| l.get(k)).and_then(|v| v.as_str()))
    }
}

fn split_top_level(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn parse_set(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()).collect())
}

fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    let part = part.trim();
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        return if valid_key(key) {
            Ok(Requirement::DoesNotExist(key.into()))
        } else {
            Err(format!("bad key in {part:?}"))
        };
    }
    for (op, build) in [
        ("!=", Requirement::NotEquals as fn(String, String) -> Requirement),
        ("==", Requirement::Equals),
        ("=", Requirement::Equals),
    ] {
        if let Some((key, value)) = part.split_once(op) {
            let (key, value) = (key.trim(), value.trim());
            if !valid_key(key) {
                return Err(format!("bad key in {part:?}"));
            }
            return Ok(build(key.into(), value.into()));
        }
    }
    let mut words = part.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default();
    if !valid_key(key) {
        return Err(format!("bad key in {part:?}"));
    }
    let Some(rest) = words.next().map(str::trim) else {
        return Ok(Requirement::Exists(key.into()));
    };
    let (op, set) = if let Some(set) = rest.strip_prefix("notin") {
        ("notin", set)
    } else if let Some(set) = rest.strip_prefix("in") {
        ("in", set)
    } else {
        return Err(format!("unknown operator in {part:?}"));
    };
    let values = parse_set(set).ok_or_else(|| format!("expected a (value,...) set in {part:?}"))?;
    Ok(if op == "in" { Requirement::In(key.into(), values) } else { Requirement::NotIn(key.into(), values) })
}

impl FromStr for Selector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() {
            return Ok(Selector::default());
        }
        split_top_level(s)
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<_, _>>()
            .map(Selector)
            .map_err(|reason| SelectorError { selector: s.into(), reason })
    }
}

/// Checks a label selector the host sends to the API server (a watch's `labelSelector`):
/// every key and value as Kubernetes holds labels, `in` and `notin` with at least one value,
/// and bounded in size. A selector that only filters the host's cache needs no such check.
///
/// # Errors
/// A sentence naming the first key or value that breaks a rule.
pub fn for_server(selector: &Selector) -> Result<(), String> {
    if selector.0.len() > MAX_SELECTOR_REQUIREMENTS {
        return Err(format!(
            "label selector {} has {} requirements, over the limit of {MAX_SELECTOR_REQUIREMENTS}",
            cut(selector.to_string(), MAX_QUOTED),
            selector.0.len()
        ));
    }
    for requirement in &selector.0 {
        let (key, values): (&str, &[String]) = match requirement {
            Requirement::Equals(k, v) | Requirement::NotEquals(k, v) => (k.as_str(), std::slice::from_ref(v)),
            Requirement::In(k, vs) | Requirement::NotIn(k, vs) => {
                if vs.is_empty() || vs.len() > MAX_SELECTOR_VALUES {
                    return Err(format!(
                        "label selector {}: the set of {} holds {} values; give 1 to {MAX_SELECTOR_VALUES}",
                        cut(selector.to_string(), MAX_QUOTED),
                        quoted(k),
                        vs.len()
                    ));
                }
                (k.as_str(), vs.as_slice())
            }
            Requirement::Exists(k) | Requirement::DoesNotExist(k) => (k.as_str(), &[]),
        };
        if !is_label_key(key) {
            return Err(format!(
                "label selector {}: {} is not a label key (an optional DNS subdomain and '/', then 1-{MAX_LABEL} characters of a-z, A-Z, 0-9, '-', '_' and '.', starting and ending alphanumeric)",
                cut(selector.to_string(), MAX_QUOTED),
                quoted(key)
            ));
        }
        if let Some(v) = values.iter().find(|v| !is_label_value(v)) {
            return Err(format!(
                "label selector {}: {} is not a label value (0-{MAX_LABEL} characters of a-z, A-Z, 0-9, '-', '_' and '.', starting and ending alphanumeric)",
                cut(selector.to_string(), MAX_QUOTED),
                quoted(v)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
        move |k| pairs.iter().find(|(l, _)| *l == k).map(|(_, v)| *v)
    }

    #[test]
    fn equality_and_inequality_requirements_match() {
        let s: Selector = "app=web,tier!=cache".parse().unwrap();
        assert!(s.matches(labels(&[("app", "web")])));
        assert!(!s.matches(labels(&[("app", "web"), ("tier", "cache")])));
        assert!(!s.matches(labels(&[("app", "db")])));
    }

    #[test]
    fn set_requirements_match() {
        let s: Selector = "env in (prod, staging),zone notin (a)".parse().unwrap();
        assert!(s.matches(labels(&[("env", "prod")])));
        assert!(!s.matches(labels(&[("env", "dev")])));
        assert!(!s.matches(labels(&[("env", "prod"), ("zone", "a")])));
    }

    #[test]
    fn existence_requirements_match() {
        let s: Selector = "managed,!legacy".parse().unwrap();
        assert!(s.matches(labels(&[("managed", "")])));
        assert!(!s.matches(labels(&[("managed", ""), ("legacy", "1")])));
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert!("".parse::<Selector>().unwrap().matches(labels(&[])));
    }

    #[test]
    fn malformed_selector_is_rejected_with_the_selector_named() {
        let err = "app in prod".parse::<Selector>().unwrap_err();
        assert!(err.to_string().contains("\"app in prod\""), "{err}");
        assert!("a b (c)".parse::<Selector>().is_err());
    }

    #[test]
    fn selectors_sent_to_the_api_server_are_checked_whole() {
        let check = |s: &str| for_server(&s.parse().unwrap());
        for ok in ["", "app=web", "app.kubernetes.io/name in (a,b),!legacy,tier!=x", "x notin (a)"] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        let many = (0..33).map(|i| format!("k{i}")).collect::<Vec<_>>().join(",");
        let wide = format!("k in ({})", (0..65).map(|i| format!("v{i}")).collect::<Vec<_>>().join(","));
        for (bad, names) in [
            ("app=we b", "\"we b\""),
            ("app=a&b=c", "\"a&b=c\""),
            ("-app=1", "is not a label key"),
            ("k in ()", "holds 0 values"),
            (many.as_str(), "33 requirements"),
            (wide.as_str(), "holds 65 values"),
        ] {
            let error = check(bad).expect_err(bad);
            assert!(error.contains(names), "{bad}: {error}");
        }
    }
}
