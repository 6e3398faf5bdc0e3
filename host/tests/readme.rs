//! README.md is a front door that works as written: its commands run, and its code is the
//! code of plugins that are built and tested.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap()
}

fn readme() -> String {
    std::fs::read_to_string(workspace().join("README.md")).unwrap()
}

/// The fenced blocks of `markdown` as (info string, body).
fn blocks(markdown: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else { continue };
        let body: Vec<&str> = lines.by_ref().take_while(|l| !l.starts_with("```")).collect();
        found.push((info.trim().to_owned(), body.join("\n")));
    }
    found
}

/// The first `sh` block of the section under the heading `heading` (up to the next `## `).
fn commands_under(markdown: &str, heading: &str) -> String {
    let (_, after) = markdown.split_once(&format!("\n{heading}\n")).unwrap_or_else(|| panic!("no heading {heading:?}"));
    let section = after.split("\n## ").next().unwrap();
    blocks(section)
        .into_iter()
        .find(|(info, _)| info == "sh")
        .unwrap_or_else(|| panic!("no sh block under {heading}"))
        .1
}

/// The second `sh` block under "## On a cluster": waiting on the example WasmPlugins, which
/// `run_incluster` runs as written once its in-cluster host serves them.
fn waits_on_a_cluster(markdown: &str) -> String {
    let (_, after) = markdown.split_once("\n## On a cluster\n").expect("an \"On a cluster\" section");
    let section = after.split("\n## ").next().unwrap();
    blocks(section).into_iter().filter(|(info, _)| info == "sh").nth(1).expect("a second sh block").1
}

/// Every `sh` block of the README, each run by a test or by CI as written.
#[test]
fn every_command_block_of_the_readme_is_one_that_a_test_or_ci_runs() {
    let text = readme();
    let mut known =
        ["## Try it", "## One plugin, three languages", "## On a cluster"].map(|h| commands_under(&text, h)).to_vec();
    known.push(waits_on_a_cluster(&text));
    assert!(
        std::fs::read_to_string(workspace().join("host/tests/run_incluster.rs"))
            .unwrap()
            .contains("waits_on_a_cluster"),
        "run_incluster runs the README's wait block"
    );
    for (info, body) in blocks(&text) {
        let language = info.split_whitespace().next().unwrap_or_default();
        if ["sh", "bash", "shell", "console", "zsh", "shell-session"].contains(&language) {
            assert!(known.contains(&body), "a README command block no test runs:\n{body}");
        }
    }
}

#[test]
fn ci_runs_the_readmes_two_commands_as_written() {
    let commands = commands_under(&readme(), "## Try it");
    let ci = std::fs::read_to_string(workspace().join(".ci/run")).unwrap();
    let ci_lines: Vec<&str> = ci.lines().map(str::trim).collect();
    let mut ran = Vec::new();
    for line in commands.lines() {
        let command = line.split(" #").next().unwrap().trim();
        assert!(["scripts/demo", "scripts/test"].contains(&command), "an unexpected quick-start command {command:?}");
        let at = ci_lines
            .iter()
            .position(|l| l.starts_with(command))
            .unwrap_or_else(|| panic!(".ci/run does not run {command}"));
        ran.push(at);
    }
    assert!(ran.windows(2).all(|w| w[0] < w[1]), ".ci/run runs the demo first, then the suite: {ran:?}");
}

/// Each code block whose info string names a file (```rust plugins/foo-deployment/src/lib.rs)
/// is an excerpt of that file: its lines, stripped, are consecutive lines of the file, where a
/// line `// …` or `# …` marks a cut between two runs that follow each other in the file.
#[test]
fn the_readmes_plugin_code_is_excerpted_from_the_plugins_as_they_are() {
    let mut checked = 0;
    for (info, body) in blocks(&readme()) {
        let Some((_, path)) = info.split_once(' ') else { continue };
        let file = std::fs::read_to_string(workspace().join(path.trim())).unwrap_or_else(|e| panic!("{path}: {e}"));
        let lines: Vec<&str> = file.lines().map(str::trim).collect();
        let mut from = 0;
        let excerpt: Vec<&str> = body.lines().map(str::trim).collect();
        for run in excerpt.split(|l| *l == "// …" || *l == "# …") {
            let at = (from..=lines.len().saturating_sub(run.len()))
                .find(|&i| lines[i..i + run.len()] == *run)
                .unwrap_or_else(|| panic!("README's excerpt of {path} is not in it as written:\n{}", run.join("\n")));
            from = at + run.len();
        }
        checked += 1;
    }
    assert_eq!(checked, 3, "one excerpt per language");
}

#[test]
fn the_readmes_build_commands_for_the_three_languages_work_as_written() {
    let commands = commands_under(&readme(), "## One plugin, three languages");
    // What they write, gone first, so a component left by an earlier run cannot pass for one.
    let outputs = ["foo-py.wasm", "foo-js.wasm"].map(|f| workspace().join(f));
    for output in &outputs {
        let _ = std::fs::remove_file(output);
    }
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &commands])
        .current_dir(workspace())
        .env("PATH", path_without_python_tools())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the README's commands failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("kind: Deployment") && stdout.contains("Synced"), "not the Foo's actions:\n{stdout}");
    for output in &outputs {
        assert!(output.exists(), "{} was not built", output.display());
        std::fs::remove_file(output).unwrap();
    }
}

/// PATH without the directories that hold a componentize-py (a global install, pyenv's shims):
/// as on a fresh machine, the README's commands must find everything in the checkout's `.venv/`.
fn path_without_python_tools() -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept = std::env::split_paths(&path).filter(|dir| !dir.join("componentize-py").exists());
    std::env::join_paths(kept).expect("PATH's own entries join")
}
