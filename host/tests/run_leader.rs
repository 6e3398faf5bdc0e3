//! Leader election (`--leader-elect`) between two `wasmloop run` processes on the real
//! control plane.

mod common;

use std::time::Duration;

use common::{Host, confined_hostile_as, create_configmap, grant_user, hostile, kubeconfig_as, logged_time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use wasmloop_testenv::{TestNamespace, eventually, shared};

/// The shortest the host allows: renewed halfway, and a leader that cannot renew stops 0.75 s
/// before the Lease expires.
const LEASE_SECONDS: u64 = 6;

/// A host running hostile in requeue mode (a "tick" log line every 500 ms per ConfigMap),
/// campaigning for a Lease in `ns`.
fn candidate(ns: &TestNamespace) -> (Host, tempfile::NamedTempFile) {
    candidate_with_lease(ns, LEASE_SECONDS)
}

fn candidate_with_lease(ns: &TestNamespace, seconds: u64) -> (Host, tempfile::NamedTempFile) {
    let args = lease_args(ns, seconds);
    hostile("requeue", &args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>())
}

/// Campaigning for Lease `wasmloop` in `ns`, of `seconds`.
fn lease_args(ns: &TestNamespace, seconds: u64) -> Vec<std::ffi::OsString> {
    let args =
        ["--leader-elect", "--leader-election-namespace", &ns.name, "--lease-duration-seconds", &seconds.to_string()];
    args.iter().map(Into::into).collect()
}

fn ticks(host: &Host, object: &str) -> Vec<Timestamp> {
    host.reconcile_lines(object, "tick ").iter().map(logged_time).collect()
}

/// When the host first logged `text`; call it once [`Host::logged`] has seen the line.
fn logged_at(host: &Host, text: &str) -> Timestamp {
    host.json_lines()
        .iter()
        .find(|l| l["fields"]["message"].as_str().is_some_and(|m| m.contains(text)))
        .map(logged_time)
        .unwrap_or_else(|| panic!("the host has not logged {text:?}"))
}

#[tokio::test]
async fn only_the_leader_reconciles_and_a_standby_takes_over_within_the_lease_after_a_sigkill() {
    let ns = shared().namespace("leader").await.unwrap();
    create_configmap(&ns, "ticker").await;
    let object = format!("{}/ticker", ns.name);

    let (mut first, _first_config) = candidate(&ns);
    first.metric_until("wasmloop_leader", "the first host to lead", |v| v == 1.0).await;
    let (second, _second_config) = candidate(&ns);
    // The standby's plugin is installed: caches synced, workers started and waiting for the lead.
    second.ready(Duration::from_secs(60), "the standby ready").await;
    // Give the standby time in which it could have reconciled: the leader ticks meanwhile.
    let before = ticks(&first, &object).len();
    eventually(Duration::from_secs(30), "the leader ticking while the standby waits", || {
        let n = ticks(&first, &object).len();
        async move { if n >= before + 4 { Ok(()) } else { Err(format!("{} new ticks", n - before)) } }
    })
    .await;
    assert!(ticks(&second, &object).is_empty(), "the standby reconciled");
    assert_eq!(second.metric("wasmloop_leader").await, 0.0);
    assert_eq!(first.metric("wasmloop_leader").await, 1.0);

    first.kill();
    // The host's log timestamps and this are the same UTC clock.
    let killed = Timestamp::now();
    second.logged("acquired the leader Lease").await;
    let acquired = logged_at(&second, "acquired the leader Lease");
    let took_over = acquired.duration_since(killed);
    // The Lease runs out LEASE_SECONDS after the last renewal, which came before the kill;
    // the 3 s beyond it cover the standby's next attempt on a loaded machine.
    let bound = SignedDuration::from_secs(LEASE_SECONDS as i64 + 3);
    assert!(took_over < bound, "took over {} ms after the SIGKILL", took_over.as_millis());
    eventually(Duration::from_secs(30), "the new leader ticking", || {
        let n = ticks(&second, &object).len();
        async move { if n >= 2 { Ok(()) } else { Err(format!("{n} ticks")) } }
    })
    .await;
    // In the order the new leader wrote them: it reconciled only once it held the Lease.
    let lines = second.json_lines();
    let message = |l: &serde_json::Value| l["fields"]["message"].as_str().unwrap_or_default().to_owned();
    let acquired_at = lines.iter().position(|l| message(l).contains("acquired the leader Lease")).unwrap();
    let first_tick_at =
        lines.iter().position(|l| l["span"]["object"] == object.as_str() && message(l).contains("tick ")).unwrap();
    assert!(acquired_at < first_tick_at, "the standby reconciled before it acquired the Lease");
    let (last_of_first, first_of_second) = (*ticks(&first, &object).last().unwrap(), ticks(&second, &object)[0]);
    assert!(last_of_first < first_of_second, "the object was reconciled by both hosts at once");
}

#[tokio::test]
async fn a_leader_stopped_with_sigterm_hands_the_lease_over_without_waiting_for_it_to_expire() {
    let ns = shared().namespace("leader-term").await.unwrap();
    // A long Lease: a standby that had to wait for it to expire would take 30 s.
    let (mut first, _first_config) = candidate_with_lease(&ns, 30);
    first.metric_until("wasmloop_leader", "the first host to lead", |v| v == 1.0).await;
    let (second, _second_config) = candidate_with_lease(&ns, 30);
    second.ready(Duration::from_secs(60), "the standby ready: its plugin installed").await;

    let status = first.terminate();
    assert!(status.success(), "a graceful shutdown exits 0, got {status}");
    // The process has exited, but its last lines may still be in the pipe.
    first.logged("released the leader Lease").await;
    second.logged("acquired the leader Lease").await;
    let took_over =
        logged_at(&second, "acquired the leader Lease").duration_since(logged_at(&first, "released the leader Lease"));
    assert!(
        took_over < SignedDuration::from_secs(10),
        "took over {} ms after the leader released the Lease, with a 30 s Lease",
        took_over.as_millis()
    );
}

#[tokio::test]
async fn a_leader_whose_lease_another_host_takes_stops_reconciling_and_exits() {
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{Api, Patch, PatchParams};

    let ns = shared().namespace("leader-usurped").await.unwrap();
    let (mut leader, _config) = candidate_with_lease(&ns, 30);
    leader.metric_until("wasmloop_leader", "the host to lead", |v| v == 1.0).await;
    // Another holder renews the Lease as its own, as a host that missed our renewals would.
    let usurp = serde_json::json!({"spec": {
        "holderIdentity": "usurper",
        "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(Timestamp::now()),
    }});
    let leases: Api<Lease> = ns.api();
    leases.patch("wasmloop", &PatchParams::default(), &Patch::Merge(&usurp)).await.unwrap();
    leader.logged("exiting so that no reconcile runs beside the new leader's").await;
    let said = leader.json_lines().iter().any(|l| {
        l["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("another host holds the leader Lease") || m.contains("lost the leader Lease"))
    });
    assert!(said, "the exit does not say the Lease was taken: {}", leader.output());
    let status = leader.exited_within(Duration::from_secs(30), "the usurped leader to exit").await;
    assert_eq!(status.code(), Some(1), "{}", leader.output());
}

/// A leader acting as a plain user who may read its Lease (RoleBinding `lease-read`) and
/// write it (`lease-write`); the test takes one of the two away once it reconciles. It must
/// exit before the last Lease it managed to renew expires, and neither reconcile nor live
/// after that.
async fn a_leader_losing_its_lease_binding_exits_before_the_lease_expires(scenario: &str, revoked: &str) {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::rbac::v1::RoleBinding;
    use kube::api::DeleteParams;

    let ns = shared().namespace(scenario).await.unwrap();
    let user = format!("leader-{}", ns.name);
    let watch = serde_json::json!(["list", "watch"]);
    let host_rules = serde_json::json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": watch},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": watch},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]);
    grant_user(&ns, "host", &user, host_rules).await;
    // The verbs deploy/ grants the host on leases, split in two.
    let leases = |verbs: serde_json::Value| serde_json::json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": verbs}]);
    grant_user(&ns, "lease-read", &user, leases(serde_json::json!(["get"]))).await;
    grant_user(&ns, "lease-write", &user, leases(serde_json::json!(["create", "patch"]))).await;
    create_configmap(&ns, "ticker").await;
    let object = format!("{}/ticker", ns.name);
    let kubeconfig = kubeconfig_as(&user);
    let args = lease_args(&ns, LEASE_SECONDS);
    let extra: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let (mut leader, _config) = confined_hostile_as(kubeconfig.path(), &ns.name, "requeue", &extra);
    leader.metric_until("wasmloop_leader", "the host to lead", |v| v == 1.0).await;
    leader.wait_reconcile_lines(&object, "tick ticker", 2).await;

    ns.api::<RoleBinding>().delete(revoked, &DeleteParams::default()).await.unwrap();
    let reason = "could not confirm the leader Lease within its renew deadline";
    leader.logged(reason).await;
    let status = leader.exited_within(Duration::from_secs(30), "the leader to exit").await;
    assert_eq!(status.code(), Some(1), "{}", leader.output());
    for other in ["lost the leader Lease", "another host holds", "the leader-election task ended"] {
        assert!(!leader.output().contains(other), "exited for another reason ({other}):\n{}", leader.output());
    }
    // The last renewal that got through decides when another host may take over.
    let lease = ns.api::<Lease>().get("wasmloop").await.unwrap().spec.unwrap();
    let expiry = lease.renew_time.unwrap().0 + SignedDuration::from_secs(LEASE_SECONDS as i64);
    let exited = logged_at(&leader, reason);
    let last_tick = *ticks(&leader, &object).last().unwrap();
    assert!(last_tick < expiry, "reconciled at {last_tick}, after its Lease expired at {expiry}");
    assert!(exited < expiry, "exited at {exited}, after its Lease expired at {expiry}");
}

// Reads still show the Lease as this host's and unexpired, right up to its expiry: only the
// renewal time tells the leader to stop.
#[tokio::test]
async fn a_leader_whose_renewals_are_refused_exits_before_its_lease_expires() {
    a_leader_losing_its_lease_binding_exits_before_the_lease_expires("leader-unrenewed", "lease-write").await;
}

#[tokio::test]
async fn a_leader_that_cannot_read_its_lease_exits_before_the_lease_expires() {
    a_leader_losing_its_lease_binding_exits_before_the_lease_expires("leader-blind", "lease-read").await;
}
