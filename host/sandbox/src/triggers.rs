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

fn reference(r: &WitObjectRef) -> Value {
    json!({"apiVersion": r.api_version, "kind": r.kind, "name": r.name, "namespace": r.namespace, "uid": r.uid})
}

fn reference_of(v: &Value) -> Option<WitObjectRef> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    Some(WitObjectRef {
        api_version: text("apiVersion")?,
        kind: text("kind")?,
        name: text("name")?,
        namespace: text("namespace"),
        uid: text("uid"),
    })
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

/// The trigger a case kept; none for anything else.
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
            let fields = body.get("fields")?.as_array()?.iter().map(|f| FieldConflict {
                manager: f.get("manager").and_then(Value::as_str).unwrap_or_default().to_owned(),
                field: f.get("field").and_then(Value::as_str).unwrap_or_default().to_owned(),
            });
            Some(Trigger::Conflict(ApplyConflict {
                target: reference_of(body.get("target")?)?,
                fields: fields.collect(),
                more: body.get("more").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
            }))
        }
        _ => None,
    }
}
