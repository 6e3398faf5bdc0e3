//! What a plugin hands the host, checked the way the API server would check it, before any of
//! it reaches a URL, a header or a cache look-up.
//!
//! kube-rs puts names and namespaces into request paths as they are, so a namespace such as
//! `a/secrets/b?x=` would address another resource. Everything that names an object is
//! therefore held to Kubernetes' own rules here (apimachinery's `validation` package):
//! namespaces are DNS-1123 labels, groups DNS-1123 subdomains, versions DNS-1035 labels, kinds
//! alphanumeric identifiers. Object names are held to the API server's rule for names that go
//! into a path (`IsValidPathSegmentName`), narrowed to the characters Kubernetes names use.

/// Longest namespace (a DNS-1123 label).
pub const MAX_NAMESPACE: usize = 63;
/// Longest object name (a DNS-1123 subdomain).
pub const MAX_NAME: usize = 253;
/// Longest kind name.
pub const MAX_KIND: usize = 63;
/// Longest UID precondition.
pub const MAX_UID: usize = 128;
/// Longest Event reason and action, as the events.k8s.io API allows.
pub const MAX_EVENT_REASON: usize = 128;
/// Longest Event note the events.k8s.io API accepts, in bytes; longer messages are cut.
pub const MAX_EVENT_NOTE: usize = 1024;

fn dns_label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A DNS-1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && dns_label_chars(s)
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(dns_label_chars)
}

/// A DNS-1035 label: a DNS-1123 label that starts with a letter.
pub fn is_dns1035_label(s: &str) -> bool {
    is_dns1123_label(s) && s.as_bytes()[0].is_ascii_lowercase()
}

/// Checks a namespace.
///
/// # Errors
/// A sentence naming the value and the rule.
pub fn namespace(ns: &str) -> Result<(), String> {
    if is_dns1123_label(ns) {
        Ok(())
    } else {
        Err(format!(
            "namespace {} is not a valid namespace (1-{MAX_NAMESPACE} characters of a-z, 0-9 and '-', starting and ending alphanumeric)",
            quoted(ns)
        ))
    }
}

/// Checks an object name. Kubernetes names are DNS-1123 subdomains for most kinds; a few
/// kinds (RBAC roles, for one) also allow `:` and upper case, so those are accepted, but
/// nothing that could change a request path or query: no `/`, `%`, `?`, `#`, whitespace, and
/// not `.` or `..`.
///
/// # Errors
/// A sentence naming the value and the rule.
pub fn name(name: &str) -> Result<(), String> {
    let chars_ok = name.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b':'));
    if !name.is_empty() && name.len() <= MAX_NAME && chars_ok && name != "." && name != ".." {
        Ok(())
    } else {
        Err(format!(
            "name {} is not a valid object name (1-{MAX_NAME} characters of a-z, A-Z, 0-9, '-', '.', '_' and ':', not \".\" or \"..\")",
            quoted(name)
        ))
    }
}

/// Checks a kind name: an alphanumeric identifier starting with a letter (`Deployment`).
///
/// # Errors
/// A sentence naming the value and the rule.
pub fn kind(kind: &str) -> Result<(), String> {
    let ok = kind.len() <= MAX_KIND
        && kind.bytes().next().is_some_and(|c| c.is_ascii_alphabetic())
        && kind.bytes().all(|c| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "kind {} is not a valid kind (1-{MAX_KIND} letters and digits, starting with a letter)",
            quoted(kind)
        ))
    }
}

/// Checks a group (empty for the core group) and a version.
///
/// # Errors
/// A sentence naming the value and the rule.
pub fn group_version(group: &str, version: &str) -> Result<(), String> {
    if !group.is_empty() && !is_dns1123_subdomain(group) {
        return Err(format!(
            "group {} is not a valid API group (a DNS-1123 subdomain such as apps or example.com)",
            quoted(group)
        ));
    }
    if !is_dns1035_label(version) {
        return Err(format!("version {} is not a valid API version (such as v1 or v1beta2)", quoted(version)));
    }
    Ok(())
}

/// Checks an `apiVersion`: `version` for the core group, or `group/version`.
///
/// # Errors
/// A sentence naming the value and the rule.
pub fn api_version(api_version: &str) -> Result<(), String> {
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) if !group.is_empty() => (group, version),
        Some(_) => return Err(format!("apiVersion {} has an empty group", quoted(api_version))),
        None => ("", api_version),
    };
    group_version(group, version).map_err(|e| format!("apiVersion {} is invalid: {e}", quoted(api_version)))
}

/// Checks a UID precondition: a UUID as the API server writes them, or close to one.
///
/// # Errors
/// A sentence naming the value and the rule.
pub fn uid(uid: &str) -> Result<(), String> {
    if !uid.is_empty() && uid.len() <= MAX_UID && uid.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-') {
        Ok(())
    } else {
        Err(format!("uid {} is not a valid UID (1-{MAX_UID} letters, digits and '-')", quoted(uid)))
    }
}

/// Longest label value, and the name part of a label key.
pub const MAX_LABEL: usize = 63;
/// Most requirements one selector sent to the API server may hold.
pub const MAX_SELECTOR_REQUIREMENTS: usize = 32;
/// Most values one `in` or `notin` set sent to the API server may hold.
pub const MAX_SELECTOR_VALUES: usize = 64;

/// A label value: empty, or at most 63 characters of alphanumerics, `-`, `_` and `.`,
/// starting and ending alphanumeric (apimachinery's `IsValidLabelValue`).
pub fn is_label_value(value: &str) -> bool {
    let b = value.as_bytes();
    b.is_empty()
        || (b.len() <= MAX_LABEL
            && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric())
}

/// A label key: a name as [`is_label_value`] but not empty, optionally behind a DNS-1123
/// subdomain prefix and `/` (apimachinery's `IsQualifiedName`).
pub fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    prefix.is_none_or(is_dns1123_subdomain) && !name.is_empty() && is_label_value(name)
}

/// Checks an Event reason or action: short, one word of letters, digits and `_`.
///
/// # Errors
/// A sentence naming the field and the rule.
pub fn event_word(field: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("the event {field} is empty; give a CamelCase word such as Synced"));
    }
    if value.len() > MAX_EVENT_REASON {
        return Err(format!(
            "the event {field} is {} bytes, over the limit of {MAX_EVENT_REASON}; use a short CamelCase word",
            value.len()
        ));
    }
    if !value.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return Err(format!("the event {field} {} must be a CamelCase word of letters and digits", quoted(value)));
    }
    Ok(())
}

/// Longest part of a rejected value quoted in a message: enough to recognise it, never the
/// whole of what a hostile plugin or ConfigMap sent.
pub const MAX_QUOTED: usize = 96;

/// Longest text from outside (a plugin's error, a trap's panic text, a registry's or an API
/// server's answer quoted in an error) the host keeps, logs or sends: the Event note's limit,
/// so a cut text fits every sink it goes to.
pub const MAX_FOREIGN_TEXT: usize = MAX_EVENT_NOTE;

/// `value` as a message quotes it: cut to [`MAX_QUOTED`] bytes, then in Rust's debug form.
///
/// ```
/// let quoted = wasmloop_contract::validate::quoted(&"a".repeat(1000));
/// assert!(quoted.len() <= wasmloop_contract::validate::MAX_QUOTED + 2);
/// ```
pub fn quoted(value: &str) -> String {
    let debug = format!("{:?}", cut(value.to_owned(), MAX_QUOTED));
    // Escapes (`\u{1b}`) can make the quoted form longer than what was cut: cut it again.
    match debug.len() <= MAX_QUOTED + 2 {
        true => debug,
        false => format!("{}\"", cut(debug, MAX_QUOTED + 1)),
    }
}

/// Text from outside, cut to [`MAX_FOREIGN_TEXT`] before it is kept, logged or sent: the one
/// cut every plugin-, ConfigMap- or registry-controlled text passes.
pub fn foreign(text: impl Into<String>) -> String {
    cut(text.into(), MAX_FOREIGN_TEXT)
}

/// Checks a field manager: `wasmloop/` and a plugin name.
///
/// # Errors
/// A sentence naming the value and the form.
pub fn field_manager(manager: &str) -> Result<(), String> {
    match manager.strip_prefix("wasmloop/") {
        Some(name) if plugin_name(name).is_ok() => Ok(()),
        _ => Err(format!("field manager {} must be wasmloop/ and a plugin name", quoted(manager))),
    }
}

/// Longest plugin name.
pub const MAX_PLUGIN_NAME: usize = 63;

/// Checks a plugin's name: lower-case letters, digits and `-`, as it becomes part of a field manager, a metric
/// label and object names.
///
/// # Errors
/// A sentence naming the value and the rule.
pub fn plugin_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_PLUGIN_NAME
        && name.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!("name {} must be 1-{MAX_PLUGIN_NAME} characters of a-z, 0-9 and '-'", quoted(name)))
    }
}

/// Cuts an Event message to what the API accepts, at a character boundary, marking the cut.
pub fn event_note(message: String) -> String {
    cut(message, MAX_EVENT_NOTE)
}

/// `text` cut to at most `limit` bytes (`limit` of at least 3), at a character boundary, with
/// `…` marking the cut: for words of others (a registry, a manifest, a plugin) on their way to
/// a status, an Event or a log line.
///
/// ```
/// assert_eq!(wasmloop_contract::validate::cut("éééé".to_owned(), 6), "é…");
/// ```
pub fn cut(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    const MARK: &str = "…";
    text.truncate(text.floor_char_boundary(limit.saturating_sub(MARK.len())));
    text.push_str(MARK);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_dns1123_labels() {
        for ok in ["default", "kube-system", "a", "a1", &"a".repeat(63)] {
            assert!(namespace(ok).is_ok(), "{ok}");
        }
        for bad in
            ["", "Default", "-a", "a-", "a.b", "tenant-a/secrets/victim?x=", "a b", &"a".repeat(64), "..", "a%2F"]
        {
            assert!(namespace(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_cannot_change_a_request_path() {
        for ok in ["web", "web-1.example", "system:controller:x", "Upper_case", &"a".repeat(253)] {
            assert!(name(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "../x", "a/b", "a%2Fb", "a?b", "a#b", "a b", "a\nb", &"a".repeat(254)] {
            assert!(name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn kinds_are_alphanumeric_identifiers() {
        for ok in ["Deployment", "Foo", "V1Thing"] {
            assert!(kind(ok).is_ok(), "{ok}");
        }
        for bad in ["", "1Foo", "Foo/Bar", "Foo Bar", "Foo-Bar", &"A".repeat(64)] {
            assert!(kind(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn api_versions_are_a_version_or_a_group_and_a_version() {
        for ok in ["v1", "apps/v1", "samplecontroller.k8s.io/v1alpha1", "events.k8s.io/v1"] {
            assert!(api_version(ok).is_ok(), "{ok}");
        }
        for bad in ["", "/v1", "apps/", "v1/../../apis", "apps/v1/x", "Apps/v1", "apps/1v", "apps/v1?x", "a..b/v1"] {
            assert!(api_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn uids_are_letters_digits_and_dashes() {
        assert!(uid("4d5e6f70-8192-4a3b-b5c6-d7e8f90a1b23").is_ok());
        for bad in ["", "a/b", "a b", &"a".repeat(129)] {
            assert!(uid(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn event_reasons_are_short_words() {
        assert!(event_word("reason", "SuccessfulCreate").is_ok());
        assert!(event_word("reason", "").is_err());
        assert!(event_word("reason", &"R".repeat(129)).is_err());
        assert!(event_word("reason", "Two words").is_err());
        assert!(event_word("reason", "Bad\nHeader").is_err());
    }

    #[test]
    fn label_keys_and_values_are_held_to_the_api_servers_rules() {
        for ok in ["app", "app.kubernetes.io/name", "A_b.c-1", &"a".repeat(63), "example.com/x"] {
            assert!(is_label_key(ok), "{ok}");
        }
        for bad in ["", "/app", "a/", "-a", "a-", "Ex.com/a", "a b", "a&b", "a/b/c", &"a".repeat(64)] {
            assert!(!is_label_key(bad), "{bad:?}");
        }
        for ok in ["", "web", "v1.2_b-c", &"a".repeat(63)] {
            assert!(is_label_value(ok), "{ok}");
        }
        for bad in ["-web", "web.", "a b", "a&x=y", "é", &"a".repeat(64)] {
            assert!(!is_label_value(bad), "{bad:?}");
        }
    }

    #[test]
    fn rejected_values_are_quoted_cut_however_long_or_escaped() {
        assert_eq!(quoted("ns"), "\"ns\"");
        for hostile in ["a".repeat(1 << 20), "\u{1b}".repeat(10_000), "é".repeat(500)] {
            let q = quoted(&hostile);
            assert!(q.len() <= MAX_QUOTED + 2 && q.starts_with('"') && q.ends_with('"'), "{} bytes: {q}", q.len());
        }
        let error = namespace(&"x/".repeat(1 << 20)).unwrap_err();
        assert!(error.len() < 300, "{} bytes", error.len());
    }

    #[test]
    fn foreign_text_is_cut_to_one_limit() {
        assert_eq!(foreign("short"), "short");
        let long = foreign("e".repeat(4 << 20));
        assert!(long.len() <= MAX_FOREIGN_TEXT && long.ends_with('…'));
    }

    #[test]
    fn long_event_notes_are_cut_at_a_character_boundary() {
        assert_eq!(event_note("short".into()), "short");
        let cut = event_note("é".repeat(1000));
        assert!(cut.len() <= MAX_EVENT_NOTE && cut.ends_with('…'), "{}", cut.len());
    }

    #[test]
    fn text_is_cut_to_its_limit_between_characters_and_marked() {
        let cases: &[(&str, usize, &str)] = &[
            ("short", 5, "short"),
            ("longer", 5, "lo…"),
            ("éééé", 7, "éé…"),
            ("éééé", 6, "é…"),
            ("abc", 3, "abc"),
            ("abcd", 3, "…"),
        ];
        for (text, limit, expected) in cases {
            let got = cut((*text).to_owned(), *limit);
            assert_eq!(got, *expected, "{text} to {limit}");
            assert!(got.len() <= *limit, "{text} to {limit}: {} bytes", got.len());
        }
    }
}
