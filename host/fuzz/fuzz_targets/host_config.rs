//! `host.yaml` of any text (`HostConfig::parse`): an accepted one has only plugin keys that
//! read back as the same id, each found again by the realm and name it spells.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmloop::host_config::HostConfig;

fuzz_target!(|text: &str| {
    let Ok(config) = HostConfig::parse(text) else {
        return;
    };
    for id in config.plugins.keys() {
        let realm = id.realm().map_or("", |realm| realm.as_str());
        assert_eq!(wasmloop_sandbox::PluginId::parse(id.as_str()).as_ref(), Ok(id), "{id} reads back as another id");
        assert!(config.settings_for(realm, id.name()).is_some(), "{id} is not found by its realm and name");
    }
});
