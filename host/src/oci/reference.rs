//! The grammar of a plugin reference, `oci://REGISTRY/REPO[:TAG][@sha256:DIGEST]`, and of a
//! registry an operator names.

use oci_client::Reference;
use wasmloop_contract::validate::quoted;

use super::{MAX_REFERENCE, OciError, SCHEME, cut, is_sha256};

/// A plugin reference: `oci://REGISTRY/REPO[:TAG][@sha256:DIGEST]`, the registry explicit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginRef {
    pub(super) reference: Reference,
}

impl PluginRef {
    /// Parses a reference.
    ///
    /// # Errors
    /// When it lacks the scheme or an explicit registry, or does not parse.
    pub fn parse(text: &str) -> Result<PluginRef, OciError> {
        // The text is quoted cut: it is a ConfigMap writer's, bound for a status and an Event.
        let bad = |why: &str| OciError::BadReference(quoted(text), cut(why));
        if text.len() > MAX_REFERENCE {
            return Err(bad(&format!("longer than {MAX_REFERENCE} bytes")));
        }
        let rest = text.strip_prefix(SCHEME).ok_or_else(|| bad("it must start with oci://"))?;
        // An implicit registry would be docker.io: a plugin's origin is always spelled out.
        let registry = rest.split('/').next().unwrap_or_default();
        if !rest.contains('/') || !is_registry(registry) {
            return Err(bad("name the registry, as in oci://registry.example.com/team/plugin:1.0"));
        }
        // The operator's registry names are lower case, and compared exactly.
        if registry.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(bad("write the registry in lower case"));
        }
        let reference: Reference = rest.parse().map_err(|e| bad(&format!("{e}")))?;
        if let Some(digest) = reference.digest()
            && !is_sha256(digest)
        {
            return Err(bad("the digest must be sha256: followed by 64 lower-case hex digits"));
        }
        // Written out in full (an implicit `:latest` spelled), it must still be a reference this
        // host takes: what it prints into a ConfigMap or a status parses back.
        let whole = SCHEME.len() + reference.whole().len();
        if whole > MAX_REFERENCE {
            return Err(bad(&format!("{whole} bytes written out in full, more than {MAX_REFERENCE}")));
        }
        Ok(PluginRef { reference })
    }

    /// The registry, `host[:port]`.
    pub fn registry(&self) -> &str {
        self.reference.resolve_registry()
    }

    /// The manifest digest, when the reference is pinned.
    pub fn digest(&self) -> Option<&str> {
        self.reference.digest()
    }

    /// This reference, pinned: the error when it is not.
    ///
    /// # Errors
    /// [`OciError::NotPinned`] without a digest.
    pub fn pinned(self) -> Result<PluginRef, OciError> {
        match self.digest() {
            Some(_) => Ok(self),
            None => Err(OciError::NotPinned(self.to_string())),
        }
    }

    /// The same repository at `digest`.
    pub(super) fn at(&self, digest: &str) -> PluginRef {
        let reference = Reference::with_digest(
            self.reference.registry().to_owned(),
            self.reference.repository().to_owned(),
            digest.to_owned(),
        );
        PluginRef { reference }
    }
}

impl std::fmt::Display for PluginRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{SCHEME}{}", self.reference.whole())
    }
}

/// A registry name that no reference could ever match: pulling from it would silently pull
/// nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a registry: write HOST or HOST:PORT in lower case, as in ghcr.io or 127.0.0.1:5000")]
pub struct BadRegistry(String);

/// Checks a registry the operator names (`run --allowed-registry`, `--insecure-registry`):
/// `HOST[:PORT]` as a reference spells it (a host with a dot, a port, or `localhost`; lower
/// case, as references must be), so that a value that could never match (a URL, a path, a bare
/// word) is refused at start rather than silently pulling nothing.
///
/// # Errors
/// [`BadRegistry`] when `text` is not `HOST[:PORT]`.
pub fn registry_name(text: &str) -> Result<String, BadRegistry> {
    let refuse = || BadRegistry(text.to_owned());
    // References have no bracketed IPv6 form, so such a registry could never be named.
    if !is_registry(text) || text.bytes().any(|b| b.is_ascii_uppercase() || b == b'[') {
        return Err(refuse());
    }
    // As references resolve it.
    if text == "docker.io" {
        return Ok("index.docker.io".to_owned());
    }
    let (host, port) = text.split_once(':').map_or((text, None), |(h, p)| (h, Some(p)));
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    let host_ok = !host.is_empty() && host.len() <= 253 && host.split('.').all(label_ok);
    let port_ok = port.is_none_or(|p| p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok_and(|n| n > 0));
    if host_ok && port_ok { Ok(text.to_owned()) } else { Err(refuse()) }
}

/// What a reference's first part must be to name a registry rather than a Docker Hub
/// namespace: a host with a dot, a port, or `localhost`.
fn is_registry(first: &str) -> bool {
    first.contains('.') || first.contains(':') || first == "localhost"
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_are_parsed_or_refused_with_the_reason() {
        let cases: &[(&str, Result<(&str, Option<&str>), &str>)] = &[
            ("oci://127.0.0.1:5000/team/foo:1.0", Ok(("127.0.0.1:5000", None))),
            (
                "oci://ghcr.io/team/foo@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                Ok(("ghcr.io", Some(DIGEST))),
            ),
            ("oci://localhost/foo:1", Ok(("localhost", None))),
            ("ghcr.io/team/foo:1", Err("must start with oci://")),
            ("oci://team/foo:1", Err("name the registry")),
            ("oci://foo", Err("name the registry")),
            ("oci://ghcr.io/team/foo@sha256:abc", Err("")),
            ("oci://ghcr.io/Team/foo:1", Err("")),
            ("oci://GHCR.io/team/foo:1", Err("write the registry in lower case")),
        ];
        for (text, expected) in cases {
            match (PluginRef::parse(text), expected) {
                (Ok(r), Ok((registry, digest))) => {
                    assert_eq!((r.registry(), r.digest()), (*registry, *digest), "{text}");
                    assert_eq!(r.to_string(), *text, "a reference prints as written");
                }
                (Err(e), Err(why)) => assert!(e.to_string().contains(why), "{text}: {e}"),
                (got, _) => panic!("{text}: unexpected {got:?}"),
            }
        }
    }

    #[test]
    fn an_operator_names_a_registry_as_a_reference_spells_it() {
        let cases: &[(&str, bool)] = &[
            ("ghcr.io", true),
            ("127.0.0.1:5000", true),
            ("localhost", true),
            ("my-registry.example.com:443", true),
            ("[::1]:5000", false),
            ("[::1]", false),
            ("https://ghcr.io", false),
            ("ghcr.io/", false),
            ("ghcr.io/team", false),
            ("registry", false),
            ("GHCR.io", false),
            ("ghcr.io:", false),
            ("ghcr.io:99999", false),
            ("ghcr.io:0", false),
            ("", false),
            ("-bad.io", false),
            ("a..b", false),
        ];
        for (text, accepted) in cases {
            assert_eq!(registry_name(text).is_ok(), *accepted, "{text}: {:?}", registry_name(text));
        }
        let hub = PluginRef::parse("oci://docker.io/team/foo:1").unwrap();
        assert_eq!(registry_name("docker.io").unwrap(), hub.registry(), "named as references resolve it");
    }

    #[test]
    fn an_overlong_reference_is_refused_before_it_is_parsed() {
        let text = format!("oci://ghcr.io/{}", "a".repeat(600));
        assert!(PluginRef::parse(&text).unwrap_err().to_string().contains("longer than 512 bytes"));
    }

    #[test]
    fn a_reference_is_taken_only_if_it_parses_back_written_out_in_full() {
        // 510 bytes as given; 517 with the `:latest` its printed form spells (found by fuzzing).
        let registry = format!("{}.{}.{}.{}.io", "r".repeat(63), "e".repeat(63), "g".repeat(63), "i".repeat(54));
        let text = format!("oci://{registry}/{}", "a".repeat(254));
        let error = PluginRef::parse(&text).unwrap_err().to_string();
        assert!(error.contains("517 bytes written out in full, more than 512"), "{error}");
        let fits = PluginRef::parse(&format!("oci://{registry}/{}", "a".repeat(240))).unwrap();
        assert_eq!(PluginRef::parse(&fits.to_string()).unwrap(), fits);
    }

    #[test]
    fn a_tag_is_not_a_pin() {
        let error = PluginRef::parse("oci://ghcr.io/team/foo:1").unwrap().pinned().unwrap_err();
        assert!(error.to_string().contains("`wasmloop push` prints the reference"), "{error}");
    }
}
