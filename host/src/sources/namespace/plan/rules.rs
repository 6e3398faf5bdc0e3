//! The rules an offer is held to that need more than its own content, and the words of the
//! refusals: what keeps serving, which `WasmPlugin` claims a name, whom a plugin acts as, and
//! which key must have signed it.

use wasmloop_runtime::identity::{AccountChoice, SERVICE_ACCOUNT_ANNOTATION, ServiceAccount};
use wasmloop_sandbox::SourceKind;

use super::{Key, Offer, State, World, claimant, yielding};
use crate::pinning;

impl State {
    /// What keeps serving from object `key` when its newest offer is refused, as the refusal's
    /// last words; under `failurePolicy: Stop`, nothing does.
    pub(super) fn keeps(&self, key: &Key, world: &dyn World) -> String {
        if self.seen.get(key).is_some_and(|seen| seen.stop) {
            return String::new();
        }
        self.keeps_anyway(key, world)
    }

    /// What keeps serving from object `key`, whatever its failure policy.
    pub(super) fn keeps_anyway(&self, key: &Key, world: &dyn World) -> String {
        match world.serving(&self.source(key)) {
            Some((id, version)) => format!(" (plugin {} {version} keeps serving)", id.name()),
            None => String::new(),
        }
    }

    /// Why plugin `plugin` may not load from a plugin ConfigMap here: a `WasmPlugin` of this
    /// namespace claims it ([`claimant`]).
    pub(super) fn claimed(&self, plugin: &str) -> Option<String> {
        let serving = self
            .latest
            .values()
            .filter(|p| p.spec["track"]["mode"] != "shadow")
            .map(|p| p.metadata.name.as_deref().unwrap_or_default());
        let claimant = claimant(plugin, serving)?;
        Some(format!(
            "plugin {plugin} is claimed by WasmPlugin {}/{claimant}: a WasmPlugin wins over a plugin ConfigMap of the same plugin name, on every replica and after every restart; delete this ConfigMap, or that WasmPlugin",
            self.namespace
        ))
    }

    /// The plugin ConfigMaps whose last offer named plugin `plugin`, which a `WasmPlugin` of
    /// the name takes it from.
    pub(super) fn yielding(&self, plugin: &str) -> Vec<Key> {
        let mut keys: Vec<Key> = yielding(plugin, &self.seen).into_iter().cloned().collect();
        keys.sort_by(|a, b| a.name.cmp(&b.name));
        keys
    }

    /// Whom object `key`'s plugin acts as: the ServiceAccount it names, or the one named like
    /// the plugin; a shadow acts as nobody (it writes nothing).
    pub(super) fn account_of(
        &self,
        key: &Key,
        shadow: bool,
        named: Option<&str>,
        world: &dyn World,
    ) -> Result<AccountChoice, String> {
        let Some(named) = named.filter(|_| !shadow) else {
            return Ok(AccountChoice::LikePlugin { namespace: self.namespace.to_string() });
        };
        // The ServiceAccount is always in the object's namespace: whoever may write plugins
        // there chooses among that namespace's accounts, as a pod's author chooses among its
        // namespace's.
        ServiceAccount::new(&self.namespace, named).map(AccountChoice::Named).map_err(|error| {
            let field = match key.kind {
                SourceKind::ConfigMap => format!("the {SERVICE_ACCOUNT_ANNOTATION} annotation"),
                SourceKind::WasmPlugin => "spec.serviceAccountName".to_owned(),
            };
            format!("{field}: {error}; name a ServiceAccount of namespace {}{}", self.namespace, self.keeps(key, world))
        })
    }

    /// `signature.keyRef`'s demand: the host trusts keys, that key among them, and it signed
    /// the component (whose signature [`pinning::check`] then verifies).
    pub(super) fn signed_by(&self, offer: &Offer) -> Result<(), String> {
        let Some(wanted) = &offer.signer else { return Ok(()) };
        let Some(trusted) = &self.trusted else {
            return Err(format!(
                "spec.signature.keyRef asks for a signature by key {wanted}, and the host trusts no keys; start it with --trusted-keys"
            ));
        };
        if !trusted.ids().split(", ").any(|id| id == wanted) {
            return Err(format!(
                "spec.signature.keyRef names key {wanted}, which the host does not trust (trusted: {}); name one of them, or add the key to --trusted-keys",
                trusted.ids()
            ));
        }
        let signer = offer.payload.signature.as_deref().and_then(pinning::signature_key_id);
        match signer {
            Some(signer) if signer == *wanted => Ok(()),
            Some(signer) => Err(format!(
                "the component is signed by key {signer}, and spec.signature.keyRef asks for key {wanted}; sign it with that key, or name {signer}"
            )),
            None => Err(format!(
                "spec.signature.keyRef asks for a signature by key {wanted}, and the ConfigMap has none in data[\"{}\"]; bundle it with `--signature plugin.wasm.minisig`",
                pinning::SIGNATURE_KEY
            )),
        }
    }
}
