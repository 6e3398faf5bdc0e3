//! Triggers as JSON: the form recorded cases keep them in and `wasmloop reconcile --triggers`
//! reads, `{primaryChanged: {old, new}}`, `{ownedChanged: REF}`, `{relatedChanged: REF}`,
//! `resync`, `requeue`, `retry`, `{conflict: {target, fields, more}}`.
//!
//! ```
//! use wasmloop_sandbox::triggers;
//! let resync = triggers::of(&serde_json::json!("resync")).unwrap();
//! assert_eq!(triggers::to_json(&resync), serde_json::json!("resync"));
//! ```

use serde_json::{Value, json};

use crate::{ApplyConflict, FieldConflict, GenerationChange, Trigger, WitObjectRef};

/// Triggers one call carries at most: the newest, the rest counted in `triggers-dropped`.
pub const MAX: usize = 32;

/// Fields one conflict names at most; the rest are counted in its `more`.
pub const MAX_CONFLICT_FIELDS: usize = 64;

/// Longest manager or field name a conflict keeps.
pub const MAX_CONFLICT_TEXT: usize = 256;

fn reference(r: &WitObjectRef) -> Value {
    json!({"apiVersion": r.api_version, "kind": r.kind, "name": r.name, "namespace": r.namespace, "uid": r.uid})
}

/// A reference read from a file: none unless it names an object as the API server would
/// (kind, apiVersion, name, namespace and UID held to their rules, so none is unbounded).
fn reference_of(v: &Value) -> Option<WitObjectRef> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let r = WitObjectRef {
        api_version: text("apiVersion")?,
        kind: text("kind")?,
        name: text("name")?,
        namespace: text("namespace"),
        uid: text("uid"),
    };
    let valid = wasmloop_contract::action::check_ref(
        &r.api_version,
        &r.kind,
        r.namespace.as_deref(),
        &r.name,
        r.uid.as_deref(),
    );
    valid.ok().map(|()| r)
}

/// `trigger` as JSON.
pub fn to_json(trigger: &Trigger) -> Value {
    match trigger {
        Trigger::PrimaryChanged(g) => json!({"primaryChanged": {"old": g.old, "new": g.new}}),
        Trigger::OwnedChanged(r) => json!({"ownedChanged": reference(r)}),
        Trigger::RelatedChanged(r) => json!({"relatedChanged": reference(r)}),
        Trigger::Resync => json!("resync"),
        Trigger::Requeue => json!("requeue"),
        Trigger::Retry => json!("retry"),
        Trigger::Conflict(c) => json!({"conflict": {
            "target": reference(&c.target),
            "fields": c.fields.iter().map(|f| json!({"manager": f.manager, "field": f.field})).collect::<Vec<_>>(),
            "more": c.more,
        }}),
    }
}

/// The trigger a case kept; none for anything else, or for one naming an object by an invalid
/// name. A conflict keeps its first [`MAX_CONFLICT_FIELDS`] fields, each text cut to
/// [`MAX_CONFLICT_TEXT`], as the host keeps the API server's.
pub fn of(v: &Value) -> Option<Trigger> {
    if let Some(word) = v.as_str() {
        return match word {
            "resync" => Some(Trigger::Resync),
            "requeue" => Some(Trigger::Requeue),
            "retry" => Some(Trigger::Retry),
            _ => None,
        };
    }
    let (tag, body) = v.as_object()?.iter().next()?;
    match tag.as_str() {
        "primaryChanged" => Some(Trigger::PrimaryChanged(GenerationChange {
            old: body.get("old").and_then(Value::as_i64),
            new: body.get("new").and_then(Value::as_i64),
        })),
        "ownedChanged" => reference_of(body).map(Trigger::OwnedChanged),
        "relatedChanged" => reference_of(body).map(Trigger::RelatedChanged),
        "conflict" => {
            let listed = body.get("fields")?.as_array()?;
            let text = |f: &Value, k: &str| {
                crate::validate::cut(f.get(k).and_then(Value::as_str).unwrap_or_default().to_owned(), MAX_CONFLICT_TEXT)
            };
            let fields = listed
                .iter()
                .take(MAX_CONFLICT_FIELDS)
                .map(|f| FieldConflict { manager: text(f, "manager"), field: text(f, "field") });
            let beyond = u32::try_from(listed.len().saturating_sub(MAX_CONFLICT_FIELDS)).unwrap_or(u32::MAX);
            let more = body.get("more").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
            Some(Trigger::Conflict(ApplyConflict {
                target: reference_of(body.get("target")?)?,
                fields: fields.collect(),
                more: more.saturating_add(beyond),
            }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_trigger_naming_an_object_by_an_invalid_name_is_none() {
        let long = "n".repeat(100_000);
        let named = |name: &str| json!({"relatedChanged": {"apiVersion": "v1", "kind": "ConfigMap", "name": name}});
        assert!(of(&named("settings")).is_some());
        assert!(of(&named(&long)).is_none());
        assert!(of(&named("Not A Name")).is_none());
    }

    #[test]
    fn a_conflict_from_a_file_is_bounded_as_the_host_bounds_one() {
        let fields: Vec<Value> = (0..100).map(|_| json!({"manager": "m".repeat(10_000), "field": ".spec"})).collect();
        let conflict = json!({"conflict": {"target": {"apiVersion": "v1", "kind": "ConfigMap", "name": "a"}, "fields": fields, "more": 1}});
        let Some(Trigger::Conflict(c)) = of(&conflict) else { panic!("a conflict") };
        assert_eq!((c.fields.len(), c.more), (MAX_CONFLICT_FIELDS, 37));
        assert!(c.fields[0].manager.len() <= MAX_CONFLICT_TEXT + 4, "{}", c.fields[0].manager.len());
    }
}
