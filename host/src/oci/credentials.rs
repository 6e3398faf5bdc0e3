//! Registry credentials from a pull secret: a `.dockerconfigjson` (or legacy `.dockercfg`).

use oci_client::secrets::RegistryAuth;

use super::OciError;

/// The credentials a `.dockerconfigjson` (or legacy `.dockercfg`) Secret holds for `registry`:
/// `auth` (base64 `user:password`), or `username` and `password`. Only these are read; no
/// credential helper is ever run.
///
/// # Errors
/// When the document does not parse or holds nothing for the registry.
pub fn credentials(document: &[u8], registry: &str, secret: &str) -> Result<RegistryAuth, OciError> {
    use serde::Deserialize as _;
    #[derive(serde::Deserialize)]
    struct Entry {
        auth: Option<String>,
        username: Option<String>,
        password: Option<String>,
    }
    // Never serde's words: they quote the values they refuse, and these are credentials.
    let fail = |why: String| OciError::Credentials(format!("pull secret {secret}: {why}"));
    let value: serde_json::Value = serde_json::from_slice(document)
        .map_err(|e| fail(format!("not a docker config JSON (line {}, column {})", e.line(), e.column())))?;
    let auths = value.get("auths").unwrap_or(&value);
    let auths = auths.as_object().ok_or_else(|| fail("its auths are not a map of registry credentials".to_owned()))?;
    // Keys are written as users write registries: any case, with a scheme and path or not.
    let host = |key: &str| {
        let key = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
        key.split('/').next().unwrap_or_default().to_ascii_lowercase()
    };
    let entry =
        auths.iter().find(|(key, _)| host(key) == registry).map(|(_, e)| e).ok_or_else(|| {
            fail(format!("it holds no credentials for registry {registry}; add an auths entry for it"))
        })?;
    let entry: Entry = Entry::deserialize(entry).map_err(|_| {
        fail(format!("the entry for {registry} is not an object of auth, or username and password, strings"))
    })?;
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
    }
    use base64::Engine as _;
    let auth = entry.auth.as_deref().ok_or_else(|| fail(format!("the entry for {registry} has no auth")))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| fail(format!("the auth of {registry} is not base64 text")))?;
    let (user, password) =
        decoded.split_once(':').ok_or_else(|| fail(format!("the auth of {registry} is not user:password")))?;
    Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(auth: RegistryAuth) -> (String, String) {
        match auth {
            RegistryAuth::Basic(user, password) => (user, password),
            other => panic!("expected basic auth, got {other:?}"),
        }
    }

    #[test]
    fn pull_secret_credentials_are_read_for_the_registry() {
        let config = br#"{"auths": {"https://other.io/v1/": {"auth": "eDp5"},
                                     "127.0.0.1:5000": {"auth": "cGx1Z2luOnMzY3JldDp3aXRoOmNvbG9ucw=="}}}"#;
        assert_eq!(
            basic(credentials(config, "127.0.0.1:5000", "s").unwrap()),
            ("plugin".into(), "s3cret:with:colons".into())
        );
        assert_eq!(basic(credentials(config, "other.io", "s").unwrap()), ("x".into(), "y".into()));
        let plain = br#"{"auths": {"ghcr.io": {"username": "u", "password": "p"}}}"#;
        assert_eq!(basic(credentials(plain, "ghcr.io", "s").unwrap()), ("u".into(), "p".into()));
        let shouted = br#"{"auths": {"https://GHCR.io/v1/": {"auth": "dTpw"}}}"#;
        assert_eq!(basic(credentials(shouted, "ghcr.io", "s").unwrap()), ("u".into(), "p".into()));
        let legacy = br#"{"ghcr.io": {"auth": "dTpw"}}"#;
        assert_eq!(basic(credentials(legacy, "ghcr.io", "s").unwrap()), ("u".into(), "p".into()));
    }

    #[test]
    fn a_pull_secret_without_credentials_for_the_registry_says_what_to_add() {
        let cases: &[(&[u8], &str)] = &[
            (br#"{"auths": {"ghcr.io": {"auth": "dTpw"}}}"#, "holds no credentials for registry quay.io"),
            (b"not json", "not a docker config JSON"),
            (br#"{"auths": {"quay.io": {"auth": "!!"}}}"#, "not base64 text"),
            (br#"{"auths": {"quay.io": {"auth": "bm9jb2xvbg=="}}}"#, "not user:password"),
            (br#"{"auths": {"quay.io": {}}}"#, "has no auth"),
        ];
        for (document, needle) in cases {
            let error = credentials(document, "quay.io", "ns/secret").unwrap_err().to_string();
            assert!(error.starts_with("pull secret ns/secret: ") && error.contains(needle), "{error}");
        }
    }

    #[test]
    fn a_pull_secret_s_values_never_reach_its_errors() {
        let secret = "c3VwZXItc2VjcmV0LXRva2Vu";
        let documents = [
            format!(r#"{{"auths": {{"quay.io": "{secret}"}}}}"#),
            format!(r#"{{"auths": {{"quay.io": {{"auth": 7, "password": "{secret}"}}}}}}"#),
            format!(r#"{{"auths": {{"other.io": "{secret}", "quay.io": {{"auth": "dTpw"}}}}}}"#),
            format!(r#"{{"auths": "{secret}"}}"#),
            format!(r#"{{"auths": {{"quay.io": {{"auth": "{secret}"#),
        ];
        for document in &documents {
            match credentials(document.as_bytes(), "quay.io", "ns/s") {
                Err(error) => assert!(!error.to_string().contains(secret), "{error}"),
                Ok(_) => assert!(document.contains("other.io"), "only the entry for the registry is read: {document}"),
            }
        }
    }
}
