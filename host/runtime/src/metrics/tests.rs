//! What `/metrics` shows, and that a plugin gone takes its series with it.

use super::*;

#[test]
fn a_forgotten_plugin_leaves_no_series_behind() {
    let metrics = Metrics::new();
    let plugin = metrics.plugin("gone");
    plugin.reconciled(Outcome::Failed, Duration::from_millis(1));
    metrics.reconcile_failed("gone", "PluginTrapped");
    metrics.plugin_rejected("gone", "NotAPlugin");
    metrics.action("gone", "ConfigMap", "apply");
    metrics.quarantined("gone", true);
    metrics.shadow_reconciled("gone", "same");
    metrics.shard_running("gone", "replica-a", true);
    metrics.plugin("kept").reconciled(Outcome::Success, Duration::from_millis(1));
    metrics.forget_plugin("gone");
    let text = metrics.encode();
    assert!(!text.contains(r#"plugin="gone""#), "{text}");
    assert!(text.contains(r#"wasmloop_reconciles_total{plugin="kept",result="success"} 1"#), "{text}");
    assert_eq!(metrics.plugins_seen(), 0, "nothing is remembered of it");
}

#[test]
fn refused_plugins_named_anew_each_time_leave_no_series_once_forgotten() {
    let metrics = Metrics::new();
    for i in 0..1000 {
        let name = format!("made-up-{i}");
        metrics.plugin_rejected(&name, "NameTaken");
        metrics.forget_plugin(&name);
    }
    assert!(!metrics.encode().contains("made-up-"));
}

#[test]
fn the_guest_budgets_are_read_at_each_scrape() {
    let memory = MemoryBudget::new(384 << 20, Duration::from_secs(1));
    let cpu = Arc::new(CpuBudget::new(0.75, Duration::from_millis(5)));
    let text = Metrics::new().budgets(Some(memory), cpu).encode();
    assert!(text.contains("wasmloop_guest_memory_budget_bytes 402653184"), "{text}");
    assert!(text.contains("wasmloop_guest_memory_used_bytes 0"), "{text}");
    assert!(text.contains("wasmloop_guest_cpu_budget_cores 0.75"), "{text}");
}
