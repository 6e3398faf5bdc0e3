//! Turning JSON objects into the contract's `object` envelope.

use serde_json::Value;

use crate::bindings::Object;

/// Builds the envelope of a JSON object: routing fields read once, the JSON kept as text.
///
/// # Errors
/// Names the missing field when `apiVersion`, `kind` or `metadata.name` is absent.
pub fn object_from_value(value: &Value) -> Result<Object, String> {
    let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
    let required = |pointer: &str, field: &str| {
        text(pointer).map(str::to_owned).ok_or_else(|| format!("the object has no {field}"))
    };
    Ok(Object {
        api_version: required("/apiVersion", "apiVersion")?,
        kind: required("/kind", "kind")?,
        name: required("/metadata/name", "metadata.name")?,
        namespace: text("/metadata/namespace").map(str::to_owned),
        uid: text("/metadata/uid").unwrap_or_default().to_owned(),
        json: value.to_string(),
    })
}
