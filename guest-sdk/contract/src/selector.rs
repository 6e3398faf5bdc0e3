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
/// accepts (`validate::selector_for_server`) parses back to itself; one only the lenient cache
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
            crate::validate::quoted(&self.selector),
            crate::validate::cut(self.reason.clone(), crate::validate::MAX_QUOTED * 2)
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
}
