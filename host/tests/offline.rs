//! Golden tests: each plugin through the real `wasmloop` binary on YAML fixtures, and one
//! test per error a user can hit offline.
//!
//! The components are built on first use (`wasmloop_testenv::components`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::component;
use serde_json::Value;

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(path)
}

/// One compile cache per test binary run, so the first test compiles and the rest reuse.
///
/// It lives in the target directory, named after this process, and the caches of runs that
/// have exited are removed at first use: a `TempDir` in a static is never dropped, and left
/// ~300 MiB of compiled plugins in `/tmp` per run.
fn cache_dir() -> PathBuf {
    const PREFIX: &str = "offline-compile-cache-";
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let parent = Path::new(env!("CARGO_TARGET_TMPDIR"));
        for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let pid = name.to_str().and_then(|n| n.strip_prefix(PREFIX));
            if pid.is_some_and(|pid| !Path::new("/proc").join(pid).exists()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = parent.join(format!("{PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("compile cache dir");
        dir
    })
    .clone()
}

fn wasmloop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmloop"))
        .args(args)
        .env("WASMLOOP_CACHE_DIR", cache_dir())
        .env_remove("RUST_LOG")
        .env_remove("WASMLOOP_LOG")
        .output()
        .expect("wasmloop runs")
}

fn reconcile(plugin: &str, object: &str, extra: &[&str]) -> Output {
    let plugin = component(plugin);
    let object = fixture(object);
    let mut args = vec!["reconcile", "--plugin", plugin.to_str().unwrap(), "--object", object.to_str().unwrap()];
    args.extend_from_slice(extra);
    wasmloop(&args)
}

fn stdout_yaml(out: &Output) -> Value {
    assert!(out.status.success(), "wasmloop failed: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_saphyr::from_slice_with_options(&out.stdout, wasmloop::input::yaml_options()).expect("stdout is YAML")
}

fn expected(path: &str) -> Value {
    let text = std::fs::read_to_string(fixture(path)).unwrap();
    serde_saphyr::from_str_with_options(&text, wasmloop::input::yaml_options()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn fails_with(out: &Output, code: i32, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    for needle in needles {
        assert!(err.contains(needle), "stderr lacks {needle:?}:\n{err}");
    }
}

fn path_arg(p: &str) -> String {
    fixture(p).to_str().unwrap().to_owned()
}

fn config_file(mode: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), format!("mode: {mode}\n")).unwrap();
    file
}

fn hostile(mode: &str, extra: &[&str]) -> Output {
    let config = config_file(mode);
    let mut args = vec!["--config", config.path().to_str().unwrap()];
    args.extend_from_slice(extra);
    reconcile("hostile_plugin", "hostile/configmap.yaml", &args)
}

// ---- foo-deployment --------------------------------------------------------------------

#[test]
fn foo_without_deployment_applies_it_reports_zero_available_and_synced() {
    let out = reconcile("foo_deployment", "foo-deployment/foo.yaml", &[]);
    assert_eq!(stdout_yaml(&out), expected("foo-deployment/expected-create.yaml"));
}

#[test]
fn foo_with_its_deployment_mirrors_available_replicas() {
    let owned = path_arg("foo-deployment/owned-deployment.yaml");
    let out = reconcile("foo_deployment", "foo-deployment/foo.yaml", &["--owned", &owned]);
    assert_eq!(stdout_yaml(&out), expected("foo-deployment/expected-owned.yaml"));
}

#[test]
fn foo_with_a_foreign_deployment_fails_with_err_resource_exists_and_writes_nothing() {
    let foreign = path_arg("foo-deployment/foreign-deployment.yaml");
    let out = reconcile("foo_deployment", "foo-deployment/foo.yaml", &["--cache", &foreign]);
    fails_with(
        &out,
        3,
        &[
            "plugin foo-deployment failed on Foo default/example-foo",
            "transient error (ErrResourceExists): Resource \"example-foo\" already exists and is not managed by Foo",
            "event: Warning ErrResourceExists",
        ],
    );
    assert!(out.stdout.is_empty(), "no actions may be printed");
}

#[test]
fn foo_without_deployment_name_fails_permanently_and_returns_no_actions() {
    let out = reconcile("foo_deployment", "foo-deployment/foo-no-name.yaml", &["-o", "json"]);
    fails_with(
        &out,
        3,
        &[
            "spec.deploymentName must be specified",
            "event: Warning InvalidSpec",
            "when the object or the plugin changes",
        ],
    );
    assert!(out.stdout.is_empty(), "no actions may be printed");
}

// ---- pod-logger ------------------------------------------------------------------------

#[test]
fn pod_logger_logs_first_sight_and_writes_nothing() {
    let out = reconcile("pod_logger", "pod-logger/pod-pending.yaml", &[]);
    assert_eq!(stdout_yaml(&out), expected("pod-logger/expected.yaml"));
    assert!(stderr(&out).contains("pod shop/web-0 seen (phase Pending)"), "{}", stderr(&out));
}

#[test]
fn pod_logger_logs_a_phase_change_against_previous() {
    let previous = path_arg("pod-logger/pod-pending.yaml");
    let out = reconcile("pod_logger", "pod-logger/pod-running.yaml", &["--previous", &previous]);
    assert_eq!(stdout_yaml(&out), expected("pod-logger/expected.yaml"));
    assert!(stderr(&out).contains("pod shop/web-0 phase changed Pending -> Running"), "{}", stderr(&out));
}

#[test]
fn pod_logger_logs_deletion() {
    let out = reconcile("pod_logger", "pod-logger/pod-running.yaml", &["--phase", "deleted"]);
    assert!(out.status.success());
    assert!(stderr(&out).contains("pod shop/web-0 deleted (last phase Running)"), "{}", stderr(&out));
}

// ---- node-image-watch ------------------------------------------------------------------

#[test]
fn node_image_watch_patches_the_total_and_reports_old_new_and_delta() {
    let out = reconcile("node_image_watch", "node-image-watch/node.yaml", &[]);
    assert_eq!(stdout_yaml(&out), expected("node-image-watch/expected.yaml"));
}

// ---- configmap-mirror ------------------------------------------------------------------

#[test]
fn configmap_mirror_copies_into_listed_namespaces_and_removes_unlisted_copies() {
    let cluster = path_arg("configmap-mirror/cluster.yaml");
    let out = reconcile("configmap_mirror", "configmap-mirror/source.yaml", &["--cache", &cluster]);
    assert_eq!(stdout_yaml(&out), expected("configmap-mirror/expected-apply.yaml"));
}

#[test]
fn configmap_mirror_cleanup_deletes_every_copy() {
    let cluster = path_arg("configmap-mirror/cluster.yaml");
    let out =
        reconcile("configmap_mirror", "configmap-mirror/source.yaml", &["--cache", &cluster, "--phase", "cleanup"]);
    assert_eq!(stdout_yaml(&out), expected("configmap-mirror/expected-cleanup.yaml"));
}

// ---- the Python and JavaScript twins ---------------------------------------------------

/// What a user sees of one offline reconcile: exit code, the actions (parsed, so key order
/// does not count) and the error report.
fn seen(out: &Output) -> (Option<i32>, Value, String) {
    let actions = if out.stdout.is_empty() {
        Value::Null
    } else {
        serde_saphyr::from_slice_with_options(&out.stdout, wasmloop::input::yaml_options()).expect("stdout is YAML")
    };
    (out.status.code(), actions, stderr(out))
}

/// Runs the Rust plugin `rust` and its Python twin `python` on every case (object fixture,
/// extra arguments) and asserts that a user could not tell them apart.
fn twins_agree(rust: &str, python: &str, cases: &[(&str, &[&str])]) {
    twin_agrees(rust, &wasmloop_testenv::components::python_component(python), cases);
}

/// As [`twins_agree`], for a twin component in any language.
fn twin_agrees(rust: &str, twin: &Path, cases: &[(&str, &[&str])]) {
    for (object, extra) in cases {
        let fixture_args: Vec<String> =
            extra.iter().map(|a| if a.ends_with(".yaml") { path_arg(a) } else { (*a).to_owned() }).collect();
        let args: Vec<&str> = fixture_args.iter().map(String::as_str).collect();
        let from_rust = seen(&reconcile(rust, object, &args));
        let object_path = fixture(object);
        let mut twin_args =
            vec!["reconcile", "--plugin", twin.to_str().unwrap(), "--object", object_path.to_str().unwrap()];
        twin_args.extend_from_slice(&args);
        let from_twin = seen(&wasmloop(&twin_args));
        assert_eq!(from_twin, from_rust, "the twin {} of {rust} differs on {object} {extra:?}", twin.display());
    }
}

/// foo-deployment's golden cases, and edge inputs its serde types decode.
const FOO_CASES: &[(&str, &[&str])] = &[
    ("foo-deployment/foo.yaml", &[]),
    ("foo-deployment/foo.yaml", &["--owned", "foo-deployment/owned-deployment.yaml"]),
    ("foo-deployment/foo.yaml", &["--cache", "foo-deployment/foreign-deployment.yaml"]),
    ("foo-deployment/foo-no-name.yaml", &[]),
    ("foo-deployment/foo.yaml", &["--phase", "cleanup"]),
    ("foo-deployment/foo-synced.yaml", &["--owned", "foo-deployment/owned-deployment.yaml"]),
    ("foo-deployment/foo-synced.yaml", &[]),
    ("foo-deployment/foo-default-replicas.yaml", &["--owned", "foo-deployment/owned-deployment.yaml"]),
    ("foo-deployment/foo-blank-name.yaml", &[]),
    ("foo-deployment/foo-spaced-name.yaml", &["--owned", "foo-deployment/owned-deployment.yaml"]),
    ("foo-deployment/foo-separator-name.yaml", &[]),
    ("foo-deployment/foo-status-list.yaml", &[]),
    ("foo-deployment/foo-spec-pair.yaml", &[]),
    ("foo-deployment/foo.yaml", &["--owned", "foo-deployment/owned-deployment-sparse-owner.yaml"]),
    ("foo-deployment/foo.yaml", &["--owned", "foo-deployment/owned-deployment-owner-without-uid.yaml"]),
];

/// Inputs foo-deployment's serde types refuse: a twin must refuse them alike.
const FOO_UNDECODABLE: &[(&str, &[&str])] = &[
    ("foo-deployment/foo-spec-list.yaml", &[]),
    ("foo-deployment/foo-spec-string.yaml", &[]),
    ("foo-deployment/foo-spec-null.yaml", &[]),
    ("foo-deployment/foo-status-null-replicas.yaml", &[]),
    ("foo-deployment/foo-status-string-replicas.yaml", &[]),
    ("foo-deployment/foo-status-huge-replicas.yaml", &[]),
    ("foo-deployment/foo-huge-replicas.yaml", &[]),
    ("foo-deployment/foo.yaml", &["--owned", "foo-deployment/owned-deployment-string-replicas.yaml"]),
    ("foo-deployment/foo.yaml", &["--owned", "foo-deployment/owned-deployment-numeric-owner-name.yaml"]),
];

#[test]
fn the_python_foo_deployment_agrees_with_the_rust_one_on_every_golden_case() {
    twins_agree("foo_deployment", "plugins/foo-deployment-py", FOO_CASES);
}

#[test]
fn the_javascript_foo_deployment_agrees_with_the_rust_one_on_every_golden_case() {
    twin_agrees("foo_deployment", &wasmloop_testenv::components::js_component("plugins/foo-deployment-js"), FOO_CASES);
}

/// The part of an error report that names what did not decode, without serde's words (which
/// a twin cannot repeat): `cannot decode Foo default/example-foo: …; fix the object`.
fn mask_decode_detail(report: &str) -> String {
    const END: &str = "; fix the object or the plugin's type for it";
    let (mut masked, mut rest) = (String::new(), report);
    while let Some(at) = rest.find("cannot decode ") {
        let head = rest[at..].find(": ").map(|i| at + i + 2);
        let tail = rest[at..].find(END).map(|i| at + i);
        let (Some(head), Some(tail)) = (head, tail) else { break };
        masked.push_str(&rest[..head]);
        masked.push('…');
        rest = &rest[tail..];
    }
    masked.push_str(rest);
    masked
}

/// Runs foo-deployment and `twin` on inputs neither can decode, and asserts a user could not
/// tell them apart but for serde's words.
fn refuses_alike(twin: &Path) {
    for (object, extra) in FOO_UNDECODABLE {
        let args: Vec<String> =
            extra.iter().map(|a| if a.ends_with(".yaml") { path_arg(a) } else { (*a).to_owned() }).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (rust_code, rust_actions, rust_report) = seen(&reconcile("foo_deployment", object, &args));
        let object_path = fixture(object);
        let mut twin_args =
            vec!["reconcile", "--plugin", twin.to_str().unwrap(), "--object", object_path.to_str().unwrap()];
        twin_args.extend_from_slice(&args);
        let (code, actions, report) = seen(&wasmloop(&twin_args));
        assert!(rust_report.contains("cannot decode "), "{object}: the Rust plugin decoded it: {rust_report}");
        assert!(report.contains("cannot decode "), "{object}: {} decoded it: {report}", twin.display());
        assert_eq!(
            (code, actions, mask_decode_detail(&report)),
            (rust_code, rust_actions, mask_decode_detail(&rust_report)),
            "the twin {} of foo_deployment differs on {object} {extra:?}",
            twin.display()
        );
    }
}

#[test]
fn the_python_foo_deployment_refuses_what_the_rust_one_cannot_decode_alike() {
    refuses_alike(&wasmloop_testenv::components::python_component("plugins/foo-deployment-py"));
}

#[test]
fn the_javascript_foo_deployment_refuses_what_the_rust_one_cannot_decode_alike() {
    refuses_alike(&wasmloop_testenv::components::js_component("plugins/foo-deployment-js"));
}

#[test]
fn the_python_configmap_mirror_agrees_with_the_rust_one_on_every_golden_case() {
    twins_agree(
        "configmap_mirror",
        "plugins/configmap-mirror-py",
        &[
            ("configmap-mirror/source.yaml", &["--cache", "configmap-mirror/cluster.yaml"]),
            ("configmap-mirror/source.yaml", &["--cache", "configmap-mirror/cluster.yaml", "--phase", "cleanup"]),
            ("configmap-mirror/source-wide.yaml", &["--cache", "configmap-mirror/cluster-taken.yaml"]),
            ("configmap-mirror/source.yaml", &[]),
            ("configmap-mirror/source.yaml", &["--cache", "configmap-mirror/cluster-namespace-gone.yaml"]),
        ],
    );
}

#[test]
fn the_python_namespace_defaults_agrees_with_the_rust_one_on_every_golden_case() {
    twins_agree(
        "namespace_defaults",
        "plugins/namespace-defaults-py",
        &[
            ("namespace-defaults/enabled-team.yaml", &[]),
            ("namespace-defaults/enabled-team.yaml", &["--owned", "namespace-defaults/owned.yaml"]),
            ("namespace-defaults/enabled-team.yaml", &["--config", "namespace-defaults/config.yaml"]),
            ("namespace-defaults/enabled.yaml", &[]),
            ("namespace-defaults/disabled.yaml", &["--owned", "namespace-defaults/owned.yaml"]),
            ("namespace-defaults/disabled.yaml", &[]),
            ("namespace-defaults/terminating.yaml", &["--owned", "namespace-defaults/owned.yaml"]),
            ("namespace-defaults/enabled-team.yaml", &["--cache", "namespace-defaults/theirs.yaml"]),
            ("namespace-defaults/kube-system.yaml", &[]),
            ("namespace-defaults/kube-system.yaml", &["--owned", "namespace-defaults/owned.yaml"]),
            ("namespace-defaults/enabled.yaml", &["--config", "namespace-defaults/config-list.yaml"]),
        ],
    );
}

#[test]
fn the_ttl_janitor_deletes_an_expired_object_by_uid_and_keeps_a_future_one_offline() {
    let expired = seen(&reconcile("ttl_janitor", "ttl-janitor/expired.yaml", &[]));
    assert_eq!(expired.0, Some(0), "{}", expired.2);
    let actions = &expired.1["actions"];
    assert_eq!(actions[0]["event"]["reason"], "ExpiryTimeReached", "{actions}");
    assert_eq!(actions[1]["delete"]["uid"], "3f2e1d0c-9b8a-4766-8554-433221100fed", "{actions}");
    let future = seen(&reconcile("ttl_janitor", "ttl-janitor/future.yaml", &[]));
    assert_eq!(future.0, Some(0), "{}", future.2);
    assert_eq!(future.1["actions"], serde_json::json!([]), "{}", future.1);
    let wait = future.1["requeueAfter"].as_str().and_then(|w| w.strip_suffix("ms")).and_then(|w| w.parse::<u64>().ok());
    // Until 2999: centuries of milliseconds.
    assert!(wait.is_some_and(|ms| ms > 30_000_000_000_000), "{}", future.1);
}

/// The `roller` guest's golden cases: contract 0.3's request (triggers, a conflict), selectors
/// (annotation, field), an unforced apply and the config, for the Rust guest and its twins.
const ROLLER_CASES: &[(&str, &[&str])] = &[
    ("roller/deployment.yaml", &["--cache", "roller/cache.yaml", "--triggers", "roller/triggers.yaml"]),
    (
        "roller/deployment.yaml",
        &[
            "--cache",
            "roller/cache.yaml",
            "--triggers",
            "roller/triggers-conflict.yaml",
            "--config",
            "roller/config-replicas.yaml",
        ],
    ),
    ("roller/deployment.yaml", &["--config", "roller/config-replicas.yaml"]),
    ("roller/deployment-rolled.yaml", &["--cache", "roller/cache.yaml"]),
    ("roller/deployment.yaml", &["--phase", "cleanup"]),
];

/// `map` of the roller and its twins: a ConfigMap through the index, the Secret by a list.
const ROLLER_MAPS: &[(&str, &[&str])] = &[
    ("roller/settings.yaml", &["--cache", "roller/cache.yaml"]),
    ("roller/settings.yaml", &["--cache", "roller/cache.yaml", "--deleted"]),
    ("roller/secret.yaml", &["--cache", "roller/cache.yaml"]),
    ("roller/settings.yaml", &[]),
];

/// What a user sees of one offline `map`: exit code, the primaries named, and stderr without
/// the log lines' times.
fn seen_map(out: &Output) -> (Option<i32>, Value, String) {
    let (code, refs, report) = seen(out);
    let untimed: Vec<&str> = report
        .lines()
        .map(|l| if l.starts_with("20") { l.split_once(' ').map_or(l, |(_, rest)| rest) } else { l })
        .collect();
    (code, refs, untimed.join("\n"))
}

/// Runs `map` of the Rust guest `rust` and of `twin` on every case and asserts a user could
/// not tell them apart.
fn maps_agree(rust: &str, twin: &Path, cases: &[(&str, &[&str])]) {
    let rust = component(rust);
    for (related, extra) in cases {
        let args: Vec<String> =
            extra.iter().map(|a| if a.ends_with(".yaml") { path_arg(a) } else { (*a).to_owned() }).collect();
        let related = path_arg(related);
        let run = |plugin: &Path| {
            let mut all = vec!["reconcile", "--plugin", plugin.to_str().unwrap(), "--map", related.as_str()];
            all.extend(args.iter().map(String::as_str));
            seen_map(&wasmloop(&all))
        };
        let (from_rust, from_twin) = (run(&rust), run(twin));
        assert_eq!(from_rust.0, Some(0), "{}", from_rust.2);
        assert_eq!(
            from_twin,
            from_rust,
            "the twin {} of the roller differs on map of {related} {extra:?}",
            twin.display()
        );
    }
}

#[test]
fn the_python_roller_agrees_with_the_rust_one_on_contract_0_3_s_golden_cases() {
    twins_agree("roller_plugin", "host/tests/guests-py/roller", ROLLER_CASES);
    maps_agree(
        "roller_plugin",
        &wasmloop_testenv::components::python_component("host/tests/guests-py/roller"),
        ROLLER_MAPS,
    );
}

#[test]
fn the_javascript_roller_agrees_with_the_rust_one_on_contract_0_3_s_golden_cases() {
    let twin = wasmloop_testenv::components::js_component("host/tests/guests-js/roller");
    twin_agrees("roller_plugin", &twin, ROLLER_CASES);
    maps_agree("roller_plugin", &twin, ROLLER_MAPS);
}

#[test]
fn reconcile_takes_the_triggers_a_file_lists_and_refuses_one_the_contract_has_not() {
    let listed = stdout_yaml(&reconcile(
        "roller_plugin",
        "roller/deployment.yaml",
        &["--triggers", &path_arg("roller/triggers.yaml")],
    ));
    let triggers = listed["actions"][0]["apply"]["data"]["triggers"].as_str().unwrap_or_default().to_owned();
    assert_eq!(triggers, "primary 1->2;related ConfigMap/settings;owned ConfigMap/roller-observed-web;resync");
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(bad.path(), "- resync\n- earthquake\n").unwrap();
    let out = reconcile("roller_plugin", "roller/deployment.yaml", &["--triggers", bad.path().to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("trigger [1] \"earthquake\" is none the contract has"), "{}", stderr(&out));
}

#[test]
fn a_python_plugin_that_raises_fails_transiently_naming_the_exception_and_where() {
    // The test guest reads a key its ConfigMap does not have when asked to: a bug the SDK
    // reports.
    let python = wasmloop_testenv::components::python_component("host/tests/guests-py/remember");
    let object = fixture("python-raises.yaml");
    let out = wasmloop(&["reconcile", "--plugin", python.to_str().unwrap(), "--object", object.to_str().unwrap()]);
    fails_with(
        &out,
        3,
        &[
            "plugin remember failed on ConfigMap default/raises: transient error",
            "plugin raised KeyError: 'missing' (at plugin.py:",
            "in reconcile)",
            "retry: with backoff",
        ],
    );
}

#[test]
fn a_javascript_plugin_that_throws_fails_transiently_naming_the_exception() {
    let js = wasmloop_testenv::components::js_component("host/tests/guests-js/remember");
    let object = fixture("python-raises.yaml");
    let out = wasmloop(&["reconcile", "--plugin", js.to_str().unwrap(), "--object", object.to_str().unwrap()]);
    fails_with(
        &out,
        3,
        &[
            "plugin remember failed on ConfigMap default/raises: transient error",
            "plugin threw TypeError: ",
            "retry: with backoff",
        ],
    );
}

#[test]
fn bundle_of_a_component_too_large_for_a_configmap_points_at_push() {
    let python = wasmloop_testenv::components::python_component("plugins/foo-deployment-py");
    let out = wasmloop(&["bundle", python.to_str().unwrap(), "--name", "foo-deployment"]);
    fails_with(&out, 1, &["plugin foo-deployment is", "wasmloop push PLUGIN.wasm oci://REGISTRY/REPO:TAG", "--ref"]);
}

// ---- contract 0.1, through the adapter ---------------------------------------------------

/// configmap-mirror as built for contract 0.1 (see tests/fixtures/contract-0.1/README.md).
fn legacy_mirror() -> PathBuf {
    fixture("contract-0.1/configmap_mirror.wasm")
}

fn reconcile_legacy(extra: &[&str]) -> Output {
    let (plugin, object) = (legacy_mirror(), fixture("configmap-mirror/source.yaml"));
    let mut args = vec!["reconcile", "--plugin", plugin.to_str().unwrap(), "--object", object.to_str().unwrap()];
    args.extend_from_slice(extra);
    wasmloop(&args)
}

#[test]
fn a_component_built_for_contract_0_1_reconciles_as_it_did_through_the_adapter() {
    let cluster = path_arg("configmap-mirror/cluster.yaml");
    assert_eq!(
        stdout_yaml(&reconcile_legacy(&["--cache", &cluster])),
        expected("configmap-mirror/expected-apply.yaml")
    );
    let cleanup = reconcile_legacy(&["--cache", &cluster, "--phase", "cleanup"]);
    assert_eq!(stdout_yaml(&cleanup), expected("configmap-mirror/expected-cleanup.yaml"));
}

#[test]
fn inspect_names_the_contract_a_component_was_built_for() {
    let legacy = stdout_yaml(&wasmloop(&["inspect", legacy_mirror().to_str().unwrap()]));
    assert_eq!(legacy["contract"], "0.1");
    assert_eq!(legacy["name"], "configmap-mirror");
    let current = stdout_yaml(&wasmloop(&["inspect", component("configmap_mirror").to_str().unwrap()]));
    assert_eq!(current["contract"], "0.3");
    assert_eq!(current["metadataOnly"], serde_json::json!(["v1/Namespace"]));
    assert_eq!(current["writes"][0]["kind"], "v1/ConfigMap");
    assert_eq!(current["writes"][0]["scope"], "any");
}

// ---- declared writes -----------------------------------------------------------------------

#[test]
fn a_write_no_grant_covers_is_refused_naming_the_verb_the_object_and_what_to_declare() {
    let out = hostile("patch-ungranted", &[]);
    fails_with(
        &out,
        3,
        &["plugin hostile", "patch apps/v1/Deployment in namespace default", "under writes", "verb patch"],
    );
}

#[test]
fn a_failed_reconcile_still_reports_its_status_and_says_when_to_retry() {
    let out = hostile("fail-with-status", &[]);
    fails_with(&out, 3, &["waiting for something", "event: Warning Waiting", "retry: after 500 ms"]);
    let actions: Value = serde_saphyr::from_slice_with_options(&out.stdout, wasmloop::input::yaml_options())
        .expect("the failure's actions are printed");
    assert_eq!(actions["actions"][0]["status"], serde_json::json!({"waiting": true}), "{actions}");
}

// ---- responses are counted before they are copied ------------------------------------------

/// Runs `wasmloop` under GNU time; returns its output and its peak resident memory in KiB.
fn wasmloop_measured(args: &[&str]) -> (Output, u64) {
    let report = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o", report.path().to_str().unwrap(), env!("CARGO_BIN_EXE_wasmloop")])
        .args(args)
        .env("WASMLOOP_CACHE_DIR", cache_dir())
        .env_remove("RUST_LOG")
        .env_remove("WASMLOOP_LOG")
        .output()
        .expect("GNU time runs (scripts/test installs it)");
    let peak = std::fs::read_to_string(report.path()).unwrap();
    let peak =
        peak.lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or_else(|| panic!("GNU time said {peak:?}"));
    (out, peak)
}

#[test]
fn strings_that_all_alias_one_buffer_are_refused_before_the_host_copies_them() {
    // 2,000 status actions whose strings all point at one 1 MiB buffer in the guest: copied
    // before counting, 2 GiB of host memory; counted while lifting, the fifth string is over
    // the 4 MiB response cap and nothing more is copied.
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "mode: shared-strings\ncount: 2000\n").unwrap();
    let (plugin, object) = (component("hostile_plugin"), fixture("hostile/configmap.yaml"));
    let args = [
        "reconcile",
        "--plugin",
        plugin.to_str().unwrap(),
        "--object",
        object.to_str().unwrap(),
        "--config",
        config.path().to_str().unwrap(),
    ];
    let (out, peak_kib) = wasmloop_measured(&args);
    fails_with(&out, 3, &["over the 4194304-byte cap", "event: Warning PluginResponseTooLarge"]);
    assert!(peak_kib < 512 * 1024, "peak resident memory {peak_kib} KiB: the aliased strings were copied");
}

#[test]
fn a_guests_log_lines_are_cut_to_4_kib_and_1000_a_call() {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "mode: log-flood\ncount: 1500\n").unwrap();
    let out = reconcile("hostile_plugin", "hostile/configmap.yaml", &["--config", config.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let cut = err.lines().filter(|l| l.contains("… (6144 bytes cut)")).count();
    assert_eq!(cut, 1000, "lines written, each cut to 4 KiB");
    assert!(err.contains("more than 1000 log lines in one call"), "{}", &err[err.len().saturating_sub(2000)..]);
    assert!(err.len() < 1000 * 4200 + 100_000, "{} bytes of log", err.len());
}

// ---- the cache imports ---------------------------------------------------------------------

fn hostile_with(config: &str, cache: &[serde_json::Value]) -> Output {
    let config_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config_file.path(), config).unwrap();
    let cache_file = tempfile::NamedTempFile::new().unwrap();
    let docs: Vec<String> = cache.iter().map(|o| serde_saphyr::to_string(o).unwrap()).collect();
    std::fs::write(cache_file.path(), docs.join("---\n")).unwrap();
    let (config, cache) = (config_file.path().to_str().unwrap(), cache_file.path().to_str().unwrap());
    reconcile("hostile_plugin", "hostile/configmap.yaml", &["--config", config, "--cache", cache])
}

fn first_event_message(out: &Output) -> String {
    let actions = stdout_yaml(out);
    actions["actions"][0]["event"]["message"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_list_comes_in_pages_of_at_most_500_in_order_without_repeats() {
    let configmaps: Vec<Value> = (0..1203)
        .map(|i| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": format!("cm-{i:05}"), "namespace": "default", "uid": format!("u{i}")}})
        })
        .collect();
    // 1,203 plus the primary itself; a limit of 0 is the host's page, and more is held to it.
    for (limit, pages) in [(0, 3), (500, 3), (10_000, 3), (100, 13)] {
        let out = hostile_with(&format!("mode: list-pages\nlimit: {limit}\n"), &configmaps);
        let expected = format!("listed 1204 in {pages} pages, in order: true");
        assert_eq!(first_event_message(&out), expected, "limit {limit}");
    }
}

#[test]
fn a_continue_token_that_is_no_position_is_refused_naming_the_plugin_and_the_kind() {
    let out = hostile("forged-token", &[]);
    fails_with(
        &out,
        3,
        &["plugin hostile, listing v1/ConfigMap", "continue token \"no position at all\"", "pass back the token"],
    );
}

#[test]
fn a_prune_the_manifest_does_not_allow_is_refused_naming_what_to_declare() {
    let out = hostile("prune", &[]);
    fails_with(
        &out,
        3,
        &["plugin hostile", "actions[0]: prune needs the manifest to allow it", "set the manifest's prune"],
    );
}

#[test]
fn a_metadata_only_kind_reaches_the_plugin_without_spec_status_or_managed_fields() {
    let web = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "d1", "managedFields": [{"manager": "x"}],
            "labels": {"wasmloop.dev/map": "same-name"}},
        "spec": {"replicas": 3}, "status": {"replicas": 3}
    });
    let out = hostile_with("mode: peek-deployment\n", &[web]);
    assert_eq!(first_event_message(&out), "fields apiVersion,kind,metadata; managedFields: false");
}

#[test]
fn a_kind_watched_through_a_selector_holds_only_what_it_selects_and_the_rest_is_named() {
    let deployment = |name: &str, labels: serde_json::Value| {
        serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default", "uid": name, "labels": labels}})
    };
    let mapped = deployment("mapped", serde_json::json!({"wasmloop.dev/map": "same-name"}));
    let other = deployment("other", serde_json::json!({"app": "web"}));
    let out = hostile_with("mode: list-deployments\n", &[mapped, other]);
    assert_eq!(first_event_message(&out), "deployments: mapped");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("note: apps/v1/Deployment default/other is not in plugin hostile's cache"), "{stderr}");
}

#[test]
fn managed_fields_reach_a_plugin_that_keeps_them_and_the_last_applied_annotation_is_stripped() {
    let config = config_file("peek-fields");
    let applied = fixture("hostile/applied.yaml");
    let cache = applied.to_str().unwrap();
    let out = reconcile(
        "hostile_plugin",
        "hostile/applied.yaml",
        &["--config", config.path().to_str().unwrap(), "--cache", cache],
    );
    assert_eq!(
        first_event_message(&out),
        "request managedFields: true, last-applied: false; cache managedFields: true, last-applied: false"
    );
}

#[test]
fn a_component_built_for_contract_0_2_0_still_loads_and_reconciles_as_before() {
    // Built before 0.2.1 added cache-options (see tests/fixtures/contract-0.2.0/README.md).
    let plugin = fixture("contract-0.2.0/configmap_mirror.wasm");
    let (plugin, object) = (plugin.to_str().unwrap().to_owned(), path_arg("configmap-mirror/source.yaml"));
    let cluster = path_arg("configmap-mirror/cluster.yaml");
    let out = wasmloop(&["reconcile", "--plugin", &plugin, "--object", &object, "--cache", &cluster]);
    assert_eq!(stdout_yaml(&out), expected("configmap-mirror/expected-apply.yaml"));
    let inspected = stdout_yaml(&wasmloop(&["inspect", &plugin]));
    assert_eq!(inspected["contract"], "0.2");
    assert!(inspected.get("keeps").is_none(), "a 0.2.0 component keeps nothing: {inspected}");
}

#[test]
fn a_component_built_for_contract_0_2_1_reconciles_through_the_adapter_as_it_did() {
    // Built before 0.3 (see tests/fixtures/contract-0.2.1/README.md): its applies are forced,
    // as 0.2's were, and its request carries no triggers.
    let plugin = fixture("contract-0.2.1/foo_deployment.wasm");
    let out = wasmloop(&[
        "reconcile",
        "--plugin",
        plugin.to_str().unwrap(),
        "--object",
        &path_arg("foo-deployment/foo.yaml"),
    ]);
    assert_eq!(stdout_yaml(&out), expected("foo-deployment/expected-create.yaml"));
    let inspected = stdout_yaml(&wasmloop(&["inspect", plugin.to_str().unwrap()]));
    assert_eq!(inspected["contract"], "0.2");
}

// ---- inspect and the compile cache -----------------------------------------------------

#[test]
fn inspect_prints_the_manifest() {
    let plugin = component("configmap_mirror");
    let manifest = stdout_yaml(&wasmloop(&["inspect", plugin.to_str().unwrap()]));
    assert_eq!(manifest["name"], "configmap-mirror");
    assert_eq!(manifest["primary"]["kind"], "v1/ConfigMap");
    assert_eq!(manifest["primary"]["labelSelector"], "wasmloop.dev/mirror=true");
    assert_eq!(manifest["finalizer"], "wasmloop.dev/mirror-cleanup");
}

#[test]
fn second_load_of_a_component_is_served_from_the_compile_cache() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = component("pod_logger");
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_wasmloop"))
            .args(["inspect", plugin.to_str().unwrap()])
            .env("WASMLOOP_CACHE_DIR", dir.path())
            .env("WASMLOOP_LOG", "wasmloop_sandbox=debug")
            .output()
            .unwrap()
    };
    assert!(stderr(&run()).contains("cached=Compiled"));
    let entries = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(entries, 1, "one compiled artifact is stored");
    assert!(stderr(&run()).contains("cached=Hit"));
}

// ---- errors a user can hit -------------------------------------------------------------

#[test]
fn core_module_is_refused_with_how_to_build_a_component() {
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let out = wasmloop(&["inspect", core.to_str().unwrap()]);
    fails_with(&out, 1, &["core.wasm is a core WebAssembly module, not a component", "--target wasm32-wasip2"]);
}

/// `wasmloop inspect` of test guest `name` exits 1 saying each of `needles`.
fn inspect_refuses(name: &str, needles: &[&str]) {
    let plugin = component(name);
    fails_with(&wasmloop(&["inspect", plugin.to_str().unwrap()]), 1, needles);
}

#[test]
fn component_of_another_contract_version_is_refused_naming_both_versions() {
    inspect_refuses(
        "future_contract_plugin",
        &[
            "future_contract_plugin.wasm was built for contract wasmloop:plugin@0.4.0",
            "this host serves wasmloop:plugin@0.3.0 (0.3.x), and wasmloop:plugin@0.2.1 (0.2.x)",
            "wasmloop:plugin@0.1.0 (0.1.x) through adapters",
            "rebuild the plugin",
        ],
    );
}

#[test]
fn a_component_built_against_an_earlier_revision_of_its_contract_is_refused_at_load() {
    inspect_refuses(
        "stale_contract_plugin",
        &[
            "stale_contract_plugin.wasm names contract wasmloop:plugin@0.2.0 but its reconcile:",
            "rebuild the plugin with the current wasmloop-sdk",
        ],
    );
}

#[test]
fn a_manifest_smuggling_a_path_into_a_namespace_or_a_version_is_refused_at_load_naming_the_field_and_rule() {
    inspect_refuses(
        "smuggler_plugin",
        &[
            "smuggler_plugin.wasm",
            "the watched kind v1/ConfigMap: namespace \"tenant-a/secrets?x=\" is not a valid namespace",
            "1-63 characters of a-z, 0-9 and '-'",
        ],
    );
}

#[test]
fn malformed_yaml_is_refused_naming_the_file_and_position() {
    let out = reconcile("hostile_plugin", "hostile/malformed.yaml", &[]);
    fails_with(&out, 1, &["malformed.yaml (document 1) as YAML or JSON", "line", "fix the syntax"]);
}

#[test]
fn object_of_the_wrong_kind_is_refused_naming_the_expected_kind() {
    let out = reconcile("foo_deployment", "hostile/configmap.yaml", &[]);
    fails_with(
        &out,
        1,
        &["plugin foo-deployment reconciles samplecontroller.k8s.io/v1alpha1/Foo", "holds a v1/ConfigMap"],
    );
}

#[test]
fn guest_panic_is_reported_with_its_message() {
    let out = hostile("panic", &[]);
    fails_with(
        &out,
        3,
        &[
            "plugin hostile failed on ConfigMap default/victim",
            "the guest panicked, saying \"hostile plugin panicked on purpose (at host/tests/guests/hostile/src/lib.rs",
            "event: Warning PluginTrapped",
        ],
    );
}

#[test]
fn guest_stuck_in_a_loop_is_stopped_at_its_deadline() {
    let started = std::time::Instant::now();
    let out = hostile("loop", &["--deadline-ms", "200"]);
    fails_with(
        &out,
        3,
        &["plugin hostile failed on ConfigMap default/victim", "ran past its 200 ms deadline", "raise deadline-ms"],
    );
    // Not a timing assertion on performance: only that the loop did not run unbounded.
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn guest_sleeping_in_a_clock_wait_is_stopped_at_its_deadline() {
    let out = hostile("sleep", &["--deadline-ms", "300"]);
    fails_with(
        &out,
        3,
        &["plugin hostile failed on ConfigMap default/victim", "ran past its 300 ms deadline", "raise deadline-ms"],
    );
    // The host reports when it stopped the guest; a clock wait must not outlast the deadline
    // by more than the host's reaction time (generous here; the benchmark measures it).
    let stopped = stopped_after_ms(&stderr(&out));
    assert!((300..1300).contains(&stopped), "stopped after {stopped} ms:\n{}", stderr(&out));
}

/// The `stopped after N ms` figure of a deadline error.
fn stopped_after_ms(stderr: &str) -> u64 {
    let (_, rest) = stderr.split_once("stopped after ").unwrap_or_else(|| panic!("no elapsed time in:\n{stderr}"));
    rest.split_once(" ms").and_then(|(n, _)| n.parse().ok()).unwrap_or_else(|| panic!("bad elapsed time in:\n{stderr}"))
}

#[test]
fn a_namespace_that_would_change_the_url_path_is_refused() {
    let out = hostile("namespace-escape", &[]);
    fails_with(&out, 3, &["actions[0]", "namespace \"tenant-a/secrets/victim?x=\"", "not a valid namespace"]);
}

#[test]
fn an_object_name_that_would_change_the_url_path_is_refused() {
    let out = hostile("bad-name", &[]);
    fails_with(&out, 3, &["actions[0]", "name \"../../secrets/x\"", "not a valid object name"]);
}

#[test]
fn a_malformed_api_version_is_refused() {
    let out = hostile("bad-api-version", &[]);
    fails_with(&out, 3, &["actions[0]", "apiVersion \"v1/../../apis\""]);
}

#[test]
fn an_event_reason_over_the_cap_is_refused() {
    let out = hostile("long-event", &[]);
    fails_with(&out, 3, &["actions[0]", "event reason", "128"]);
}

#[test]
fn a_flood_of_actions_is_refused_at_the_action_limit() {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "mode: flood\ncount: 200000\n").unwrap();
    let out = reconcile("hostile_plugin", "hostile/configmap.yaml", &["--config", config.path().to_str().unwrap()]);
    fails_with(&out, 3, &["200000 actions", "limit of 10000", "max-actions"]);
}

#[test]
fn guest_allocating_without_bound_hits_the_memory_limit() {
    let out = hostile("alloc", &["--memory-limit", "16777216"]);
    fails_with(&out, 3, &["hit its memory limit of 16777216 bytes", "raise memory-limit-bytes"]);
}

#[test]
fn oversized_response_is_refused_naming_size_and_cap() {
    let out = hostile("oversize", &[]);
    fails_with(&out, 3, &["over the 4194304-byte cap", "raise response-limit-bytes"]);
}

#[test]
fn response_cap_is_configurable() {
    let out = hostile("oversize", &["--response-limit", "16777216"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn reading_an_undeclared_kind_is_refused_naming_plugin_and_kind() {
    let out = hostile("read-undeclared", &[]);
    fails_with(
        &out,
        3,
        &["plugin hostile failed", "tried to get a v1/Secret", "add the kind to owns, watches or reads"],
    );
}

#[test]
fn applying_an_undeclared_kind_is_refused_naming_plugin_and_kind() {
    let out = hostile("apply-undeclared", &[]);
    fails_with(&out, 3, &["plugin hostile failed", "tried to apply a v1/Secret"]);
}

#[test]
fn file_that_is_not_wasm_is_refused() {
    let yaml = fixture("hostile/configmap.yaml");
    let out = wasmloop(&["inspect", yaml.to_str().unwrap()]);
    fails_with(&out, 1, &["configmap.yaml is not a WebAssembly file"]);
}

#[test]
fn guest_gets_no_environment_filesystem_or_network() {
    let out = hostile("escape", &["-o", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let response: Value = serde_json::from_slice(&out.stdout).unwrap();
    let report = &response["actions"][0]["status"];
    assert_eq!(report["envVars"], 0, "{report}");
    assert!(report["rootDir"]["error"].is_string(), "the guest listed /: {report}");
    assert!(report["connect"]["error"].is_string(), "the guest opened a socket: {report}");
}

#[test]
fn actions_on_the_gone_primary_are_refused_in_phase_deleted() {
    let out = hostile("event", &["--phase", "deleted"]);
    fails_with(&out, 3, &["actions[0]: in phase deleted the primary is gone", "event: Warning PluginInvalidAction"]);
}

#[test]
fn a_guest_panic_is_retried_with_backoff() {
    let out = hostile("panic", &[]);
    fails_with(&out, 3, &["retry: with backoff"]);
}

#[test]
fn json_log_format_writes_one_json_object_per_line_with_the_plugin() {
    let plugin = component("pod_logger");
    let object = fixture("pod-logger/pod-pending.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_wasmloop"))
        .args([
            "--log-format",
            "json",
            "reconcile",
            "--plugin",
            plugin.to_str().unwrap(),
            "--object",
            object.to_str().unwrap(),
        ])
        .env("WASMLOOP_CACHE_DIR", cache_dir())
        .env("WASMLOOP_LOG", "info")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<Value> = stderr(&out).lines().map(|l| serde_json::from_str(l).expect("a JSON log line")).collect();
    let seen = lines
        .iter()
        .find(|l| l["fields"]["message"].as_str().is_some_and(|m| m.contains("seen (phase Pending)")))
        .unwrap();
    assert_eq!(seen["fields"]["plugin"], "pod-logger");
    assert_eq!(seen["level"], "INFO");
}

#[test]
fn run_refuses_two_plugins_of_one_name_before_connecting() {
    let plugin = component("pod_logger");
    let out = Command::new(env!("CARGO_BIN_EXE_wasmloop"))
        .args(["run", "--plugin", plugin.to_str().unwrap(), "--plugin", plugin.to_str().unwrap()])
        .env("WASMLOOP_CACHE_DIR", cache_dir())
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .unwrap();
    fails_with(&out, 1, &["are both plugin \"pod-logger\"", "plugin names must be unique"]);
}
