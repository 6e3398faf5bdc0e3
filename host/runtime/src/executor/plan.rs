//! What one of a plugin's actions writes, decided without the API server.
//!
//! The executor's shell asks discovery one thing per action, whether the kind it touches is
//! namespaced ([`kind_of`] says which kind), and then carries out the [`Write`] that [`plan`]
//! returns. Everything else is decided here, as a pure function of the manifest, the primary,
//! the action and the operator's confinement:
//! - a namespaced object without a namespace goes to the primary's; a cluster-scoped one has
//!   none, whatever the plugin wrote;
//! - the write grants ([`capability::permits`]), checked once the namespace is settled;
//! - the controller owner reference to the primary on objects of owned kinds, never across
//!   namespaces;
//! - a UID the plugin names becomes a precondition: `metadata.uid` in an apply and in a merge
//!   or strategic merge patch (the API server refuses to change it), a leading `test`
//!   operation in a JSON patch, a delete precondition;
//! - an apply is forced only when the plugin asked (contract 0.2 and 0.1 applies always are).
//!
//! ```
//! use wasmloop_runtime::executor::plan::{Write, plan};
//! use wasmloop_sandbox::{Action, Gvk, Manifest, Object};
//! let foo = Gvk::from_api_version("example.com/v1", "Foo").unwrap();
//! let manifest = Manifest { owns: vec![Gvk::from_api_version("v1", "ConfigMap").unwrap()], ..Manifest::declaring("p", foo) };
//! let primary = Object { api_version: "example.com/v1".into(), kind: "Foo".into(), name: "a".into(), namespace: Some("shop".into()), uid: "u1".into(), json: "{}".into() };
//! let action = Action::Apply(wasmloop_sandbox::Apply::forced(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a-cm"}})));
//! let Write::Apply { namespace, body, .. } = plan(&manifest, &primary, &action, true, None).unwrap() else { unreachable!() };
//! assert_eq!(namespace.unwrap().as_str(), "shop");
//! assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], "u1");
//! ```

use std::collections::BTreeSet;

use serde_json::{Value, json};
use wasmloop_contract::names::{Invalid, Name, Namespace};
use wasmloop_sandbox::capability::{self, Bounds, Verb};
use wasmloop_sandbox::validate;
use wasmloop_sandbox::{Action, Apply, Gvk, Manifest, Object, ObjectRef, PatchKind};

use super::ExecError;

/// One write, settled: the object's kind, namespace and name, and what to send.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A server-side apply of `body`, whose namespace and owner references are set.
    Apply {
        /// The object's kind.
        kind: Gvk,
        /// Its namespace; none for a cluster-scoped kind.
        namespace: Option<Namespace>,
        /// Its name.
        name: Name,
        /// The object to apply, with the UID precondition in it.
        body: Value,
        /// Take fields other managers own.
        force: bool,
        /// The UID the live object must have: the shell applies nothing to an object that is
        /// gone or has another.
        uid: Option<String>,
    },
    /// A merge patch of the primary's status subresource, with the primary's UID in it.
    Status {
        /// The primary's kind.
        kind: Gvk,
        /// Its namespace.
        namespace: Option<Namespace>,
        /// Its name.
        name: String,
        /// The patch.
        body: Value,
    },
    /// A patch of the object.
    Patch {
        /// The object's kind.
        kind: Gvk,
        /// Its namespace; none for a cluster-scoped kind.
        namespace: Option<Namespace>,
        /// Its name.
        name: Name,
        /// The patch, with the UID precondition in it.
        patch: PatchBody,
    },
    /// A delete.
    Delete {
        /// The object's kind.
        kind: Gvk,
        /// Its namespace; none for a cluster-scoped kind.
        namespace: Option<Namespace>,
        /// Its name.
        name: Name,
        /// The UID the object must still have.
        uid: Option<String>,
    },
}

impl Write {
    /// The kind written to.
    pub fn kind(&self) -> &Gvk {
        match self {
            Write::Apply { kind, .. }
            | Write::Status { kind, .. }
            | Write::Patch { kind, .. }
            | Write::Delete { kind, .. } => kind,
        }
    }

    /// The namespace written to.
    pub fn namespace(&self) -> Option<&Namespace> {
        match self {
            Write::Apply { namespace, .. }
            | Write::Status { namespace, .. }
            | Write::Patch { namespace, .. }
            | Write::Delete { namespace, .. } => namespace.as_ref(),
        }
    }

    /// The verb, as errors, metrics and reports name it.
    pub fn verb(&self) -> &'static str {
        match self {
            Write::Apply { .. } => "apply",
            Write::Status { .. } => "status",
            Write::Patch { .. } => "patch",
            Write::Delete { .. } => "delete",
        }
    }

    /// The object, as `Kind namespace/name`.
    pub fn shown(&self) -> String {
        let name = match self {
            Write::Apply { name, .. } | Write::Patch { name, .. } | Write::Delete { name, .. } => name.as_str(),
            Write::Status { name, .. } => name,
        };
        label(self.kind().kind(), self.namespace().map(Namespace::as_str), name)
    }
}

/// A patch document.
#[derive(Debug, Clone, PartialEq)]
pub enum PatchBody {
    /// A JSON merge patch.
    Merge(Value),
    /// A JSON patch.
    Json(json_patch::Patch),
    /// A strategic merge patch.
    Strategic(Value),
}

/// The kind `action` writes to, which the shell resolves before [`plan`]. The checks that
/// need no discovery come first, so a malformed action is refused as such whether or not its
/// kind is served.
///
/// # Errors
/// [`ExecError::Invalid`] for a kind, a name or a primary that does not parse (never for an
/// action the sandbox decoded), and for an Event, which is recorded, not planned.
pub fn kind_of(manifest: &Manifest, primary: &Object, action: &Action) -> Result<Gvk, ExecError> {
    match action {
        Action::Apply(apply) => {
            let applied = Applied::read(&apply.object);
            let invalid = |e: Invalid| applied.invalid(manifest, e.into());
            let kind = Gvk::from_api_version(&applied.api_version, &applied.kind).map_err(invalid)?;
            Name::parse(&applied.name).map_err(invalid)?;
            Ok(kind)
        }
        Action::Status(_) => primary_place(manifest, primary).map(|(kind, _)| kind),
        Action::Patch { target, .. } | Action::Delete(target) => target_kind(manifest, target),
        Action::Event { .. } => Err(not_planned(manifest, primary)),
    }
}

fn not_planned(manifest: &Manifest, primary: &Object) -> ExecError {
    ExecError::Invalid {
        plugin: manifest.id(),
        verb: "event",
        target: label(&primary.kind, primary.namespace.as_deref(), &primary.name),
        reason: "an Event is recorded, not planned as a write".into(),
    }
}

/// What `action` writes for `primary`, its kind ([`kind_of`]) being namespaced or not, within
/// the operator's `confined_to`.
///
/// # Errors
/// [`ExecError::Invalid`] for an action that cannot be carried out as given (a namespaced
/// object with nowhere to go, an owner reference across namespaces, a malformed patch), and
/// [`ExecError::NotGranted`] for a write no grant covers. An Event is not planned: invalid.
pub fn plan(
    manifest: &Manifest,
    primary: &Object,
    action: &Action,
    namespaced: bool,
    confined_to: Option<&Namespace>,
) -> Result<Write, ExecError> {
    let bounds =
        Bounds { primary_namespace: primary.namespace.as_deref(), confined_to: confined_to.map(Namespace::as_str) };
    match action {
        Action::Apply(action) => apply(manifest, primary, action, namespaced, bounds),
        Action::Status(status) => {
            let (kind, namespace) = primary_place(manifest, primary)?;
            // A merge patch: status subresources accept it on every server version.
            let body = json!({ "metadata": { "uid": primary.uid }, "status": status });
            Ok(Write::Status { kind, namespace, name: primary.name.clone(), body })
        }
        Action::Patch { target, kind: patch_kind, patch } => {
            let (kind, namespace) = settle(manifest, primary, target, namespaced)?;
            granted(manifest, bounds, Verb::Patch, &kind, namespace.as_ref(), &target.name)?;
            let shown = label(&target.kind, namespace.as_deref(), &target.name);
            let patch = patch_body(manifest, &shown, *patch_kind, patch, target.uid.as_deref())?;
            Ok(Write::Patch { kind, namespace, name: target.name.clone(), patch })
        }
        Action::Delete(target) => {
            let (kind, namespace) = settle(manifest, primary, target, namespaced)?;
            granted(manifest, bounds, Verb::Delete, &kind, namespace.as_ref(), &target.name)?;
            Ok(Write::Delete { kind, namespace, name: target.name.clone(), uid: target.uid.clone() })
        }
        Action::Event { .. } => Err(not_planned(manifest, primary)),
    }
}

/// Whether `write` stays out of the `guarded` namespaces (the plugin namespaces): the one it
/// would write into, when it does not.
///
/// ```
/// use std::collections::BTreeSet;
/// use wasmloop_contract::names::{Name, Namespace};
/// use wasmloop_runtime::executor::plan::{Write, outside};
/// use wasmloop_sandbox::Gvk;
/// let configmap = Gvk::from_api_version("v1", "ConfigMap").unwrap();
/// let into = |ns: &str| Write::Delete { kind: configmap.clone(), namespace: Some(Namespace::parse(ns).unwrap()), name: Name::parse("c").unwrap(), uid: None };
/// let guarded = BTreeSet::from([Namespace::parse("wasmloop-system").unwrap()]);
/// assert!(outside(&into("shop"), &guarded).is_ok());
/// assert_eq!(outside(&into("wasmloop-system"), &guarded).unwrap_err().as_str(), "wasmloop-system");
/// ```
pub fn outside<'a>(write: &Write, guarded: &'a BTreeSet<Namespace>) -> Result<(), &'a Namespace> {
    match write.namespace().and_then(|namespace| guarded.get(namespace)) {
        Some(namespace) => Err(namespace),
        None => Ok(()),
    }
}

/// The identifying fields of an object to apply, as the plugin wrote them.
struct Applied {
    api_version: String,
    kind: String,
    name: String,
    namespace: Option<String>,
}

impl Applied {
    fn read(object: &Value) -> Applied {
        let text = |p: &str| object.pointer(p).and_then(Value::as_str).map(str::to_owned);
        Applied {
            api_version: text("/apiVersion").unwrap_or_default(),
            kind: text("/kind").unwrap_or_default(),
            name: text("/metadata/name").unwrap_or_default(),
            namespace: text("/metadata/namespace"),
        }
    }

    /// The refusal of this object, named as the plugin wrote it (cut: it is the plugin's text).
    fn invalid(&self, manifest: &Manifest, reason: String) -> ExecError {
        let target = label(&self.kind, self.namespace.as_deref(), &self.name);
        ExecError::Invalid {
            plugin: manifest.id(),
            verb: "apply",
            target: validate::cut(target, validate::MAX_QUOTED * 4),
            reason,
        }
    }
}

fn apply(
    manifest: &Manifest,
    primary: &Object,
    action: &Apply,
    namespaced: bool,
    bounds: Bounds<'_>,
) -> Result<Write, ExecError> {
    let object = &action.object;
    let applied = Applied::read(object);
    let invalid = |reason: String| applied.invalid(manifest, reason);
    // The sandbox checked these at decode; they are parsed again here, where they become a
    // request.
    let kind = Gvk::from_api_version(&applied.api_version, &applied.kind).map_err(|e| invalid(e.into()))?;
    let name = Name::parse(&applied.name).map_err(|e| invalid(e.into()))?;
    let (_, primary_namespace) = primary_place(manifest, primary)?;
    let declared = applied.namespace.as_deref().map(Namespace::parse).transpose().map_err(|e| invalid(e.into()))?;
    let namespace = if namespaced { declared.or(primary_namespace.clone()) } else { None };
    if namespaced && namespace.is_none() {
        return Err(invalid("a namespaced object needs a namespace, and the primary has none".into()));
    }
    granted(manifest, bounds, Verb::Apply, &kind, namespace.as_ref(), &name)?;
    let mut body = object.clone();
    if let Some(ns) = &namespace {
        body["metadata"]["namespace"] = ns.to_string().into();
    }
    if manifest.owns.contains(&kind) {
        if primary_namespace.is_some() && primary_namespace != namespace {
            return Err(invalid(format!(
                "owner references cannot cross namespaces (the primary is in {}); drop the kind from owns and track the object another way",
                primary.namespace.as_deref().unwrap_or_default()
            )));
        }
        let mut refs: Vec<Value> = body["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
        // One controller per object: the plugin's primary is it.
        refs.retain(|r| r["controller"] != true);
        refs.push(json!({
            "apiVersion": primary.api_version, "kind": primary.kind, "name": primary.name,
            "uid": primary.uid, "controller": true, "blockOwnerDeletion": true,
        }));
        body["metadata"]["ownerReferences"] = refs.into();
    }
    if let Some(uid) = &action.uid {
        // The server refuses to change a UID: an object recreated under the name meanwhile
        // is not written.
        body["metadata"]["uid"] = uid.as_str().into();
    }
    Ok(Write::Apply { kind, namespace, name, body, force: action.force, uid: action.uid.clone() })
}

/// The target's kind, and its namespace: a namespaced target without one is in the primary's,
/// as for `apply`; a cluster-scoped one has none.
fn settle(
    manifest: &Manifest,
    primary: &Object,
    target: &ObjectRef,
    namespaced: bool,
) -> Result<(Gvk, Option<Namespace>), ExecError> {
    let kind = target_kind(manifest, target)?;
    let (_, primary_namespace) = primary_place(manifest, primary)?;
    if !namespaced {
        return Ok((kind, None));
    }
    match target.namespace.clone().or(primary_namespace) {
        Some(namespace) => Ok((kind, Some(namespace))),
        None => Err(ExecError::Invalid {
            plugin: manifest.id(),
            verb: "act on",
            target: label(&target.kind, None, &target.name),
            reason: "a namespaced object needs a namespace, and the primary has none".into(),
        }),
    }
}

/// The patch to send: the plugin's, with `uid` as a precondition.
fn patch_body(
    manifest: &Manifest,
    shown: &str,
    kind: PatchKind,
    patch: &Value,
    uid: Option<&str>,
) -> Result<PatchBody, ExecError> {
    let invalid =
        |reason: String| ExecError::Invalid { plugin: manifest.id(), verb: "patch", target: shown.to_owned(), reason };
    match kind {
        PatchKind::Merge | PatchKind::Strategic => {
            let mut patch = patch.clone();
            if let Some(uid) = uid {
                // A UID in a merge patch is checked by the server, not written: a precondition.
                let metadata = patch.as_object_mut().map(|p| p.entry("metadata").or_insert_with(|| json!({})));
                let Some(metadata) = metadata.and_then(Value::as_object_mut) else {
                    return Err(invalid("a merge patch's metadata must be an object".into()));
                };
                metadata.insert("uid".into(), uid.into());
            }
            Ok(if kind == PatchKind::Strategic { PatchBody::Strategic(patch) } else { PatchBody::Merge(patch) })
        }
        PatchKind::Json => {
            let mut operations = patch.as_array().cloned().unwrap_or_default();
            if let Some(uid) = uid {
                operations.insert(0, json!({"op": "test", "path": "/metadata/uid", "value": uid}));
            }
            serde_json::from_value(operations.into())
                .map(PatchBody::Json)
                .map_err(|e| invalid(format!("not a JSON patch: {e}")))
        }
    }
}

/// The write check, once the target's namespace is settled.
fn granted(
    manifest: &Manifest,
    bounds: Bounds<'_>,
    verb: Verb,
    kind: &Gvk,
    namespace: Option<&Namespace>,
    name: &str,
) -> Result<(), ExecError> {
    let namespace = namespace.map(Namespace::as_str);
    capability::permits(manifest, bounds, verb, kind, namespace).map_err(|refusal| ExecError::NotGranted {
        plugin: manifest.id(),
        target: format!("{} {}", verb.as_str(), label(kind.kind(), namespace, name)),
        refusal,
    })
}

/// The primary's kind and namespace, parsed: a cached object's come from the API server, but
/// nothing reaches a request unparsed.
///
/// # Errors
/// [`ExecError::Invalid`] when either does not parse.
pub fn primary_place(manifest: &Manifest, primary: &Object) -> Result<(Gvk, Option<Namespace>), ExecError> {
    let invalid = |e: Invalid| ExecError::Invalid {
        plugin: manifest.id(),
        verb: "act on",
        target: validate::quoted(&primary.name),
        reason: e.into(),
    };
    let kind = primary.gvk().map_err(invalid)?;
    let namespace = primary.namespace.as_deref().map(Namespace::parse).transpose().map_err(invalid)?;
    Ok((kind, namespace))
}

fn target_kind(manifest: &Manifest, target: &ObjectRef) -> Result<Gvk, ExecError> {
    target.gvk().map_err(|e| ExecError::Invalid {
        plugin: manifest.id(),
        verb: "act on",
        target: label(&target.kind, target.namespace.as_deref(), &target.name),
        reason: e.into(),
    })
}

/// An object as messages name it: `Kind namespace/name`, or `Kind name`.
pub(super) fn label(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

#[cfg(test)]
mod tests;
