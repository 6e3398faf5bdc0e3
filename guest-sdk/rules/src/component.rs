//! The component's exports: each one the native function of the same name.
// The canonical ABI glue wit-bindgen generates for the exports is unsafe by nature; this
// module holds nothing else.
#![allow(unsafe_code)]

use crate::{ActionKind, ValueRule};
use exports::wasmloop::rules::cache_rules::Guest as CacheRules;
use exports::wasmloop::rules::rules::{ActionKind as WitKind, Guest, Phase as WitPhase, ValueRule as WitRule};
use wasmloop_contract::action::Phase;

wit_bindgen::generate!({
    path: "../../wit/rules",
    world: "contract-rules",
});

struct Rules;

impl Guest for Rules {
    fn check_value(rule: WitRule, value: String) -> Option<String> {
        let rule = match rule {
            WitRule::PluginName => ValueRule::PluginName,
            WitRule::Name => ValueRule::Name,
            WitRule::Namespace => ValueRule::Namespace,
            WitRule::Kind => ValueRule::Kind,
            WitRule::ApiVersion => ValueRule::ApiVersion,
            WitRule::Uid => ValueRule::Uid,
            WitRule::EventReason => ValueRule::EventReason,
            WitRule::EventAction => ValueRule::EventAction,
            WitRule::Finalizer => ValueRule::Finalizer,
        };
        crate::check_value(rule, &value)
    }

    fn check_selector(selector: String) -> Option<String> {
        crate::check_selector(&selector)
    }

    fn selector_matches(selector: String, labels: Vec<(String, String)>) -> Result<bool, String> {
        crate::selector_matches(&selector, &labels)
    }

    fn check_manifest(manifest: String) -> Option<String> {
        crate::check_manifest(&manifest)
    }

    fn check_response(actions: Vec<WitKind>, failed: bool, phase: WitPhase, prune_allowed: bool) -> Option<String> {
        let kinds: Vec<ActionKind> = actions
            .into_iter()
            .map(|kind| match kind {
                WitKind::Apply => ActionKind::Apply,
                WitKind::Delete => ActionKind::Delete,
                WitKind::Patch => ActionKind::Patch,
                WitKind::Status => ActionKind::Status,
                WitKind::Event => ActionKind::Event,
                WitKind::Prune => ActionKind::Prune,
            })
            .collect();
        let phase = match phase {
            WitPhase::Apply => Phase::Apply,
            WitPhase::Cleanup => Phase::Cleanup,
            WitPhase::Deleted => Phase::Deleted,
        };
        crate::check_response(&kinds, failed, phase, prune_allowed)
    }

    fn check_action(action: String, deleted: bool) -> Option<String> {
        crate::check_action(&action, deleted)
    }
}

impl CacheRules for Rules {
    fn holds(manifest: String, object: String) -> Result<bool, String> {
        crate::cache_holds(&manifest, &object)
    }

    fn index_keys(manifest: String, index: String, object: String) -> Result<Vec<String>, String> {
        crate::index_keys(&manifest, &index, &object)
    }
}

export!(Rules);
