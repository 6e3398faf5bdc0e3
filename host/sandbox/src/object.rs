//! Turning JSON objects into the contract's `object` envelope.
//!
//! Objects cross the boundary as JSON text inside a typed envelope (`api-version`, `kind`,
//! `name`, `namespace`, `uid` beside `json`): either side routes and filters (children by
//! kind, cache hits by name) without parsing JSON, and the guest parses only the objects it
//! asks for, straight into the type it asks for.

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

/// The object as a metadata-only kind reaches its plugin: `apiVersion`, `kind` and `metadata`
/// without `managedFields`, the shape of a `PartialObjectMetadata`. JSON that does not parse
/// (the host only hands over what it decoded) is kept as it is.
pub fn metadata_only(object: &Object) -> Object {
    match serde_json::from_str::<Value>(&object.json) {
        Ok(full) => Object { json: wasmloop_contract::cache::metadata_only(full).to_string(), ..object.clone() },
        Err(_) => object.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_only_keeps_type_and_metadata_and_drops_spec_status_and_managed_fields() {
        let full = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n", "uid": "u", "labels": {"a": "b"}, "managedFields": [{}]},
            "spec": {"containers": []}, "status": {"phase": "Running"}
        });
        let lean = metadata_only(&object_from_value(&full).unwrap());
        let lean: Value = serde_json::from_str(&lean.json).unwrap();
        assert_eq!(
            lean,
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "p", "namespace": "n", "uid": "u", "labels": {"a": "b"}}})
        );
    }
}
