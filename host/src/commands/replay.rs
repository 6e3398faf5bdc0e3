//! `wasmloop replay`: every case `--record-dir` recorded for a plugin, run again offline
//! against another version of it; per case `same`, `changed`, `new error`, `fixed` or
//! `not recorded`, with a diff, and a summary.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use serde_json::{Value, json};
use wasmloop_runtime::compare::{Verdict, diff, judge};
use wasmloop_runtime::record::{Case, outcome};
use wasmloop_sandbox::Plugin;

use super::common;
use crate::cli::{ReplayArgs, ReplayOutput};
use crate::replay::ReplayCache;

/// Exit code when any case replayed other than `same` (bad input and load errors exit 1).
pub const EXIT_CHANGED: u8 = 2;
/// A case file larger than this is not one the host wrote.
const CASE_FILE_LIMIT: u64 = 64 << 20;
/// The most case files one replay reads.
const MAX_CASES: usize = 100_000;

pub(super) fn run(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let sandbox = common::sandbox(&args.sandbox, None)?;
    common::block_on(replay(args, &sandbox))?
}

async fn replay(args: &ReplayArgs, sandbox: &wasmloop_sandbox::Sandbox) -> anyhow::Result<ExitCode> {
    let plugin = common::load(sandbox, &args.plugin, &args.sandbox).await.context("cannot load the plugin")?;
    let name = plugin.manifest().name.clone();
    let files = case_files(&args.dir)?;
    let mut results = Vec::new();
    for file in &files {
        let case = read_case(file)?;
        // By name: cases of a plugin ConfigMap's plugin are filed as NAMESPACE/NAME (replay
        // one namespace's by naming its directory, DIR/NAMESPACE.NAME).
        if case.plugin.name() != name {
            continue;
        }
        results.push((file.clone(), replay_one(&plugin, &case, file).await?));
    }
    anyhow::ensure!(
        !results.is_empty(),
        "no case of plugin {name} under {}; record some with `wasmloop run --record-dir {}`",
        args.dir.display(),
        args.dir.display()
    );
    let changed = results.iter().filter(|(_, r)| r.verdict != Verdict::Same).count();
    match args.output {
        ReplayOutput::Text => print_text(&plugin, &results),
        ReplayOutput::Json => print_json(&plugin, &results)?,
    }
    Ok(if changed == 0 { ExitCode::SUCCESS } else { ExitCode::from(EXIT_CHANGED) })
}

/// How one case replayed.
struct Replayed {
    verdict: Verdict,
    diff: String,
    missing: Vec<String>,
}

async fn replay_one(plugin: &Plugin, case: &Case, file: &Path) -> anyhow::Result<Replayed> {
    let request = crate::replay::request_of(case).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let cache = Arc::new(ReplayCache::new(case.lookups.clone()));
    let result = plugin.reconcile(&request, cache.clone()).await;
    let now = outcome(&result);
    let missing = cache.missing();
    Ok(Replayed {
        verdict: judge(&case.outcome, &now, &missing),
        diff: diff(&case.outcome, &now, ("recorded", "replayed")),
        missing,
    })
}

/// The `.yaml` files under `dir`, a directory per plugin or flat, in name (time) order.
fn case_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let listing = |d: &Path| -> anyhow::Result<Vec<PathBuf>> {
        let entries =
            std::fs::read_dir(d).with_context(|| format!("cannot read the case directory {}", d.display()))?;
        Ok(entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
    };
    let mut files = Vec::new();
    for path in listing(dir)? {
        let found = if path.is_dir() { listing(&path)? } else { vec![path] };
        files.extend(found.into_iter().filter(|p| p.extension().is_some_and(|e| e == "yaml")));
        anyhow::ensure!(
            files.len() <= MAX_CASES,
            "{} holds more than {MAX_CASES} cases; replay a part of it",
            dir.display()
        );
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

fn read_case(file: &Path) -> anyhow::Result<Case> {
    let text = crate::input::read_bounded(file, CASE_FILE_LIMIT, "a case `--record-dir` wrote")?;
    crate::replay::parse_case(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}

fn summary(results: &[(PathBuf, Replayed)]) -> Vec<(Verdict, usize)> {
    [Verdict::Same, Verdict::Changed, Verdict::NewError, Verdict::Fixed, Verdict::NotRecorded]
        .into_iter()
        .map(|v| (v, results.iter().filter(|(_, r)| r.verdict == v).count()))
        .collect()
}

fn print_text(plugin: &Plugin, results: &[(PathBuf, Replayed)]) {
    for (file, replayed) in results {
        println!("{:<12} {}", replayed.verdict.text(), file.display());
        for question in &replayed.missing {
            println!("    not recorded: {question}");
        }
        if replayed.verdict != Verdict::Same {
            for line in replayed.diff.lines() {
                println!("    {line}");
            }
        }
    }
    let counts: Vec<String> = summary(results).into_iter().map(|(v, n)| format!("{n} {}", v.text())).collect();
    let manifest = plugin.manifest();
    println!(
        "replayed {} cases with plugin {} {} (sha256 {}): {}",
        results.len(),
        manifest.name,
        manifest.version,
        &plugin.digest()[..12],
        counts.join(", ")
    );
}

fn print_json(plugin: &Plugin, results: &[(PathBuf, Replayed)]) -> anyhow::Result<()> {
    let cases: Vec<Value> = results
        .iter()
        .map(|(file, r)| {
            json!({"case": file.display().to_string(), "result": r.verdict, "diff": r.diff, "notRecorded": r.missing})
        })
        .collect();
    let summary: serde_json::Map<String, Value> =
        summary(results).into_iter().map(|(v, n)| (v.text().replace(' ', "-"), json!(n))).collect();
    let manifest = plugin.manifest();
    let out = json!({"plugin": manifest.name, "version": manifest.version, "digest": plugin.digest(),
                     "cases": cases, "summary": summary});
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
