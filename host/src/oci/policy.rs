//! How the host reaches registries: which it may pull from, and its HTTP clients.

use std::time::Duration;

use oci_client::Client;
use oci_client::client::{ClientConfig, ClientProtocol};

use super::{OciError, PluginRef};

/// How the host reaches registries.
#[derive(Debug, Clone, Default)]
pub struct RegistryPolicy {
    /// Registries (`host[:port]`) spoken to over plain HTTP.
    pub plain_http: Vec<String>,
    /// The only registries plugins may come from (with `plain_http`'s); `*` allows any. None:
    /// no pulls, since a reference in a ConfigMap would otherwise make the host connect
    /// wherever its writer likes.
    pub allowed: Vec<String>,
}

/// Installs the process's one TLS provider, ring, as kube's rustls uses: the registry client
/// (reqwest, built without a provider) takes the process default. Idempotent.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// How much longer than a pull's deadline its HTTP clients wait, so that the deadline, which
/// says what the pull was waiting for, is always what ends a pull that runs out of time.
const CLIENT_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);

impl RegistryPolicy {
    pub(super) fn client(&self, timeout: Duration) -> Client {
        install_tls_provider();
        let timeout = timeout + CLIENT_TIMEOUT_MARGIN;
        Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(self.plain_http.clone()),
            connect_timeout: Some(timeout),
            read_timeout: Some(timeout),
            ..ClientConfig::default()
        })
    }

    /// Reads manifests: redirects are followed only a few times, and never from HTTPS to
    /// plain HTTP.
    pub(super) fn http(&self, timeout: Duration) -> reqwest::Client {
        install_tls_provider();
        let timeout = timeout + CLIENT_TIMEOUT_MARGIN;
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let downgrade = attempt.previous().first().is_some_and(|first| first.scheme() == "https")
                && attempt.url().scheme() != "https";
            if downgrade || attempt.previous().len() > 3 { attempt.stop() } else { attempt.follow() }
        });
        reqwest::Client::builder()
            .connect_timeout(timeout)
            .read_timeout(timeout)
            .redirect(redirects)
            .user_agent(concat!("wasmloop/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("a client with a TLS provider installed builds")
    }

    pub(super) fn scheme_for(&self, registry: &str) -> &'static str {
        if self.plain_http.iter().any(|r| r == registry) { "http" } else { "https" }
    }

    pub(super) fn check(&self, reference: &PluginRef) -> Result<(), OciError> {
        let registry = reference.registry();
        let named = self.allowed.iter().chain(&self.plain_http);
        if self.allowed.iter().any(|r| r == "*") || named.clone().any(|r| r == registry) {
            return Ok(());
        }
        let named: Vec<&str> = named.map(String::as_str).collect();
        if named.is_empty() {
            Err(OciError::NoRegistryAllowed(registry.to_owned()))
        } else {
            Err(OciError::Disallowed(registry.to_owned(), named.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::{MAX_REGISTRY_MESSAGE, registry_error};

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_registry_outside_the_allowed_list_is_refused_naming_the_list() {
        let policy = RegistryPolicy { allowed: vec!["ghcr.io".into()], plain_http: vec!["127.0.0.1:5000".into()] };
        let other = PluginRef::parse("oci://evil.example.com/foo:1").unwrap();
        let refused = policy.check(&other).unwrap_err().to_string();
        assert!(refused.contains("push the plugin to one of: ghcr.io, 127.0.0.1:5000"), "{refused}");
        assert!(policy.check(&PluginRef::parse("oci://ghcr.io/foo:1").unwrap()).is_ok());
        assert!(
            policy.check(&PluginRef::parse("oci://127.0.0.1:5000/foo:1").unwrap()).is_ok(),
            "a registry the operator lists as insecure is one they chose"
        );
    }

    #[test]
    fn a_registry_s_long_error_body_is_cut_before_it_reaches_a_status() {
        let reference = PluginRef::parse(&format!("oci://registry.example.com/p@{DIGEST}")).unwrap();
        let error = registry_error(&reference, "é".repeat(100_000)).to_string();
        assert!(error.len() < MAX_REGISTRY_MESSAGE + 64, "{} bytes", error.len());
        assert!(error.ends_with('…'), "{error}");
    }

    #[test]
    fn no_registry_is_allowed_until_the_operator_names_one() {
        let reference = PluginRef::parse("oci://169.254.169.254/latest:1").unwrap();
        let refused = RegistryPolicy::default().check(&reference).unwrap_err().to_string();
        assert!(refused.contains("--allowed-registry 169.254.169.254"), "{refused}");
        let any = RegistryPolicy { allowed: vec!["*".into()], ..RegistryPolicy::default() };
        assert!(any.check(&reference).is_ok());
    }
}
