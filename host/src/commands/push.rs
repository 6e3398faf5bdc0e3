//! `wasmloop push`: a plugin component to an OCI registry, as a Wasm OCI artifact.

use std::io::BufRead as _;
use std::process::ExitCode;

use oci_client::secrets::RegistryAuth;

use super::common;
use crate::cli::PushArgs;
use crate::oci::{self, Described, RegistryPolicy};

pub(super) fn run(args: &PushArgs) -> anyhow::Result<ExitCode> {
    let sandbox = common::sandbox(&args.sandbox, None)?;
    // One read: the bytes validated are the bytes pushed.
    let component = common::read_component(&args.plugin)?;
    let origin = args.plugin.display().to_string();
    let plugin = common::block_on(common::load_bytes(&sandbox, &component, &origin, &args.sandbox))??;
    let auth = match &args.username {
        Some(user) => {
            let mut password = String::new();
            std::io::stdin().lock().read_line(&mut password)?;
            RegistryAuth::Basic(user.clone(), password.trim_end_matches(['\r', '\n']).to_owned())
        }
        None => RegistryAuth::Anonymous,
    };
    let policy = RegistryPolicy {
        plain_http: if args.plain_http { vec![args.reference.registry().to_owned()] } else { Vec::new() },
        allowed: Vec::new(),
    };
    let manifest = plugin.manifest();
    let version = wasmloop_sandbox::version_of(manifest.contract);
    let exports = format!("wasmloop:plugin/plugin@{version}");
    let described = Described { name: &manifest.name, version: &manifest.version, exports: &exports };
    let pinned = common::block_on(oci::push(&args.reference, &component, &described, &auth, &policy))?
        .map_err(|e| anyhow::anyhow!("cannot push {}: {e}", args.reference))?;
    eprintln!(
        "pushed plugin {} {} ({} bytes); ship it with: wasmloop bundle {} --name {} --ref {pinned}",
        manifest.name,
        manifest.version,
        component.len(),
        args.plugin.display(),
        manifest.name
    );
    println!("{pinned}");
    Ok(ExitCode::SUCCESS)
}
