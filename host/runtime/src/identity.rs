//! Who a plugin acts as, and whether Kubernetes lets it read what the host would serve it.
//!
//! Every request the host makes on a plugin's behalf (apply, status, patch, delete, finalizers
//! and the plugin's own Events) impersonates the plugin's ServiceAccount, so Kubernetes RBAC,
//! not the host, decides what each plugin may write. Only the user is impersonated: for a
//! `system:serviceaccount:NS:NAME` user the API server adds the ServiceAccount's groups itself,
//! so the host needs `impersonate` on `serviceaccounts` and nothing on `groups`.
//!
//! Reads are different: informers are shared and run as the host, one watch per kind. Before a
//! plugin is served a kind from the cache, a SubjectAccessReview asks whether its identity may
//! `list` and `watch` that kind in that scope; the answer is asked again every
//! [`Identities::review_interval`], so a revoked grant ends the plugin's access within it.
//!
//! [`Identities`] is built once at the binary's edge (`--plugin-identity`) and lives in the
//! `Context`. A source names the account ([`AccountChoice`]: a ConfigMap's annotation or a
//! `WasmPlugin`'s `spec.serviceAccountName`, else the one named like the plugin in its
//! namespace; `host.yaml` for files, which a ConfigMap can never claim), and the registry
//! resolves it when it installs a version ([`Identities::identity_for`]). Before anything is
//! served, the account must exist, carry its administrator's opt-in annotation and not be
//! the host's own ([`Identities::ensure_usable`]; the pure [`usable`] decides). While a
//! plugin runs, `controller/access.rs` asks the reviews again; three unanswered in a row count
//! as a refusal. While access is revoked, its cache view serves nothing, workers drop its work,
//! and the answer of a reconcile already running is dropped; granted again, every primary is
//! requeued. The threat model is `docs/security.md`.
//!
//! ```no_run
//! # async fn demo(client: kube::Client, config: kube::Config) -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use wasmloop_runtime::identity::{Identities, ServiceAccount};
//! let identities = Identities::impersonating(client, config, Duration::from_secs(60));
//! let account: ServiceAccount = "wasmloop-system/pod-logger".parse()?;
//! let client = identities.client(&account)?; // every request carries Impersonate-User
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::ServiceAccount as ServiceAccountObject;
use kube::Client;
use kube::api::{Api, ApiResource, PostParams};
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_sandbox::validate;

/// The annotation of a plugin ConfigMap that names the plugin's ServiceAccount, in the
/// ConfigMap's namespace.
pub const SERVICE_ACCOUNT_ANNOTATION: &str = "wasmloop.dev/service-account";

/// The annotation, set to `"true"` by whoever administers a ServiceAccount, that lets plugins
/// act as it. Plugin authors and ConfigMap writers pick their account by name; without this
/// opt-in they could pick any account of the namespace, such as the host's own or one made for
/// a workload with wider rights.
pub const OPT_IN_ANNOTATION: &str = "wasmloop.dev/plugin-identity";

/// A ServiceAccount a plugin acts as.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServiceAccount {
    /// Its namespace.
    pub namespace: Namespace,
    /// Its name.
    pub name: Name,
}

/// A ServiceAccount reference that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidServiceAccount(String);

impl ServiceAccount {
    /// A ServiceAccount `name` in `namespace`, both checked as the API server would.
    ///
    /// # Errors
    /// When either is not a valid name; the message says which and why.
    pub fn new(namespace: &str, name: &str) -> Result<ServiceAccount, InvalidServiceAccount> {
        let namespace = Namespace::parse(namespace).map_err(|e| InvalidServiceAccount(e.into()))?;
        // A DNS-1123 subdomain, as the API server requires of ServiceAccount names; this also
        // keeps ':' out of the user name below.
        if !validate::is_dns1123_subdomain(name) {
            return Err(InvalidServiceAccount(format!(
                "ServiceAccount name {} is not valid (1-253 characters of a-z, 0-9, '-' and '.')",
                validate::quoted(name)
            )));
        }
        let name = Name::parse(name).map_err(|e| InvalidServiceAccount(e.into()))?;
        Ok(ServiceAccount { namespace, name })
    }

    /// The user the API server knows it as.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// The groups the API server gives it.
    pub fn groups(&self) -> Vec<String> {
        vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".to_owned(),
        ]
    }
}

impl std::str::FromStr for ServiceAccount {
    type Err = InvalidServiceAccount;

    /// `NAMESPACE/NAME`.
    fn from_str(text: &str) -> Result<ServiceAccount, InvalidServiceAccount> {
        let (namespace, name) = text.split_once('/').ok_or_else(|| {
            InvalidServiceAccount(format!(
                "ServiceAccount {} is not NAMESPACE/NAME (such as wasmloop-system/my-plugin)",
                validate::quoted(text)
            ))
        })?;
        ServiceAccount::new(namespace, name)
    }
}

impl fmt::Display for ServiceAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServiceAccount {}/{}", self.namespace, self.name)
    }
}

/// How a source names the ServiceAccount of the plugin it offers; the plugin's name is only
/// known once its component is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountChoice {
    /// This one.
    Named(ServiceAccount),
    /// The ServiceAccount named like the plugin, in this namespace (a ConfigMap's, without the
    /// annotation).
    LikePlugin {
        /// The namespace.
        namespace: String,
    },
    /// The one the operator configured for the plugin (`host.yaml`'s
    /// `plugins.<name>.serviceAccount`), else the one named like the plugin in this namespace
    /// (a file's). ConfigMap plugins never get this: a ConfigMap writer could otherwise name
    /// their plugin after one the operator trusts.
    Operator {
        /// The namespace.
        namespace: String,
    },
}

impl AccountChoice {
    /// The ServiceAccount of plugin `plugin`, given the one the operator configured for it.
    ///
    /// # Errors
    /// When the plugin's name is not a valid ServiceAccount name.
    pub fn resolve(
        &self,
        plugin: &str,
        configured: Option<&ServiceAccount>,
    ) -> Result<ServiceAccount, InvalidServiceAccount> {
        match (self, configured) {
            (AccountChoice::Named(account), _) | (AccountChoice::Operator { .. }, Some(account)) => Ok(account.clone()),
            (AccountChoice::LikePlugin { namespace } | AccountChoice::Operator { namespace }, _) => {
                ServiceAccount::new(namespace, plugin)
            }
        }
    }
}

/// Whom a plugin's requests act as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The host's own credentials (`--plugin-identity host`, the default of `dev`).
    Host,
    /// The plugin's ServiceAccount, impersonated.
    ServiceAccount(ServiceAccount),
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Host => f.write_str("the host's own identity"),
            Identity::ServiceAccount(account) => account.fmt(f),
        }
    }
}

/// One read a plugin needs: a verb on a resource, in a namespace or cluster-wide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// `list`, `watch`, ...
    pub verb: &'static str,
    /// The resource (group, plural).
    pub resource: ApiResource,
    /// The namespace; none for cluster-wide.
    pub namespace: Option<Namespace>,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.resource.group.is_empty() { String::new() } else { format!(".{}", self.resource.group) };
        match &self.namespace {
            Some(ns) => write!(f, "{} {}{group} in namespace {ns}", self.verb, self.resource.plural),
            None => write!(f, "{} {}{group} cluster-wide", self.verb, self.resource.plural),
        }
    }
}

/// Why a plugin's identity cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The name is not a valid ServiceAccount name.
    #[error(
        "{0}; name the plugin's ServiceAccount with the {SERVICE_ACCOUNT_ANNOTATION} annotation (ConfigMaps) or plugins.<name>.serviceAccount (host.yaml)"
    )]
    Invalid(#[from] InvalidServiceAccount),
    /// The ServiceAccount does not exist.
    #[error("{account} does not exist; create it, mark it for plugin use and bind the roles the plugin needs: kubectl -n {ns} create serviceaccount {name} && kubectl -n {ns} annotate serviceaccount {name} {OPT_IN_ANNOTATION}=true && kubectl -n {ns} create rolebinding {name} --role=ROLE --serviceaccount={ns}:{name} (docs/security.md)", ns = .account.namespace, name = .account.name)]
    Missing {
        /// The ServiceAccount.
        account: ServiceAccount,
    },
    /// The ServiceAccount exists but its administrator has not let plugins act as it.
    #[error("{account} is not marked for plugin use; if plugins may act as it, its administrator runs: kubectl -n {ns} annotate serviceaccount {name} {OPT_IN_ANNOTATION}=true (docs/security.md)", ns = .account.namespace, name = .account.name)]
    NotOptedIn {
        /// The ServiceAccount.
        account: ServiceAccount,
    },
    /// The ServiceAccount is the host's own, which no plugin may act as.
    #[error(
        "{account} is the host's own; a plugin needs a ServiceAccount of its own (name it with the {SERVICE_ACCOUNT_ANNOTATION} annotation or plugins.<name>.serviceAccount)"
    )]
    HostsOwn {
        /// The ServiceAccount.
        account: ServiceAccount,
    },
    /// Kubernetes does not let the identity read what the plugin declares.
    #[error("{account} may not {}; grant it, for example:\n{}", list(.denied), role_snippet(.account, .denied))]
    Denied {
        /// The ServiceAccount.
        account: ServiceAccount,
        /// What it may not do.
        denied: Vec<Access>,
    },
    /// The API server could not answer.
    #[error(
        "cannot check {what}: {source}; check that the host may get ServiceAccounts and create SubjectAccessReviews (deploy/base/rbac.yaml)"
    )]
    Api {
        /// What was being checked.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// No client could be built for the identity.
    #[error("cannot act as {account}: {source}")]
    Client {
        /// The ServiceAccount.
        account: ServiceAccount,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

fn list(denied: &[Access]) -> String {
    denied.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// A Role (or ClusterRole, for cluster-wide reads) and its binding that grant `denied` to
/// `account`: what an operator pastes to fix a refusal.
pub fn role_snippet(account: &ServiceAccount, denied: &[Access]) -> String {
    let mut by_scope: Vec<(Option<&str>, Vec<&Access>)> = Vec::new();
    for access in denied {
        let scope = access.namespace.as_deref();
        match by_scope.iter_mut().find(|(s, _)| *s == scope) {
            Some((_, accesses)) => accesses.push(access),
            None => by_scope.push((scope, vec![access])),
        }
    }
    let mut out = Vec::new();
    for (scope, accesses) in by_scope {
        let (role, binding, metadata) = match scope {
            Some(ns) => ("Role", "RoleBinding", format!("{{name: wasmloop-plugin-{}, namespace: {ns}}}", account.name)),
            None => ("ClusterRole", "ClusterRoleBinding", format!("{{name: wasmloop-plugin-{}}}", account.name)),
        };
        let mut rules: Vec<(String, String, Vec<&str>)> = Vec::new();
        for access in accesses {
            let (group, plural) = (access.resource.group.clone(), access.resource.plural.clone());
            match rules.iter_mut().find(|(g, p, _)| *g == group && *p == plural) {
                Some((_, _, verbs)) if !verbs.contains(&access.verb) => verbs.push(access.verb),
                Some(_) => {}
                None => rules.push((group, plural, vec![access.verb])),
            }
        }
        let rules: Vec<String> = rules
            .iter()
            .map(|(g, p, v)| format!("{{apiGroups: [{g:?}], resources: [{p}], verbs: [{}]}}", v.join(", ")))
            .collect();
        out.push(format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: {role}\nmetadata: {metadata}\nrules: [{}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: {binding}\nmetadata: {metadata}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: {role}, name: wasmloop-plugin-{}}}\nsubjects: [{{kind: ServiceAccount, name: {}, namespace: {}}}]",
            rules.join(", "),
            account.name,
            account.name,
            account.namespace
        ));
    }
    out.join("\n---\n")
}

/// The review request asking whether `account` may do `access`.
pub fn review_for(account: &ServiceAccount, access: &Access) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(account.user()),
            groups: Some(account.groups()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(access.verb.to_owned()),
                group: Some(access.resource.group.clone()),
                version: Some(access.resource.version.clone()),
                resource: Some(access.resource.plural.clone()),
                namespace: access.namespace.as_ref().map(Namespace::to_string),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

/// Whether plugins may act as `account`, given the object found under its name and the host's
/// own account.
///
/// # Errors
/// The first reason it may not: the host's own, missing, not opted in.
pub fn usable(
    account: &ServiceAccount,
    found: Option<&ServiceAccountObject>,
    own: Option<&ServiceAccount>,
) -> Result<(), IdentityError> {
    if own == Some(account) {
        return Err(IdentityError::HostsOwn { account: account.clone() });
    }
    let found = found.ok_or_else(|| IdentityError::Missing { account: account.clone() })?;
    let annotations = found.metadata.annotations.as_ref();
    if annotations.and_then(|a| a.get(OPT_IN_ANNOTATION)).map(String::as_str) != Some("true") {
        return Err(IdentityError::NotOptedIn { account: account.clone() });
    }
    Ok(())
}

/// How plugins' requests are made: as the host, or each as its own ServiceAccount.
pub struct Identities {
    host: Client,
    /// The host's own ServiceAccount, when known: no plugin may act as it.
    own: Option<ServiceAccount>,
    /// The host's connection settings, from which impersonating clients are built; none when
    /// plugins act as the host.
    config: Option<kube::Config>,
    clients: Mutex<HashMap<ServiceAccount, Client>>,
    review_interval: Duration,
}

impl Identities {
    /// Every plugin acts as the host (`--plugin-identity host`).
    pub fn host(client: Client) -> Identities {
        Identities { host: client, own: None, config: None, clients: Mutex::default(), review_interval: Duration::MAX }
    }

    /// Every plugin acts as its own ServiceAccount, impersonated through a client built from
    /// `config` (the host's own connection settings); reads are reviewed every
    /// `review_interval`.
    pub fn impersonating(host: Client, config: kube::Config, review_interval: Duration) -> Identities {
        Identities { host, own: None, config: Some(config), clients: Mutex::default(), review_interval }
    }

    /// These identities, knowing the host's own ServiceAccount (in a pod: from the downward
    /// API), which no plugin may act as.
    pub fn with_own_account(mut self, own: Option<ServiceAccount>) -> Identities {
        self.own = own;
        self
    }

    /// True when plugins act as their own ServiceAccounts.
    pub fn impersonates(&self) -> bool {
        self.config.is_some()
    }

    /// How often a plugin's reads are reviewed again.
    pub fn review_interval(&self) -> Duration {
        self.review_interval
    }

    /// The identity a plugin gets, given how its source names its ServiceAccount.
    ///
    /// # Errors
    /// When impersonating and the name is not valid.
    pub fn identity_for(
        &self,
        choice: &AccountChoice,
        plugin: &str,
        configured: Option<&ServiceAccount>,
    ) -> Result<Identity, IdentityError> {
        if !self.impersonates() {
            return Ok(Identity::Host);
        }
        Ok(Identity::ServiceAccount(choice.resolve(plugin, configured)?))
    }

    /// The client whose requests act as `identity`; one per ServiceAccount, built once.
    ///
    /// # Errors
    /// When the host's connection settings do not make a client.
    pub fn client_for(&self, identity: &Identity) -> Result<Client, IdentityError> {
        match identity {
            Identity::Host => Ok(self.host.clone()),
            Identity::ServiceAccount(account) => self.client(account),
        }
    }

    /// The client whose requests impersonate `account` (the host's own, when plugins act as the
    /// host).
    ///
    /// # Errors
    /// When the host's connection settings do not make a client.
    pub fn client(&self, account: &ServiceAccount) -> Result<Client, IdentityError> {
        let Some(config) = &self.config else { return Ok(self.host.clone()) };
        let mut clients = self.clients.lock().expect("lock");
        if let Some(client) = clients.get(account) {
            return Ok(client.clone());
        }
        let mut config = config.clone();
        config.auth_info.impersonate = Some(account.user());
        // The API server adds a ServiceAccount's own groups when none are given.
        config.auth_info.impersonate_groups = None;
        let client =
            Client::try_from(config).map_err(|source| IdentityError::Client { account: account.clone(), source })?;
        clients.insert(account.clone(), client.clone());
        Ok(client)
    }

    /// Checks that plugins may act as `account`: it exists, its administrator opted it in, and
    /// it is not the host's own.
    ///
    /// # Errors
    /// Why not, with what fixes it, or the API error.
    pub async fn ensure_usable(&self, account: &ServiceAccount) -> Result<(), IdentityError> {
        let api: Api<ServiceAccountObject> = crate::api::typed_api(self.host.clone(), &account.namespace);
        match api.get_opt(&account.name).await {
            Ok(found) => usable(account, found.as_ref(), self.own.as_ref()),
            Err(source) => Err(IdentityError::Api { what: account.to_string(), source }),
        }
    }

    /// Asks the API server whether `account` may do each of `needed`.
    ///
    /// # Errors
    /// [`IdentityError::Denied`] naming everything denied, with a Role that grants it; or the
    /// API error.
    pub async fn review(&self, account: &ServiceAccount, needed: &[Access]) -> Result<(), IdentityError> {
        let api: Api<SubjectAccessReview> = Api::all(self.host.clone());
        let mut denied = Vec::new();
        for access in needed {
            let review = api
                .create(&PostParams::default(), &review_for(account, access))
                .await
                .map_err(|source| IdentityError::Api { what: format!("whether {account} may {access}"), source })?;
            if !review.status.is_some_and(|s| s.allowed) {
                denied.push(access.clone());
            }
        }
        if denied.is_empty() { Ok(()) } else { Err(IdentityError::Denied { account: account.clone(), denied }) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, version: &str, plural: &str) -> ApiResource {
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() { version.into() } else { format!("{group}/{version}") },
            kind: String::new(),
            plural: plural.into(),
        }
    }

    #[test]
    fn service_account_references_parse_only_when_valid() {
        let cases = [
            ("wasmloop-system/pod-logger", true),
            ("ns/a.b", true),
            ("pod-logger", false),
            ("ns/", false),
            ("/name", false),
            ("ns/a:b", false),
            ("ns/Upper", false),
            ("a/b/c", false),
            ("tenant-a/secrets/victim", false),
        ];
        for (text, ok) in cases {
            assert_eq!(text.parse::<ServiceAccount>().is_ok(), ok, "{text}");
        }
    }

    #[test]
    fn a_service_account_is_the_user_and_groups_the_api_server_gives_it() {
        let account = ServiceAccount::new("tenants", "p").unwrap();
        assert_eq!(account.user(), "system:serviceaccount:tenants:p");
        assert_eq!(
            account.groups(),
            ["system:serviceaccounts", "system:serviceaccounts:tenants", "system:authenticated"]
        );
    }

    #[test]
    fn a_choice_resolves_to_its_account_the_operators_or_the_one_named_like_the_plugin() {
        let sa = |ns: &str, name: &str| ServiceAccount::new(ns, name).unwrap();
        let operators = sa("ops", "chosen");
        let named = AccountChoice::Named(sa("a", "x"));
        let like = AccountChoice::LikePlugin { namespace: "b".into() };
        let file = AccountChoice::Operator { namespace: "c".into() };
        let cases = [
            (&named, None, sa("a", "x")),
            (&named, Some(&operators), sa("a", "x")),
            (&like, None, sa("b", "p")),
            // A ConfigMap's plugin never gets the operator's account for a plugin of its name.
            (&like, Some(&operators), sa("b", "p")),
            (&file, None, sa("c", "p")),
            (&file, Some(&operators), operators.clone()),
        ];
        for (choice, configured, expected) in cases {
            assert_eq!(choice.resolve("p", configured).unwrap(), expected, "{choice:?} {configured:?}");
        }
        assert!(like.resolve("Not_A_Name", None).is_err());
    }

    #[test]
    fn the_role_snippet_grants_each_denied_access_in_its_scope() {
        let account = ServiceAccount::new("plugins", "p").unwrap();
        let denied = [
            Access {
                verb: "list",
                resource: resource("apps", "v1", "deployments"),
                namespace: Some("t".parse().unwrap()),
            },
            Access {
                verb: "watch",
                resource: resource("apps", "v1", "deployments"),
                namespace: Some("t".parse().unwrap()),
            },
            Access { verb: "list", resource: resource("", "v1", "nodes"), namespace: None },
        ];
        let snippet = role_snippet(&account, &denied);
        let expected = [
            "kind: Role\nmetadata: {name: wasmloop-plugin-p, namespace: t}\nrules: [{apiGroups: [\"apps\"], resources: [deployments], verbs: [list, watch]}]",
            "kind: RoleBinding",
            "kind: ClusterRole\nmetadata: {name: wasmloop-plugin-p}\nrules: [{apiGroups: [\"\"], resources: [nodes], verbs: [list]}]",
            "subjects: [{kind: ServiceAccount, name: p, namespace: plugins}]",
        ];
        for part in expected {
            assert!(snippet.contains(part), "{part:?} missing from:\n{snippet}");
        }
        // Each snippet document parses as YAML.
        for document in snippet.split("\n---\n") {
            let _: serde_json::Value = serde_yaml_like(document);
        }
    }

    /// The snippet is flow-style YAML; JSON-compatible enough to check with a YAML parser.
    fn serde_yaml_like(document: &str) -> serde_json::Value {
        serde_saphyr::from_str(document).unwrap_or_else(|e| panic!("not YAML: {e}\n{document}"))
    }

    #[test]
    fn only_an_existing_opted_in_account_that_is_not_the_hosts_may_be_acted_as() {
        let account = ServiceAccount::new("plugins", "p").unwrap();
        let host = ServiceAccount::new("plugins", "wasmloop").unwrap();
        let object = |annotation: Option<&str>| -> ServiceAccountObject {
            let annotations = annotation.map(|v| serde_json::json!({OPT_IN_ANNOTATION: v}));
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "annotations": annotations}})).unwrap()
        };
        let (opted, other_value, plain) = (object(Some("true")), object(Some("yes")), object(None));
        let cases: [(&ServiceAccount, Option<&ServiceAccountObject>, Option<&ServiceAccount>, &str); 6] = [
            (&account, Some(&opted), None, "ok"),
            (&account, Some(&opted), Some(&host), "ok"),
            (&account, None, None, "does not exist"),
            (&account, Some(&plain), None, "is not marked for plugin use"),
            (&account, Some(&other_value), None, "is not marked for plugin use"),
            // The host's own account is refused even when someone marked it.
            (&host, Some(&opted), Some(&host), "is the host's own"),
        ];
        for (account, found, own, expected) in cases {
            match usable(account, found, own) {
                Ok(()) => assert_eq!(expected, "ok", "{account} {own:?}"),
                Err(error) => assert!(error.to_string().contains(expected), "{account} {own:?}: {error}"),
            }
        }
    }

    #[test]
    fn a_review_asks_for_the_verb_resource_and_scope_as_the_service_account() {
        let account = ServiceAccount::new("plugins", "p").unwrap();
        let access = Access { verb: "watch", resource: resource("apps", "v1", "deployments"), namespace: None };
        let review = review_for(&account, &access);
        let attributes = review.spec.resource_attributes.unwrap();
        assert_eq!(review.spec.user.as_deref(), Some("system:serviceaccount:plugins:p"));
        assert_eq!(attributes.verb.as_deref(), Some("watch"));
        assert_eq!(attributes.group.as_deref(), Some("apps"));
        assert_eq!(attributes.resource.as_deref(), Some("deployments"));
        assert_eq!(attributes.namespace, None);
    }
}
