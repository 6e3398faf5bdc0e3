//! `host.yaml` of any text (`HostConfig::parse`): an accepted one has only plugin keys of
//! the form `NAME` or `NAMESPACE/NAME`, each found again by the realm and name it spells.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmloop::host_config::HostConfig;

fuzz_target!(|text: &str| {
    let Ok(config) = HostConfig::parse(text) else {
        return;
    };
    for id in config.plugins.keys() {
        let realm = id.realm().map_or("", |realm| realm.as_str());
        assert!(!id.name().contains('/'), "{id}");
        assert!(config.settings_for(realm, id.name()).is_some(), "{id} is not found by its realm and name");
    }
});
