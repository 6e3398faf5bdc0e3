//! [`ObjectRef`], published as `request::ObjectRef`. A module of its own because actions
//! hold it and errors hold actions, while `request` needs errors: kept in `request`, the
//! three would depend on each other.

use crate::kind::Kind;

/// Names one object, for `delete` and `patch` actions and for `map` results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// `apiVersion` of the object.
    pub api_version: String,
    /// `kind` of the object.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, none for cluster-scoped objects.
    pub namespace: Option<String>,
    /// When set, the host acts only if the live object still has this UID.
    pub uid: Option<String>,
}

impl ObjectRef {
    /// A reference to the object of kind `K` called `name`.
    pub fn new<K: Kind>(name: impl Into<String>) -> Self {
        ObjectRef {
            api_version: K::API_VERSION.into(),
            kind: K::KIND.into(),
            name: name.into(),
            namespace: None,
            uid: None,
        }
    }

    /// Sets the namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Sets the UID precondition.
    #[must_use]
    pub fn uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = Some(uid.into());
        self
    }
}
