//! `host.yaml` of any text (`HostConfig::parse`): an accepted one has only plugin keys of
//! the form `NAME` or `NAMESPACE/NAME`, each found again by the realm and name it spells.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmloop::host_config::HostConfig;

fuzz_target!(|text: &str| {
    let Ok(config) = HostConfig::parse(text) else {
        return;
    };
    for key in config.plugins.keys() {
        let (realm, name) = key.split_once('/').unwrap_or(("", key));
        assert!(!name.contains('/'), "{key}");
        assert!(config.settings_for(realm, name).is_some(), "{key} is not found by its realm and name");
    }
});
