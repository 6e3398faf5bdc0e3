//! One plugin's misbehaving guest, contained in `wasmloop run` on the real control plane: it
//! frees its worker at its deadline, and SIGTERM stops it. The hostile plugin is confined to
//! its test's namespace (`plugins.hostile.namespace`), so it touches no other test's objects.

mod common;

use std::time::Duration;

use common::{Host, component, create_configmap, create_deployment, kubeconfig_as, labelled, millis};
use k8s_openapi::api::events::v1::Event;
use kube::api::Api;
use wasmloop_testenv::{TestNamespace, eventually, shared, wait_for_event};

/// `wasmloop --log-format json run` with `plugins` (test components), host.yaml `yaml` and
/// `extra` arguments. The config file lives as long as the host.
fn run_with(plugins: &[&str], yaml: &str, extra: &[&str]) -> (Host, tempfile::NamedTempFile) {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), yaml).unwrap();
    let mut args: Vec<std::ffi::OsString> = ["--log-format", "json", "run", "--config"].map(Into::into).into();
    args.push(config.path().into());
    for plugin in plugins {
        args.extend(["--plugin".into(), component(plugin).into()]);
    }
    args.extend(extra.iter().map(Into::into));
    (Host::start(args), config)
}

/// The hostile plugin in `mode`, confined to `ns`, with more of its settings
/// (`plugin_settings`, starting with a comma), top-level host.yaml lines and `extra` arguments.
fn hostile_in(
    ns: &TestNamespace,
    mode: &str,
    plugin_settings: &str,
    host_settings: &str,
    extra: &[&str],
) -> (Host, tempfile::NamedTempFile) {
    let yaml = format!(
        "{host_settings}plugins:\n  hostile: {{namespace: {}, config: {{{mode}}}{plugin_settings}}}\n",
        ns.name
    );
    run_with(&["hostile_plugin"], &yaml, extra)
}

async fn deadline_exceeded_on(ns: &TestNamespace, name: &'static str) {
    let events: Api<Event> = ns.api();
    wait_for_event(&events, Duration::from_secs(60), "a deadline Warning", move |e| {
        e.reason.as_deref() == Some("PluginDeadlineExceeded")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
            && e.note.as_deref().is_some_and(|n| n.contains("ran past its 300 ms deadline"))
    })
    .await;
}

#[tokio::test]
async fn a_guest_sleeping_in_a_clock_wait_fails_at_its_deadline_and_frees_its_only_worker() {
    let ns = shared().namespace("iso-sleep").await.unwrap();
    let (_host, _config) =
        hostile_in(&ns, "mode: sleep", ", maxConcurrentReconciles: 1", "", &["--deadline-ms", "300"]);
    create_configmap(&ns, "first").await;
    create_configmap(&ns, "second").await;
    // One worker: the second object is reconciled only if the first sleeper let it go.
    deadline_exceeded_on(&ns, "first").await;
    deadline_exceeded_on(&ns, "second").await;
}

#[tokio::test]
async fn sigterm_stops_a_guest_stuck_past_the_shutdown_timeout_and_exits_cleanly() {
    let ns = shared().namespace("iso-term").await.unwrap();
    // The guest may sleep for ten minutes; the host may drain for one second.
    let (mut host, _config) =
        hostile_in(&ns, "mode: sleep", "", "shutdownTimeoutSeconds: 1\n", &["--deadline-ms", "600000"]);
    create_configmap(&ns, "stuck").await;
    host.logged("sleeping on stuck").await;
    host.send_sigterm();
    let status = host.exited_within(Duration::from_secs(30), "the host to exit after its 1 s drain").await;
    assert!(status.success(), "exit status {status}");
    let output = host.output();
    assert!(!output.contains("panicked"), "the host panicked on the way out:\n{output}");
    host.logged("shutting down").await;
}

#[tokio::test]
async fn a_sigterm_while_a_plugin_waits_for_a_cache_that_cannot_sync_ends_the_start_and_exits_cleanly() {
    let ns = shared().namespace("iso-early").await.unwrap();
    // A user with no grants: the plugin's ConfigMap cache cannot list, so its install would
    // wait out the two-minute sync timeout.
    let kubeconfig = kubeconfig_as(&format!("host-{}", ns.name));
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), format!("plugins:\n  hostile: {{namespace: {}}}\n", ns.name)).unwrap();
    let mut args: Vec<std::ffi::OsString> = ["--log-format", "json", "run", "--config"].map(Into::into).into();
    args.extend([config.path().into(), "--plugin".into(), component("hostile_plugin").into()]);
    let mut host = Host::start_with(kubeconfig.path(), args);
    host.logged("watch failed; retrying with backoff").await;
    host.send_sigterm();
    // Well inside the sync timeout: the start did not run to its end first.
    let status = host.exited_within(Duration::from_secs(30), "the host to exit during its start").await;
    assert!(status.success(), "exit status {status}");
    assert!(!host.output().contains("panicked"), "the host panicked on the way out:\n{}", host.output());
    host.logged("signalled while plugins were loading").await;
    host.logged("shutting down").await;
}

#[tokio::test]
async fn a_plugin_asking_to_requeue_at_once_is_held_to_the_floor() {
    let ns = shared().namespace("iso-floor").await.unwrap();
    // Asks for 1 ms; the default floor is 1 s.
    let (host, _config) = hostile_in(&ns, "mode: requeue, intervalMs: 1", "", "", &[]);
    create_configmap(&ns, "storm").await;
    let ticks = host.wait_reconcile_lines(&format!("{}/storm", ns.name), "tick storm", 3).await;
    let times: Vec<f64> = ticks.iter().map(millis).collect();
    for pair in times.windows(2) {
        // Each requeue waits the floor after the reconcile that logged the previous tick.
        assert!(pair[1] - pair[0] >= 990.0, "requeued after {} ms: {times:?}", pair[1] - pair[0]);
    }
}

#[tokio::test]
async fn a_failed_reconcile_carries_out_its_event_and_retries_after_the_delay_the_plugin_chose() {
    let ns = shared().namespace("iso-retry").await.unwrap();
    // The backoff would retry after 5 ms; the plugin asks for 2 s.
    let (host, _config) = hostile_in(&ns, "mode: fail-with-event, intervalMs: 2000", "", "", &[]);
    create_configmap(&ns, "dep").await;
    let events: Api<Event> = ns.api();
    wait_for_event(&events, Duration::from_secs(60), "the plugin's own Event", |e| {
        e.reason.as_deref() == Some("StillWaiting") && e.type_.as_deref() == Some("Normal")
    })
    .await;
    wait_for_event(&events, Duration::from_secs(60), "the Warning of the failure", |e| {
        e.reason.as_deref() == Some("Waiting") && e.note.as_deref().is_some_and(|n| n.contains("waiting for something"))
    })
    .await;
    let tries = host.wait_reconcile_lines(&format!("{}/dep", ns.name), "fail-with-event try", 2).await;
    let (first, second) = (millis(&tries[0]), millis(&tries[1]));
    assert!(second - first >= 1990.0, "retried after {} ms", second - first);
}

#[tokio::test]
async fn a_conflicting_write_is_retried_and_converges() {
    let ns = shared().namespace("iso-conflict").await.unwrap();
    // Its first try writes with a resourceVersion no object has: a Conflict for certain.
    let (host, _config) = hostile_in(&ns, "mode: stale-write", "", "", &[]);
    create_configmap(&ns, "contended").await;
    let events: Api<Event> = ns.api();
    wait_for_event(&events, Duration::from_secs(60), "the Conflict Warning", |e| {
        e.reason.as_deref() == Some("Conflict")
            && e.note.as_deref().is_some_and(|n| n.contains("retrying with backoff"))
    })
    .await;
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = ns.api();
    eventually(Duration::from_secs(60), "the retried write", || {
        let configmaps = configmaps.clone();
        async move {
            let data = configmaps.get("contended").await.map_err(|e| e.to_string())?.data.unwrap_or_default();
            if data.get("written").map(String::as_str) == Some("yes") { Ok(()) } else { Err(format!("{data:?}")) }
        }
    })
    .await;
    let conflicts = r#"wasmloop_reconcile_errors_total{plugin="hostile",reason="Conflict"}"#;
    assert!(host.metric_or_zero(conflicts).await >= 1.0, "the conflict was not counted");
}

#[tokio::test]
async fn a_plugin_pages_through_the_shared_cache_in_order() {
    let ns = shared().namespace("iso-pages").await.unwrap();
    for i in 0..7 {
        create_configmap(&ns, &format!("cm-{i}")).await;
    }
    // Started after the seven exist: its cache holds them all before the first reconcile.
    let (_host, _config) = hostile_in(&ns, "mode: list-pages, limit: 3", "", "", &[]);
    let events: Api<Event> = ns.api();
    wait_for_event(&events, Duration::from_secs(60), "a paged listing", |e| {
        e.reason.as_deref() == Some("Listed") && e.note.as_deref() == Some("listed 7 in 3 pages, in order: true")
    })
    .await;
}

#[tokio::test]
async fn a_kind_watched_through_a_selector_is_cached_only_as_far_as_it_selects() {
    let ns = shared().namespace("iso-selected").await.unwrap();
    let (host, _config) = hostile_in(&ns, "mode: list-deployments", "", "", &[]);
    host.ready(Duration::from_secs(60), "the host ready: every plugin loaded, its caches synced").await;
    create_deployment(&ns, "plain").await;
    // Created after `plain`: a watch delivers in order, so once `mapped` reaches the plugin's
    // cache, `plain` would have too, were it cached. Its label makes `map` requeue the
    // ConfigMap `mapped`, whose reconcile lists what the cache holds.
    create_configmap(&ns, "mapped").await;
    deployment_for_map(&ns, "mapped", "same-name").await;
    let events: Api<Event> = ns.api();
    wait_for_event(&events, Duration::from_secs(60), "a listing that holds the mapped Deployment", |e| {
        e.reason.as_deref() == Some("Listed") && e.note.as_deref().is_some_and(|n| n.contains("mapped"))
    })
    .await;
    let listings = events.list(&Default::default()).await.unwrap().items;
    let listed: Vec<&str> =
        listings.iter().filter(|e| e.reason.as_deref() == Some("Listed")).filter_map(|e| e.note.as_deref()).collect();
    assert!(listed.iter().all(|n| !n.contains("plain")), "an unselected Deployment was cached: {listed:?}");
    let selected = format!(
        r#"wasmloop_watches_active{{kind="apps/v1/Deployment",namespace="{}",view="metadata",selector="wasmloop.dev/map"}}"#,
        ns.name
    );
    assert_eq!(host.metric(&selected).await, 1.0, "the selector went to the API server with the watch");
}

#[tokio::test]
async fn a_plugin_over_its_write_budget_waits_for_tokens_while_others_keep_writing() {
    let flooded = shared().namespace("iso-flood").await.unwrap();
    let apps = shared().namespace("iso-flood-apps").await.unwrap();
    // hostile: 12 Events per reconcile, 2 writes per second, bursts of 2.
    let yaml = format!(
        "plugins:\n  hostile: {{namespace: {}, writesPerSecond: 2, writeBurst: 2, config: {{mode: flood, count: 12}}}}\n  labeler: {{namespace: {}}}\n",
        flooded.name, apps.name
    );
    let (host, _config) = run_with(&["hostile_plugin", "labeler_plugin"], &yaml, &[]);
    create_configmap(&flooded, "trigger").await;
    eventually(Duration::from_secs(60), "hostile throttled", || {
        let host = &host;
        async move {
            let throttled = host.metric_or_zero(r#"wasmloop_writes_throttled_total{plugin="hostile"}"#).await;
            if throttled > 0.0 { Ok(()) } else { Err("not yet".to_owned()) }
        }
    })
    .await;
    // The other plugin's budget is its own.
    create_deployment(&apps, "web").await;
    labelled(&apps, "web", "v1").await;
    // Every flood Event is written, none lost, and the bucket spaced them: 10 beyond the
    // burst at 2 per second take at least 5 s.
    let events: Api<Event> = flooded.api();
    let times = eventually(Duration::from_secs(60), "all 12 flood Events", || {
        let events = events.clone();
        async move {
            let list = events.list(&Default::default()).await.map_err(|e| e.to_string())?;
            let mut times: Vec<_> = list
                .items
                .iter()
                .filter(|e| e.reason.as_deref() == Some("Flood"))
                .filter_map(|e| e.event_time.as_ref().map(|t| t.0))
                .collect();
            times.sort();
            if times.len() == 12 { Ok(times) } else { Err(format!("{} so far", times.len())) }
        }
    })
    .await;
    let span = times[11].duration_since(times[0]).as_secs_f64();
    assert!(span >= 4.5, "12 Events in {span} s at 2 per second, burst 2");
}

#[tokio::test]
async fn a_plugin_whose_calls_all_fail_is_quarantined_others_serve_and_a_success_lifts_it() {
    let ns = shared().namespace("iso-quarantine").await.unwrap();
    let apps = shared().namespace("iso-quarantine-apps").await.unwrap();
    let yaml = format!(
        "quarantine: {{afterSeconds: 1, minFailures: 3, firstProbeSeconds: 1, maxProbeSeconds: 2}}\nplugins:\n  hostile: {{namespace: {}, config: {{mode: panic-until-healed}}}}\n  labeler: {{namespace: {}}}\n",
        ns.name, apps.name
    );
    let (host, _config) = run_with(&["hostile_plugin", "labeler_plugin"], &yaml, &[]);
    create_configmap(&ns, "sick").await;

    // Every call traps: quarantined, and said so in the log, an Event, /readyz and a metric.
    host.logged("plugin quarantined: ").await;
    let events: Api<Event> = ns.api();
    wait_for_event(&events, Duration::from_secs(60), "PluginQuarantined", |e| {
        e.reason.as_deref() == Some("PluginQuarantined")
            && e.note.as_deref().is_some_and(|n| n.contains("plugin hostile quarantined"))
    })
    .await;
    let quarantined = r#"wasmloop_plugin_quarantined{plugin="hostile"}"#;
    assert_eq!(host.metric(quarantined).await, 1.0);
    let (status, body) = host.get("/readyz").await;
    assert_eq!(status, 200, "one plugin's quarantine does not make the host unready: {body}");
    assert!(body.contains("plugin hostile quarantined: ") && body.contains("calls failed"), "{body}");

    // The other plugin serves meanwhile.
    create_deployment(&apps, "web").await;
    labelled(&apps, "web", "v1").await;

    // The next probe succeeds: lifted, everywhere.
    let patch = serde_json::json!({"metadata": {"labels": {"wasmloop.dev/healed": "true"}}});
    ns.api::<k8s_openapi::api::core::v1::ConfigMap>()
        .patch("sick", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
        .await
        .unwrap();
    host.logged("quarantine lifted").await;
    assert_eq!(host.metric(quarantined).await, 0.0);
    let (_, body) = host.get("/readyz").await;
    assert!(!body.contains("quarantined"), "{body}");
}

/// Creates Deployment `name` in `ns` labelled for the hostile plugin's `map` to misbehave as
/// `mode` says.
async fn deployment_for_map(ns: &TestNamespace, name: &str, mode: &str) {
    let deployment: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"wasmloop.dev/map": mode}},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap();
    ns.api::<k8s_openapi::api::apps::v1::Deployment>()
        .create(&kube::api::PostParams::default(), &deployment)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_map_that_traps_or_names_no_primary_is_counted_and_logged_and_reconciles_go_on() {
    let ns = shared().namespace("iso-map").await.unwrap();
    let (host, _config) = hostile_in(&ns, "mode: requeue, intervalMs: 200", ", minRequeueAfterMs: 10", "", &[]);
    create_configmap(&ns, "ticker").await;
    let object = format!("{}/ticker", ns.name);
    host.wait_reconcile_lines(&object, "tick ticker", 2).await;
    let maps = |result: &str| format!(r#"wasmloop_maps_total{{plugin="hostile",result="{result}"}}"#);
    assert_eq!(host.metric(&maps("failed")).await, 0.0, "the series exist before any map");

    for (name, mode) in [("wrong", "wrong-kind"), ("bad", "bad-name"), ("trap", "panic"), ("ticker", "same-name")] {
        deployment_for_map(&ns, name, mode).await;
    }
    // Two invalid answers fail for good; a trap retries with backoff; a good answer succeeds.
    for (result, at_least) in [("failed", 2.0), ("retry", 2.0), ("success", 1.0)] {
        let series = maps(result);
        eventually(Duration::from_secs(60), &series, || {
            let (host, series) = (&host, series.clone());
            async move {
                let v = host.metric(&series).await;
                if v >= at_least { Ok(()) } else { Err(format!("{v} so far")) }
            }
        })
        .await;
    }
    // Each failure said once per line, naming the related object and why.
    let wrong = format!("Deployment {}/wrong", ns.name);
    let bad = format!("Deployment {}/bad", ns.name);
    for needle in [wrong.as_str(), bad.as_str(), "hostile map panicked on purpose"] {
        host.logged(needle).await;
    }
    let map_failures: Vec<String> = host
        .json_lines()
        .iter()
        .filter_map(|l| l["fields"]["message"].as_str().filter(|m| m.starts_with("map failed")).map(str::to_owned))
        .collect();
    let said = |both: [&str; 2]| map_failures.iter().any(|m| both.iter().all(|n| m.contains(n)));
    assert!(said([&wrong, "must name primaries (v1/ConfigMap) by name"]), "{map_failures:#?}");
    assert!(said([&bad, "map result [0]"]), "{map_failures:#?}");
    assert!(said(["Deployment", "hostile map panicked on purpose"]), "{map_failures:#?}");

    // The plugin's reconciles go on.
    let before = host.reconcile_lines(&object, "tick ticker").len();
    host.wait_reconcile_lines(&object, "tick ticker", before + 3).await;
}

#[tokio::test]
async fn a_map_that_keeps_trapping_earns_its_plugin_no_quarantine() {
    let ns = shared().namespace("iso-map-health").await.unwrap();
    // Quarantined after 1 s of nothing but failures, at least 3: far less than the map's.
    let policy = "quarantine: {afterSeconds: 1, minFailures: 3, firstProbeSeconds: 1, maxProbeSeconds: 2}\n";
    let (host, _config) = hostile_in(&ns, "mode: ok", "", policy, &[]);
    create_configmap(&ns, "quiet").await;
    let reconciled = r#"wasmloop_reconciles_total{plugin="hostile",result="success"}"#;
    eventually(Duration::from_secs(60), "the one reconcile", || async {
        // The series appears once the plugin has started.
        let v = host.metric_or_zero(reconciled).await;
        if v >= 1.0 { Ok(()) } else { Err(format!("{v}")) }
    })
    .await;
    deployment_for_map(&ns, "trap", "panic").await;
    // Caught up: a map failure logged more than 2 s after the first, so the plugin's calls
    // have been failing long enough, and often enough, for a quarantine had maps counted.
    let failures = || {
        host.json_lines()
            .into_iter()
            .filter(|l| l["fields"]["message"].as_str().is_some_and(|m| m.contains("hostile map panicked on purpose")))
            .map(|l| common::logged_time(&l))
            .collect::<Vec<_>>()
    };
    eventually(Duration::from_secs(60), "map failures over more than 2 s", || {
        let times = failures();
        async move {
            match (times.first(), times.last()) {
                (Some(first), Some(last)) if last.duration_since(*first).as_secs() >= 2 && times.len() >= 3 => Ok(()),
                _ => Err(format!("{} failures", times.len())),
            }
        }
    })
    .await;
    let quarantined = r#"wasmloop_plugin_quarantined{plugin="hostile"}"#;
    assert_eq!(host.metric_or_zero(quarantined).await, 0.0, "a failing map counted against the plugin's health");
    assert!(!host.output().contains("plugin quarantined"), "{}", host.output());
}

#[tokio::test]
async fn a_plugin_gets_managed_fields_only_when_it_keeps_them_and_the_last_applied_annotation_stripped() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let ns = shared().namespace("iso-fields").await.unwrap();
    // What `kubectl apply` leaves: the last-applied annotation, and managedFields.
    let configmaps: Api<ConfigMap> = ns.api();
    let applied: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "applied", "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"k\":\"v\"}}"}},
        "data": {"k": "v"}
    }))
    .unwrap();
    let live = configmaps.create(&kube::api::PostParams::default(), &applied).await.unwrap();
    assert!(live.metadata.managed_fields.is_some_and(|m| !m.is_empty()), "the API server records managedFields");
    // hostile keeps managedFields of ConfigMaps; noop, on the same ConfigMaps, keeps nothing.
    let yaml = format!(
        "plugins:\n  hostile: {{namespace: {ns}, config: {{mode: peek-fields}}}}\n  noop: {{namespace: {ns}}}\n",
        ns = ns.name
    );
    let (host, _config) = run_with(&["hostile_plugin", "noop_plugin"], &yaml, &[]);
    let events: Api<Event> = ns.api();
    let want = "request managedFields: true, last-applied: false; cache managedFields: true, last-applied: false";
    wait_for_event(&events, Duration::from_secs(60), "what reached the plugin", |e| {
        e.reason.as_deref() == Some("Peeked")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("applied")
            && e.note.as_deref() == Some(want)
    })
    .await;
    // The keeping plugin has an informer of its own: two watches of ConfigMaps in the
    // namespace, not one shared. Plugins load one after another: count once both have.
    host.ready(Duration::from_secs(60), "the host ready: every plugin loaded, its caches synced").await;
    let watches =
        format!(r#"wasmloop_watches_active{{kind="v1/ConfigMap",namespace="{}",view="full",selector=""}}"#, ns.name);
    assert_eq!(host.metric(&watches).await, 2.0);
    // hostile declares Deployments metadata-only, and watches them through a selector only:
    // watched as PartialObjectMetadata, through the selector.
    let deployments = format!(
        r#"wasmloop_watches_active{{kind="apps/v1/Deployment",namespace="{}",view="metadata",selector="wasmloop.dev/map"}}"#,
        ns.name
    );
    assert_eq!(host.metric(&deployments).await, 1.0);
}

#[tokio::test]
async fn sixty_objects_failing_with_unique_3_mb_errors_leave_the_hosts_memory_and_every_line_and_event_within_the_cut()
{
    let ns = shared().namespace("iso-huge-errors").await.unwrap();
    let (host, _config) = hostile_in(&ns, "mode: fail-huge, count: 3000000", "", "", &[]);
    host.ready(Duration::from_secs(60), "the hostile plugin serving").await;
    host.reset_peak_memory();
    let (idle, _) = host.memory_kib();
    for i in 0..60 {
        create_configmap(&ns, &format!("huge-{i}")).await;
    }
    let failed = r#"wasmloop_reconcile_errors_total{plugin="hostile",reason="ReconcileError"}"#;
    eventually(Duration::from_secs(120), "60 failed reconciles", || async {
        let v = host.metric_or_zero(failed).await;
        if v >= 60.0 { Ok(()) } else { Err(format!("{v}")) }
    })
    .await;
    let events: Api<Event> = ns.api();
    let cut = wait_for_event(&events, Duration::from_secs(60), "a cut failure Event", |e| {
        e.reason.as_deref() == Some("ReconcileError") && e.note.as_deref().is_some_and(|n| n.contains('…'))
    })
    .await;
    let (_, peak) = host.memory_kib();
    assert!(peak < idle + 50 * 1024, "peak resident memory {peak} KiB, idle {idle} KiB: the errors were kept");
    let limit = wasmloop_contract::validate::MAX_EVENT_NOTE;
    let notes = events.list(&Default::default()).await.unwrap();
    for event in &notes.items {
        let note = event.note.as_deref().unwrap_or_default();
        assert!(note.len() <= limit, "an Event note of {} bytes: {}", note.len(), &note[..200.min(note.len())]);
    }
    assert!(cut.note.unwrap_or_default().len() <= limit);
    let longest = host.output().lines().map(str::len).max().unwrap_or_default();
    assert!(longest <= 4 << 10, "a log line of {longest} bytes");
}

#[tokio::test]
async fn no_plugin_writes_into_a_plugin_namespace() {
    let ns = shared().namespace("iso-guarded").await.unwrap();
    let (_host, _config) = hostile_in(&ns, "mode: steal", "", "", &["--plugin-namespace", ns.name.as_str()]);
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = ns.api();
    let create = |name: &str, data: serde_json::Value| {
        serde_json::from_value::<k8s_openapi::api::core::v1::ConfigMap>(
            serde_json::json!({"metadata": {"name": name}, "data": data}),
        )
        .unwrap()
    };
    let params = kube::api::PostParams::default();
    configmaps.create(&params, &create("victim", serde_json::json!({"key": "value"}))).await.unwrap();
    let target = format!("{}/victim", ns.name);
    configmaps.create(&params, &create("thief", serde_json::json!({"target": target}))).await.unwrap();
    let events: Api<Event> = ns.api();
    wait_for_event(&events, Duration::from_secs(60), "the write refused", |e| {
        e.reason.as_deref() == Some("NotGranted")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("thief")
            && e.note.as_deref().is_some_and(|n| n.contains("ships plugins"))
    })
    .await;
    let victim = configmaps.get("victim").await.unwrap();
    assert!(!victim.data.unwrap_or_default().contains_key("stolen"), "the plugin namespace's ConfigMap is untouched");
}
