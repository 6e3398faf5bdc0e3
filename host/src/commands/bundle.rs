//! `wasmloop bundle`: the ConfigMap that ships a plugin, or a `WasmPlugin` and the ConfigMap
//! holding its component (`--wasmplugin`), on stdout.

use std::process::ExitCode;

use super::common;
use crate::cli::BundleArgs;
use crate::plugin_configmap::{self, Track};

pub(super) fn run(args: &BundleArgs) -> anyhow::Result<ExitCode> {
    let sandbox = common::sandbox(&args.sandbox, None)?;
    // Validate now, not when the host refuses it in the cluster.
    // One read: the bytes validated are the bytes pinned and shipped.
    let component = common::read_component(&args.plugin)?;
    let origin = args.plugin.display().to_string();
    let plugin = common::block_on(common::load_bytes(&sandbox, &component, &origin, &args.sandbox))??;
    let manifest_name = &plugin.manifest().name;
    anyhow::ensure!(
        *manifest_name == args.name,
        "{} is plugin {manifest_name:?}, not {:?}; pass --name {manifest_name}",
        args.plugin.display(),
        args.name
    );
    let config = args
        .config
        .as_deref()
        .map(|path| {
            let limit = plugin_configmap::CONFIGMAP_LIMIT as u64;
            let text = crate::input::read_bounded(path, limit, "the plugin's configuration (YAML or JSON)")?;
            serde_saphyr::from_str_with_options::<serde_json::Value>(&text, crate::input::yaml_options()).map_err(
                |e| anyhow::anyhow!("{} is not valid YAML or JSON: {}", path.display(), crate::input::yaml_error(&e)),
            )?;
            anyhow::Ok(text)
        })
        .transpose()?;
    let signature = args.signature.as_deref().map(read_signature).transpose()?;
    let track = if args.shadow { Track::Shadow } else { Track::Serving };
    let (name, namespace) = (&args.name, &args.namespace);
    let pushed = args
        .reference
        .as_ref()
        .map(|reference| plugin_configmap::Pushed { reference, pull_secret: args.pull_secret.as_deref() });
    anyhow::ensure!(
        !(args.wasmplugin && pushed.is_some() && signature.is_some()),
        "--signature with --ref and --wasmplugin: a WasmPlugin with an image is pinned by its digest, and the host reads signatures from a component's ConfigMap; drop --ref to ship the signed component in a ConfigMap, or drop --signature"
    );
    let mut configmap =
        plugin_configmap::build(name, namespace, &component, config.as_deref(), signature.as_deref(), track, pushed)?;
    if args.wasmplugin {
        let (component, plugin) = crate::wasmplugin::build(configmap, name, track, config.as_deref(), pushed)?;
        if let Some(component) = component {
            print!("{}---\n", yaml_of(&component, "v1", "ConfigMap")?);
        }
        print!("{}", serde_saphyr::to_string(&plugin)?);
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(named) = &args.configmap {
        wasmloop_sandbox::validate::name(named).map_err(|e| {
            anyhow::anyhow!("--configmap {named:?}: {e}; name the ConfigMap as Kubernetes names objects")
        })?;
        configmap.metadata.name = Some(named.clone());
    }
    print!("{}", yaml_of(&configmap, "v1", "ConfigMap")?);
    Ok(ExitCode::SUCCESS)
}

/// `object` as YAML, apiVersion and kind first, as kubectl prints them.
fn yaml_of(object: &impl serde::Serialize, api_version: &str, kind: &str) -> anyhow::Result<String> {
    let value = serde_json::to_value(object)?;
    let mut ordered = serde_json::json!({"apiVersion": api_version, "kind": kind});
    for key in ["metadata", "data", "binaryData"] {
        if let Some(field) = value.get(key) {
            ordered[key] = field.clone();
        }
    }
    Ok(serde_saphyr::to_string(&ordered)?)
}

/// A `.minisig` file, refused now rather than by the host if it is not a minisign signature.
/// Whether its key is trusted is the host's to say: `bundle` does not know the host's keys.
fn read_signature(path: &std::path::Path) -> anyhow::Result<String> {
    let text = crate::input::read_bounded(path, 4096, "a minisign signature (the .minisig file `minisign -S` writes)")?;
    minisign_verify::Signature::decode(&text).map_err(|e| {
        anyhow::anyhow!("{} is not a minisign signature ({e}); pass the file `minisign -S` wrote", path.display())
    })?;
    Ok(text)
}
