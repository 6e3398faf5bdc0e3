//! What the API server says when a non-forced server-side apply meets fields other managers
//! own: a 409 whose causes name each field and its manager. Read into a [`Conflict`], which
//! goes back to the plugin as the `conflict` trigger of its next reconcile.
//!
//! ```
//! use kube::core::Status;
//! use wasmloop_runtime::executor::conflicts::fields_of;
//! let status: Status = serde_json::from_value(serde_json::json!({
//!     "status": "Failure", "code": 409, "reason": "Conflict",
//!     "message": "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using apps/v1: .spec.replicas",
//!     "details": {"causes": [{"reason": "FieldManagerConflict", "field": ".spec.replicas",
//!                             "message": "conflict with \"kubectl-edit\" using apps/v1"}]}
//! })).unwrap();
//! let (fields, more) = fields_of(&status).unwrap();
//! assert_eq!((fields[0].manager.as_str(), fields[0].field.as_str(), more), ("kubectl-edit", ".spec.replicas", 0));
//! ```

use kube::core::Status;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_contract::validate;
use wasmloop_sandbox::Gvk;

/// Conflicts listed to the plugin at most; the rest are counted (the contract's bound, which a
/// case file's conflicts are held to as well).
pub const MAX_CONFLICTS: usize = wasmloop_sandbox::triggers::MAX_CONFLICT_FIELDS;

/// Longest manager name or field path passed on: both are the API server's words about other
/// clients' choices.
const MAX_CONFLICT_TEXT: usize = wasmloop_sandbox::triggers::MAX_CONFLICT_TEXT;

/// One field another manager owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    /// The manager (`kubectl-edit`, `wasmloop/other`).
    pub manager: String,
    /// The field, as the API server names it (`.spec.replicas`).
    pub field: String,
}

/// The object a conflicting apply named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Its namespace.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// A non-forced apply the API server refused for fields other managers own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The object.
    pub target: Target,
    /// The fields and their managers, at most [`MAX_CONFLICTS`].
    pub fields: Vec<FieldConflict>,
    /// Conflicts beyond those listed.
    pub more: u32,
}

impl Conflict {
    /// The managers and fields, for a log line and an Event: `kubectl-edit owns .spec.replicas`.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> =
            self.fields.iter().take(4).map(|f| format!("{} owns {}", f.manager, f.field)).collect();
        let rest = self.fields.len().saturating_sub(4) + self.more as usize;
        if rest > 0 {
            parts.push(format!("{rest} more"));
        }
        parts.join(", ")
    }
}

/// The object of kind `kind` named `name` in `namespace`.
pub fn target(kind: &Gvk, namespace: Option<&Namespace>, name: &Name) -> Target {
    Target {
        api_version: kind.api_version(),
        kind: kind.kind().to_string(),
        namespace: namespace.map(Namespace::to_string),
        name: name.to_string(),
    }
}

/// The fields of a field-manager conflict, and how many more there were; none for any other
/// answer (a 409 for another reason among them).
pub fn fields_of(status: &Status) -> Option<(Vec<FieldConflict>, u32)> {
    if status.code != 409 {
        return None;
    }
    let causes = status.details.as_ref()?.causes.iter().filter(|c| c.reason == "FieldManagerConflict");
    let all: Vec<FieldConflict> = causes
        .map(|c| FieldConflict {
            manager: validate::cut(manager_in(&c.message).to_owned(), MAX_CONFLICT_TEXT),
            field: validate::cut(c.field.clone(), MAX_CONFLICT_TEXT),
        })
        .collect();
    if all.is_empty() {
        return None;
    }
    let more = u32::try_from(all.len().saturating_sub(MAX_CONFLICTS)).unwrap_or(u32::MAX);
    Some((all.into_iter().take(MAX_CONFLICTS).collect(), more))
}

/// The manager a cause's message names: `conflict with "NAME"` (apimachinery's
/// `ConflictsFromManagers`), or `conflict with "NAME" using VERSION`.
fn manager_in(message: &str) -> &str {
    message.split('"').nth(1).unwrap_or("an unnamed manager")
}

/// True when the server refused a write for its UID precondition: the object was deleted and
/// recreated under its name after the host checked it (a 422 on the field `metadata.uid`, or a
/// 409 "uid mismatch" / "Precondition failed: UID"). Nothing else is: a name holding "uid" in
/// another refusal must not pass for it.
pub fn uid_refused(status: &Status) -> bool {
    let on_uid = status.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.field == "metadata.uid"));
    match status.code {
        422 => on_uid,
        409 => {
            status.message.starts_with("uid mismatch")
                || status.message.contains("Precondition failed: UID in precondition")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use kube::core::response::{StatusCause, StatusDetails};

    use super::*;

    fn conflict(causes: Vec<StatusCause>) -> Status {
        Status {
            code: 409,
            details: Some(StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes,
                retry_after_seconds: 0,
            }),
            ..Status::default()
        }
    }

    fn cause(reason: &str, manager: &str, field: &str) -> StatusCause {
        StatusCause {
            reason: reason.into(),
            message: format!("conflict with \"{manager}\" using apps/v1"),
            field: field.into(),
        }
    }

    #[test]
    fn each_field_manager_conflict_names_its_manager_and_field() {
        let status = conflict(vec![
            cause("FieldManagerConflict", "kubectl-edit", ".spec.replicas"),
            cause("FieldManagerConflict", "wasmloop/other", ".metadata.labels.app"),
        ]);
        let (fields, more) = fields_of(&status).unwrap();
        assert_eq!(more, 0);
        assert_eq!(fields[1], FieldConflict { manager: "wasmloop/other".into(), field: ".metadata.labels.app".into() });
    }

    #[test]
    fn past_the_limit_conflicts_are_counted_not_listed() {
        let causes = (0..MAX_CONFLICTS + 3).map(|i| cause("FieldManagerConflict", "m", &format!(".f{i}"))).collect();
        let (fields, more) = fields_of(&conflict(causes)).unwrap();
        assert_eq!((fields.len(), more), (MAX_CONFLICTS, 3));
    }

    #[test]
    fn other_409s_are_no_field_conflicts() {
        assert!(fields_of(&conflict(vec![cause("Other", "m", ".f")])).is_none());
        assert!(fields_of(&conflict(Vec::new())).is_none());
        assert!(fields_of(&Status { code: 422, ..Status::default() }).is_none());
    }

    #[test]
    fn a_managers_words_are_cut() {
        let long = "m".repeat(10_000);
        let (fields, _) = fields_of(&conflict(vec![cause("FieldManagerConflict", &long, ".f")])).unwrap();
        assert!(fields[0].manager.len() <= MAX_CONFLICT_TEXT + 8);
    }

    #[test]
    fn only_a_refusal_of_the_uid_itself_is_a_uid_refusal() {
        let invalid = |field: &str| Status {
            code: 422,
            message: "ConfigMap \"squid-conf\" is invalid".into(),
            details: Some(StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: vec![StatusCause {
                    reason: "FieldValueInvalid".into(),
                    message: String::new(),
                    field: field.into(),
                }],
                retry_after_seconds: 0,
            }),
            ..Status::default()
        };
        assert!(uid_refused(&invalid("metadata.uid")));
        assert!(!uid_refused(&invalid("data.x")), "a name holding \"uid\" is no UID refusal");
        assert!(uid_refused(&Status {
            code: 409,
            message: "uid mismatch: the object was recreated".into(),
            ..Status::default()
        }));
        assert!(!uid_refused(&Status {
            code: 409,
            message: "the object squid was modified".into(),
            ..Status::default()
        }));
    }
}
