//! `docs/architecture.md` is a short, true map: at most 300 lines, every name it puts in
//! backticks exists in the repository, and every file it links to is there. Details live in
//! the modules' `//!` docs, which the compiler keeps next to the code; the map only says where.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

const MAP: &str = "docs/architecture.md";
const MAX_LINES: usize = 300;

/// Source files whose words count as names: what the code, the contract and the SDKs define.
const SOURCE: &[&str] = &["rs", "wit", "py", "js", "json"];
/// Files a verbatim text (a label key, a kebab-case name, a WIT package) may be found in too.
const CONFIG: &[&str] = &["yaml", "toml"];

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn map() -> String {
    std::fs::read_to_string(repo().join(MAP)).unwrap_or_else(|e| panic!("cannot read {MAP}: {e}"))
}

#[test]
fn architecture_map_is_at_most_300_lines() {
    let lines = map().lines().count();
    assert!(
        lines <= MAX_LINES,
        "{MAP} has {lines} lines, over {MAX_LINES}: it is a map; move the details into the `//!` docs of the module they describe"
    );
}

/// Every inline code span of the map outside fenced blocks (the pipeline picture is a fenced
/// block: a drawing, not names) is checked by the first rule its shape matches:
/// - `//!`, the doc-comment marker, is the one span exempted: it names no item;
/// - a command line (`wasmloop SUB ...`, `cargo ...`, `kubectl ...`, `python ...`, `node ...`,
///   `npm ...`, `scripts/NAME ...`): `wasmloop`'s subcommand must be a variant of the CLI
///   (`host/src/cli.rs`, `host/src/cli/cluster.rs`) and its `--flags` declared in the
///   host's sources; `cargo -p NAME` must name a package; any token holding a `/` must exist;
/// - a flag alone (`--shard`): declared in the host's sources, as above;
/// - an HTTP path (`/metrics`): a string literal of the host's sources;
/// - a WIT package (`wasmloop:plugin@0.3.0`) or a label, annotation or API group key
///   (`wasmloop.dev/plugin`, `coordination.k8s.io/v1`): found verbatim in a source or config
///   file;
/// - a path (holding a `/`, or ending in a file extension): a file or, with a trailing `/`, a
///   directory relative to the repository's root; `path:line` forms are refused;
/// - a Rust-like name (`Foo`, `foo_bar`, `Foo::bar`, `module::item`, `macro!`, `f()`): every
///   `::` segment a whole word of some `.rs`, `.wit`, `.py`, `.js` or `.json` file, and all of
///   them words of one such file (where the item is defined, or used);
/// - a kebab-case name (a crate, a WIT item, a target such as `wasm32-wasip2`): a whole token
///   of a source or config file;
/// - anything else fails: reword it, or give it a rule here.
///
/// Files are found by walking the repository, skipping `target*`, `node_modules`, hidden
/// directories (`.git`, `.venv`) and this file, whose examples name what does not exist.
#[test]
fn every_name_the_map_mentions_exists() {
    let repo = repo();
    let index = Index::of(&repo);
    let missing: Vec<String> = code_spans(&map())
        .into_iter()
        .filter_map(|span| index.check(&repo, &span).err().map(|why| format!("  `{span}`: {why}")))
        .collect();
    assert!(
        missing.is_empty(),
        "{MAP} mentions {} name(s) the repository does not have; fix the map (or the rule in this test):\n{}",
        missing.len(),
        missing.join("\n")
    );
}

/// Relative links (`[text](path#anchor)`) lead to a file or directory; web links and anchors
/// within the page are not followed.
#[test]
fn every_file_the_map_links_to_exists() {
    let docs = repo().join("docs");
    let text = map();
    let broken: Vec<&str> = text
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|target| !target.starts_with("http") && !target.starts_with('#'))
        .filter(|target| !docs.join(target.split('#').next().unwrap_or_default()).exists())
        .collect();
    assert!(broken.is_empty(), "{MAP} links to what is not there: {broken:?}");
}

/// The inline code spans of `markdown`, fenced blocks left out. A span may run over a line
/// break, which reads as a space, as CommonMark has it.
fn code_spans(markdown: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            prose.push_str(line);
        }
        prose.push('\n');
    }
    let mut spans = Vec::new();
    let mut rest = prose.as_str();
    while let Some(open) = rest.find('`') {
        let ticks = rest[open..].chars().take_while(|&c| c == '`').count();
        let fence = "`".repeat(ticks);
        let after = &rest[open + ticks..];
        let Some(close) = after.find(&fence) else { break };
        spans.push(after[..close].replace('\n', " ").trim().to_owned());
        rest = &after[close + ticks..];
    }
    spans
}

/// What the repository holds: the words of its sources, and the text of its sources and
/// configuration files.
struct Index {
    /// The words of each source file.
    words: Vec<HashSet<String>>,
    texts: String,
    host_sources: String,
    cli: String,
    packages: HashSet<String>,
}

impl Index {
    fn of(repo: &Path) -> Index {
        let mut index = Index {
            words: Vec::new(),
            texts: String::new(),
            host_sources: String::new(),
            cli: String::new(),
            packages: HashSet::new(),
        };
        let host_src = repo.join("host/src");
        // This file names what does not exist, to show the check refuses it.
        for path in files(repo).into_iter().filter(|p| !p.ends_with("host/tests/architecture_map.rs")) {
            let extension = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
            let (source, config) = (SOURCE.contains(&extension), CONFIG.contains(&extension));
            if !source && !config {
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else { continue };
            let text = String::from_utf8_lossy(&bytes);
            if source {
                index.words.push(text.split(|c: char| !(c.is_alphanumeric() || c == '_')).map(str::to_owned).collect());
            }
            if extension == "rs" && path.starts_with(&host_src) {
                index.host_sources.push_str(&text);
                if path.ends_with("cli.rs") || path.ends_with("cli/cluster.rs") {
                    index.cli.push_str(&text);
                }
            }
            if path.file_name().is_some_and(|n| n == "Cargo.toml") {
                let names = text.lines().filter_map(|l| l.trim().strip_prefix("name = \"")?.strip_suffix('"'));
                index.packages.extend(names.map(str::to_owned));
            }
            index.texts.push_str(&text);
            index.texts.push('\n');
        }
        index
    }

    fn check(&self, repo: &Path, span: &str) -> Result<(), String> {
        if span == "//!" {
            return Ok(());
        }
        let first = span.split(' ').next().unwrap_or_default();
        let commands = ["wasmloop", "cargo", "kubectl", "python", "node", "npm"];
        if span.contains(' ') && (commands.contains(&first) || first.starts_with("scripts/")) {
            return self.command(repo, span);
        }
        if span.starts_with("--") {
            return self.flag(first);
        }
        if span.starts_with('/') {
            return found(
                self.host_sources.contains(&format!("\"{span}\"")),
                "no string literal of the host's sources",
            );
        }
        if is_wit_package(span) || is_key(span) {
            return found(self.texts.contains(span), "found verbatim in no source or config file");
        }
        if is_path(span) {
            return path_exists(repo, span);
        }
        if is_rust_name(span) {
            let bare = span.trim_end_matches('!').trim_end_matches("()");
            let segments: Vec<&str> = bare.split("::").collect();
            let missing: Vec<&str> =
                segments.iter().copied().filter(|s| !self.words.iter().any(|w| w.contains(*s))).collect();
            if !missing.is_empty() {
                return Err(format!("no source file has the word(s) {missing:?}"));
            }
            // `Type::method`, `module::item`: named together somewhere, as a definition is.
            let together = self.words.iter().any(|w| segments.iter().all(|s| w.contains(*s)));
            return found(together, "its segments are in no one source file together");
        }
        if is_kebab(span) {
            return found(self.has_token(span), "a whole token of no source or config file");
        }
        Err("a shape this test cannot check: reword it, or give it a rule here".into())
    }

    fn command(&self, repo: &Path, span: &str) -> Result<(), String> {
        let tokens: Vec<&str> = span.split_whitespace().collect();
        if tokens[0] == "wasmloop" {
            let sub = tokens[1];
            let mut letters = sub.chars();
            let variant: String = letters.next().map(|c| c.to_ascii_uppercase()).into_iter().chain(letters).collect();
            if !has_word(&self.cli, &variant) {
                return Err(format!("the CLI has no subcommand {sub}"));
            }
        }
        for pair in tokens.windows(2) {
            if tokens[0] == "cargo" && pair[0] == "-p" && !self.packages.contains(pair[1]) {
                return Err(format!("no package {}", pair[1]));
            }
        }
        for token in &tokens[1..] {
            if token.starts_with("--") {
                if tokens[0] == "wasmloop" {
                    self.flag(token)?;
                }
            } else if token.contains('/') && !token.contains("://") {
                path_exists(repo, token)?;
            }
        }
        if tokens[0].starts_with("scripts/") {
            path_exists(repo, tokens[0])?;
        }
        Ok(())
    }

    /// A `--flag`: clap derives it from a field (`pub flag_name:`), or it is named in
    /// `long = "flag-name"`.
    fn flag(&self, flag: &str) -> Result<(), String> {
        let name = flag.trim_start_matches('-').split('=').next().unwrap_or_default();
        let declared = self.host_sources.contains(&format!("pub {}:", name.replace('-', "_")))
            || self.host_sources.contains(&format!("\"{name}\""));
        found(declared, &format!("the host declares no flag --{name}"))
    }

    fn has_token(&self, token: &str) -> bool {
        let part = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
        self.texts.match_indices(token).any(|(at, _)| {
            let before = self.texts[..at].chars().next_back().is_none_or(|c| !part(c));
            let after = self.texts[at + token.len()..].chars().next().is_none_or(|c| !part(c));
            before && after
        })
    }
}

fn found(ok: bool, why: &str) -> Result<(), String> {
    if ok { Ok(()) } else { Err(why.to_owned()) }
}

fn has_word(text: &str, word: &str) -> bool {
    let part = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        text[..at].chars().next_back().is_none_or(|c| !part(c))
            && text[at + word.len()..].chars().next().is_none_or(|c| !part(c))
    })
}

fn path_exists(repo: &Path, span: &str) -> Result<(), String> {
    let (path, directory) = match span.strip_suffix('/') {
        Some(dir) => (dir, true),
        None => (span, false),
    };
    if path.rsplit_once(':').is_some_and(|(_, line)| line.chars().all(|c| c.is_ascii_digit())) {
        return Err("a path:line form: name the file alone".into());
    }
    let full = repo.join(path);
    match (full.exists(), directory) {
        (false, _) => Err("no such file or directory".into()),
        (true, true) if !full.is_dir() => Err("not a directory".into()),
        _ => Ok(()),
    }
}

/// `wasmloop:plugin@0.3.0`: namespace, package and version.
fn is_wit_package(span: &str) -> bool {
    let Some((name, version)) = span.split_once('@') else { return false };
    let Some((namespace, package)) = name.split_once(':') else { return false };
    [namespace, package].iter().all(|p| is_kebab(p) || p.chars().all(|c| c.is_ascii_lowercase()))
        && version.split('.').count() == 3
        && version.split('.').all(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// `wasmloop.dev/plugin`, `coordination.k8s.io/v1`: a DNS name with a dot, one `/` and a name.
fn is_key(span: &str) -> bool {
    let Some((domain, name)) = span.split_once('/') else { return false };
    let dns = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    domain.contains('.')
        && domain.chars().all(dns)
        && domain.rsplit('.').next().is_some_and(|tld| tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_lowercase()))
        && !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
}

fn is_path(span: &str) -> bool {
    let extension = span.rsplit_once('.').map(|(_, e)| e).unwrap_or_default();
    !span.contains(' ')
        && (span.contains('/')
            || (!extension.is_empty() && extension.len() <= 5 && extension.chars().all(|c| c.is_ascii_alphanumeric())))
}

fn is_rust_name(span: &str) -> bool {
    let bare = span.strip_suffix('!').or_else(|| span.strip_suffix("()")).unwrap_or(span);
    let word = |w: &str| {
        w.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    bare.split("::").all(word)
}

fn is_kebab(span: &str) -> bool {
    span.contains('-')
        && span.split('-').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
        && span.chars().next().is_some_and(|c| c.is_ascii_lowercase())
}

/// Every file under `root`, skipping build output, installed packages and hidden directories.
fn files(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                if !(name.starts_with('.') || name.starts_with("target") || name == "node_modules") {
                    pending.push(entry.path());
                }
            } else if kind.is_file() {
                found.push(entry.path());
            }
        }
    }
    found
}

#[test]
fn the_checker_tells_a_renamed_function_from_a_real_one() {
    let repo = repo();
    let index = Index::of(&repo);
    assert_eq!(index.check(&repo, "Registry::upsert"), Ok(()));
    assert!(index.check(&repo, "Registry::no_such_fn").is_err());
    assert!(index.check(&repo, "host/src/no_such_module.rs").is_err());
    assert!(index.check(&repo, "host/src/lib.rs:12").is_err());
    assert!(index.check(&repo, "wasmloop run --no-such-flag").is_err());
    assert!(index.check(&repo, "a sentence, not a name").is_err());
    assert_eq!(code_spans("a `b`\n```\n`c`\n```\nd `e\nf` ``g``"), ["b", "e f", "g"]);
}
