//! A plugin's response of any shape through the host decode (`action::decode`, and
//! `decode_failure` for a failed call): what it accepts names only objects whose kind,
//! namespace and name parse, each within what the manifest grants (owned Deployments in the
//! primary's namespace, Secrets in the granted namespaces, Nodes), and every refusal or
//! failure text is bounded.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmloop_contract::names::{Gvk, Name, Namespace};
use wasmloop_contract::validate::MAX_FOREIGN_TEXT;
use wasmloop_sandbox::fuzzing::{Decoded, ResponseInput, decode};
use wasmloop_sandbox::{Action, CallFailure};

/// The longest refusal: the host's sentence around values quoted cut.
const MAX_REFUSAL: usize = 2048;

/// What the fuzzed manifest lets a plugin write: the kind and the namespace it writes in.
struct Granted<'a> {
    primary: Option<&'a str>,
    secrets: &'a [String],
}

impl Granted<'_> {
    /// Whether `kind` in `namespace` (none: the primary's, or none for a cluster-scoped kind)
    /// is within the manifest: the one place the decode may settle an object.
    fn covers(&self, kind: &Gvk, namespace: Option<&str>) -> bool {
        let placed = namespace.or(self.primary);
        match (kind.group().as_str(), kind.kind().as_str()) {
            ("apps", "Deployment") => placed.is_some() && placed == self.primary,
            ("", "Secret") => placed.is_some_and(|ns| self.secrets.iter().any(|g| g == ns)),
            ("", "Node") => true,
            _ => false,
        }
    }
}

/// The kind and place of an applied object, all parsed.
fn applied(object: &serde_json::Value) -> Option<(Gvk, Option<String>)> {
    let text = |p: &str| object.pointer(p).and_then(serde_json::Value::as_str);
    let (api_version, kind, name) = (text("/apiVersion")?, text("/kind")?, text("/metadata/name")?);
    Name::parse(name).ok()?;
    let namespace =
        text("/metadata/namespace").map(|ns| Namespace::parse(ns).map(|n| n.to_string())).transpose().ok()?;
    Some((Gvk::from_api_version(api_version, kind).ok()?, namespace))
}

fn accepted(actions: &[Action], granted: &Granted<'_>) {
    for action in actions {
        match action {
            Action::Apply(apply) => {
                let object = &apply.object;
                let (kind, namespace) = applied(object).unwrap_or_else(|| panic!("accepted unparsed: {object}"));
                assert!(granted.covers(&kind, namespace.as_deref()), "accepted outside the grants: {object}");
                assert!(
                    apply.uid.as_deref().is_none_or(|u| wasmloop_contract::validate::uid(u).is_ok()),
                    "{:?}",
                    apply.uid
                );
            }
            Action::Delete(target) | Action::Patch { target, .. } => {
                let kind = target.gvk().unwrap_or_else(|e| panic!("{target:?}: {e}"));
                let namespace = target.namespace.as_ref().map(|n| n.as_str());
                assert!(granted.covers(&kind, namespace), "accepted outside the grants: {target:?}");
            }
            Action::Event { message, .. } => assert!(message.len() <= MAX_FOREIGN_TEXT, "{}", message.len()),
            Action::Status(status) => assert!(status.is_object()),
        }
    }
}

fn refused(failure: &CallFailure) {
    let text = failure.to_string();
    assert!(text.len() <= MAX_REFUSAL, "a refusal of {} bytes: {text:.300}", text.len());
}

fuzz_target!(|input: ResponseInput| {
    let (primary, secrets) = (input.primary_namespace.clone(), input.grant_namespaces.clone());
    let granted = Granted { primary: primary.as_deref(), secrets: &secrets };
    match decode(input) {
        Decoded::ManifestRefused(why) => assert!(why.len() <= MAX_REFUSAL, "{why:.300}"),
        Decoded::Response(Ok(response)) => accepted(&response.actions, &granted),
        Decoded::Response(Err(failure)) | Decoded::Failure(Err(failure)) => refused(&failure),
        Decoded::Failure(Ok(failure)) => {
            let CallFailure::Plugin { message, .. } = &failure else {
                panic!("a plugin's failure decoded as {failure:?}");
            };
            assert!(message.len() <= MAX_FOREIGN_TEXT, "a message of {} bytes", message.len());
        }
    }
});
