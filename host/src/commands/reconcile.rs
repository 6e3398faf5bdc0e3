//! `wasmloop reconcile`: one reconcile with no cluster; the actions go to stdout.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use serde_json::Value;
use wasmloop_sandbox::{CallFailure, Phase, Request, Response, object_from_value};

use super::common;
use crate::cli::{PhaseArg, ReconcileArgs};
use crate::input::{read_config, read_object, read_objects};
use crate::offline_cache::OfflineCache;

fn envelope(value: &Value, file: &std::path::Path) -> anyhow::Result<wasmloop_sandbox::Object> {
    object_from_value(value).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}

pub(super) fn run(args: &ReconcileArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.as_deref().map(read_config).transpose()?.unwrap_or_else(|| "{}".into());
    let mut cache = OfflineCache::default();
    for file in &args.cache {
        for object in read_objects(file)? {
            cache.insert(object).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        }
    }
    if let Some(file) = &args.map {
        let related = read_object(file)?;
        let object = envelope(&related, file)?;
        let sandbox = common::sandbox(&args.sandbox, None)?;
        return common::block_on(map(args, &sandbox, (object, related), config, cache))?;
    }
    let object_file = args.object.as_deref().expect("clap requires --object without --map");
    let primary = read_object(object_file)?;
    let owned: Vec<(Value, &std::path::Path)> = args
        .owned
        .iter()
        .map(|f| read_objects(f).map(|objs| objs.into_iter().map(|o| (o, f.as_path())).collect::<Vec<_>>()))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    let previous = args.previous.as_deref().map(|f| envelope(&read_object(f)?, f)).transpose()?;
    let object = envelope(&primary, object_file)?;
    let owned_objects: Vec<_> = owned.iter().map(|(o, f)| envelope(o, f)).collect::<anyhow::Result<_>>()?;
    // As in the host, the primary and its children are in the cache too.
    cache.insert_object(object.clone(), primary);
    for (envelope, (value, _)) in owned_objects.iter().zip(owned) {
        cache.insert_object(envelope.clone(), value);
    }
    let mut request = Request {
        object,
        owned: owned_objects,
        phase: match args.phase {
            PhaseArg::Apply => Phase::Apply,
            PhaseArg::Cleanup => Phase::Cleanup,
            PhaseArg::Deleted => Phase::Deleted,
        },
        previous,
        attempt: args.attempt,
        config,
        triggers: Vec::new(),
        triggers_dropped: 0,
    };
    if let Some(file) = &args.triggers {
        (request.triggers, request.triggers_dropped) = read_triggers(file)?;
    }

    let sandbox = common::sandbox(&args.sandbox, None)?;
    common::block_on(reconcile(args, &sandbox, request, cache))?
}

/// The triggers a file lists, as the host hands them over: the newest [`triggers::MAX`], and
/// how many older ones were dropped.
fn read_triggers(file: &std::path::Path) -> anyhow::Result<(Vec<wasmloop_sandbox::Trigger>, u32)> {
    let text = read_config(file)?;
    let listed: Value = serde_json::from_str(&text).context("the triggers file parses")?;
    let Value::Array(listed) = listed else {
        anyhow::bail!("{}: give a list of triggers, oldest first (`- resync`)", file.display());
    };
    let mut triggers = Vec::with_capacity(listed.len());
    for (i, value) in listed.iter().enumerate() {
        let trigger = wasmloop_sandbox::triggers::of(value).ok_or_else(|| {
            let shown = wasmloop_sandbox::validate::cut(value.to_string(), wasmloop_sandbox::validate::MAX_QUOTED);
            anyhow::anyhow!(
                "{}: trigger [{i}] {shown} is none the contract has, or names its object by an invalid apiVersion, kind, name or namespace: write primaryChanged {{old, new}}, ownedChanged REF, relatedChanged REF, conflict {{target, fields, more}}, resync, requeue or retry (REF: {{apiVersion, kind, name, namespace}})",
                file.display()
            )
        })?;
        triggers.push(trigger);
    }
    let dropped = triggers.len().saturating_sub(wasmloop_sandbox::triggers::MAX);
    triggers.drain(..dropped);
    Ok((triggers, u32::try_from(dropped).unwrap_or(u32::MAX)))
}

async fn reconcile(
    args: &ReconcileArgs,
    sandbox: &wasmloop_sandbox::Sandbox,
    mut request: Request,
    mut cache: OfflineCache,
) -> anyhow::Result<ExitCode> {
    let plugin = common::load(sandbox, &args.plugin, &args.sandbox).await.context("cannot load the plugin")?;
    // What the host's informers would hand this plugin.
    for dropped in cache.hold_for(plugin.manifest()) {
        eprintln!(
            "note: {dropped} is not in plugin {}'s cache: no selector of its watches of that kind selects it, and the host would not cache it either",
            plugin.manifest().name
        );
    }
    for object in std::iter::once(&mut request.object).chain(&mut request.owned).chain(&mut request.previous) {
        crate::offline_cache::strip_object(plugin.manifest(), object);
    }
    let primary_kind = &plugin.manifest().primary.kind;
    if !primary_kind.matches(&request.object.api_version, &request.object.kind) {
        let held = request.object.gvk().map(|kind| kind.to_string()).unwrap_or_else(|_| {
            let quoted = wasmloop_sandbox::validate::quoted;
            format!("{} {}", quoted(&request.object.api_version), quoted(&request.object.kind))
        });
        anyhow::bail!(
            "plugin {} reconciles {primary_kind}, but {} holds a {held}; pass a {primary_kind} object with --object",
            plugin.manifest().name,
            args.object.as_deref().unwrap_or(std::path::Path::new("--object")).display(),
        );
    }
    match plugin.reconcile(&request, Arc::new(cache)).await {
        Ok(response) => {
            common::print(&response, args.output)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("error: {error}");
            eprintln!("event: Warning {}", error.failure.event_reason());
            let retry = match &error.failure {
                CallFailure::Plugin { transient: true, retry_after: Some(after), .. } => {
                    format!(
                        "after {} ms, as the plugin asked (a host holds it to its requeue floor)",
                        after.as_millis()
                    )
                }
                f if f.is_transient() => "with backoff".to_owned(),
                _ => "when the object or the plugin changes".to_owned(),
            };
            eprintln!("retry: {retry}");
            // What the host still carries out: the status and events the plugin sent with it.
            if let CallFailure::Plugin { actions, .. } = &error.failure
                && !actions.is_empty()
            {
                common::print(&Response { actions: actions.clone(), requeue_after: None, prune: false }, args.output)?;
            }
            Ok(ExitCode::from(common::EXIT_PLUGIN_ERROR))
        }
    }
}

/// `--map`: the primaries the plugin's `map` names for a changed related object, printed as
/// references (or the error, as for a reconcile).
async fn map(
    args: &ReconcileArgs,
    sandbox: &wasmloop_sandbox::Sandbox,
    (mut related, value): (wasmloop_sandbox::Object, Value),
    config: String,
    mut cache: OfflineCache,
) -> anyhow::Result<ExitCode> {
    let plugin = common::load(sandbox, &args.plugin, &args.sandbox).await.context("cannot load the plugin")?;
    let manifest = plugin.manifest();
    let watched = related.gvk().ok().filter(|kind| manifest.watches.iter().any(|w| w.kind == *kind));
    let Some(kind) = watched else {
        let file = args.map.as_deref().unwrap_or(std::path::Path::new("--map")).display();
        anyhow::bail!(
            "plugin {} watches no {} {}, which {file} holds; pass an object of a kind under its watches",
            manifest.name,
            wasmloop_sandbox::validate::quoted(&related.api_version),
            wasmloop_sandbox::validate::quoted(&related.kind),
        );
    };
    // As the host's informers hold it: the related object is in the cache too, unless it went.
    if !args.deleted {
        cache.insert_object(related.clone(), value);
    }
    for dropped in cache.hold_for(manifest) {
        eprintln!(
            "note: {dropped} is not in plugin {}'s cache: its selectors of that kind do not select it",
            manifest.name
        );
    }
    crate::offline_cache::strip_object(manifest, &mut related);
    tracing::debug!(%kind, deleted = args.deleted, "running map");
    match plugin.map(&related, args.deleted, &config, Arc::new(cache)).await {
        Ok(refs) => {
            common::print(&serde_json::json!({ "requeue": refs }), args.output)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("error: {error}");
            Ok(ExitCode::from(common::EXIT_PLUGIN_ERROR))
        }
    }
}
