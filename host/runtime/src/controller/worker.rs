//! The workers: each takes work from the queue, reads the latest state from the cache, asks
//! `plan` what to do and does it through the plugin and the executor, then gives the work
//! back to the queue as the outcome says.
//!
//! A worker waits until the host leads, drops work while the plugin's access is revoked, and
//! puts a reconcile back (`add_after`) while the plugin is quarantined, so it holds no worker;
//! a `map` runs regardless.
//! - **Reconcile** (`reconcile_key`): the key is claimed in `RunningKeys` (held by an older
//!   version: retried in 100 ms; by this one: counted as an overlap) and runs in a task of its
//!   own, where a panic is a retry. `plan::step` picks nothing, a call in a phase, or the
//!   finalizer first, whose write requeues the key (in a dry run, whose writes never come back
//!   as events, the call follows at once). The actions go to the executor; `plan::follow_up` says
//!   what follows: a prune, the finalizer's release after `cleanup`, keeping the primary as
//!   the next call's `previous`. With `--record-dir` the call reads through
//!   `record::Recording` and its case goes to the context's sink; a seated shadow is handed
//!   the same request after the serving call.
//! - **Map** (`map_related`): the related object's latest state from `Memory` goes to the
//!   plugin's `map` with the cache view, and its answer becomes keys (`plan::mapped_keys`). A
//!   map stays out of the plugin's health: a quarantine is about reconciles, and a `map` that
//!   works must not lift one a trapping `reconcile` earned. A transient failure retries with
//!   the object's latest state; a permanent one waits for the next change.
//! - **Failures are visible where users look**: a Warning Event on the primary. Failures the
//!   host detected are written by the host's executor with fixed reasons (`failed`), so they
//!   are written even when the plugin may not write Events; an error the plugin returned goes
//!   through the plugin's executor and write budget, after its own `status` and `event`
//!   actions (`guest_failed`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;
use wasmloop_sandbox::{CallError, CallFailure, EventType, HostServices, Object, Phase, Request, Response, Trigger};

use super::memory::{Claim, RunningKeys};
use super::plan::{self, Child, Observed, Outcome, Requeue, Step};
use super::shared::Shared;
use super::triggers::reference;
use super::work::{Key, Related, Work};
use crate::executor::{ExecError, Executor};
use crate::informer::Entry;
use crate::metrics::Outcome as MetricOutcome;
use crate::quarantine::{Admission, Transition};
use crate::record::{self, Recording};

/// How long a key waits when an older version's reconcile still holds it.
const BUSY_RETRY: Duration = Duration::from_millis(100);

/// Releases a key and the in-flight count when its reconcile ends, however it ends: the
/// guard lives in the reconcile's own task, which outlives an aborted worker.
struct RunningGuard {
    shared: Arc<Shared>,
    running: Arc<RunningKeys>,
    key: Key,
    claimed: bool,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        if self.claimed {
            self.running.release(&self.key, self.shared.generation);
        }
        self.shared.plugin_metrics.in_flight(-1);
    }
}

/// One worker: takes work until the queue shuts down.
pub(super) async fn work(shared: Arc<Shared>) {
    let plugin = shared.id.as_str();
    let running = shared.running.get().cloned().expect("set before the workers start");
    let mut leading = shared.leading.clone();
    loop {
        // A standby queues keys but takes none until it leads.
        if leading.wait_for(|leads| *leads).await.is_err() {
            return;
        }
        let Some(work) = shared.queue.get().await else { return };
        let revoked = shared.denied.borrow().is_some();
        if !shared.leads() || revoked {
            // The lead went while this worker waited; or the plugin is served nothing while its
            // grant is revoked. Every primary is requeued on taking the lead or the grant back.
            if revoked {
                tracing::info!(plugin, key = %work, "skipped: access revoked");
            }
            if let Work::Map(related) = &work {
                shared.memory.take_related(related);
            }
            shared.queue.forget(&work);
            shared.queue.done(&work);
            continue;
        }
        shared.plugin_metrics.queue_depth(shared.queue.len());
        match &work {
            Work::Reconcile(key) => reconcile_key(&shared, &running, key).await,
            Work::Map(related) => map_related(&shared, related).await,
        }
        shared.queue.done(&work);
        shared.plugin_metrics.queue_depth(shared.queue.len());
    }
}

/// Reconciles one key in a task of its own, and requeues it as the outcome says.
async fn reconcile_key(shared: &Arc<Shared>, running: &Arc<RunningKeys>, key: &Key) {
    let plugin = shared.id.as_str();
    let work = Work::Reconcile(key.clone());
    let admission = shared.health.lock().expect("lock").admit(Instant::now());
    if let Admission::Defer(wait) = admission {
        // Quarantined: the key waits for the next probe instead of holding a worker.
        tracing::debug!(plugin, %key, ?wait, "deferred: plugin quarantined");
        shared.queue.add_after(work, wait);
        return;
    }
    let claimed = match running.claim(key, shared.generation) {
        Claim::Claimed => true,
        Claim::Busy => {
            shared.queue.add_after(work, BUSY_RETRY);
            return;
        }
        Claim::Overlap => {
            shared.plugin_metrics.overlapped();
            tracing::error!(plugin, object = %key, "two reconciles of one object at once; this is a wasmloop bug, please report it");
            false
        }
    };
    let attempt = shared.queue.retries(&work);
    let span = tracing::info_span!("reconcile", plugin, object = %key, attempt, actions = tracing::field::Empty, duration_ms = tracing::field::Empty);
    let started = Instant::now();
    shared.plugin_metrics.in_flight(1);
    let guard = RunningGuard { shared: shared.clone(), running: running.clone(), key: key.clone(), claimed };
    // Its own task: a panic in host code must not strand the key in `processing`, and a
    // worker aborted at shutdown leaves the reconcile (and its guard) to finish.
    let task = tokio::spawn({
        let (shared, key) = (shared.clone(), key.clone());
        async move {
            let _guard = guard;
            reconcile(&shared, &key, attempt).await
        }
        .instrument(span.clone())
    });
    let outcome = task.await.unwrap_or_else(|panic| {
        tracing::error!(plugin, object = %key, %panic, "reconcile panicked; retrying with backoff");
        Outcome::Retry
    });
    let took = started.elapsed();
    span.record("duration_ms", took.as_millis() as u64);
    if let Outcome::Done { actions, .. } = outcome {
        span.record("actions", actions);
        span.in_scope(|| tracing::debug!("reconciled"));
    }
    let result = requeue(shared, work, outcome);
    shared.plugin_metrics.reconciled(result, took);
}

/// Gives work back to the queue as `plan::requeue` says, and returns the metric's outcome.
fn requeue(shared: &Shared, work: Work, outcome: Outcome) -> MetricOutcome {
    // Why the key runs next: a requeue once it is due, a retry whenever it is.
    let because = |trigger: Trigger, due: Option<Duration>| {
        if let Work::Reconcile(key) = &work {
            let mut reasons = shared.reasons.lock().expect("lock");
            match due {
                Some(after) => reasons.add_due(key.clone(), trigger, Instant::now() + after),
                None => reasons.add(key.clone(), trigger),
            }
        }
    };
    match plan::requeue(outcome, shared.config.min_requeue) {
        Requeue::Forget => shared.queue.forget(&work),
        Requeue::After(after) => {
            because(Trigger::Requeue, Some(after));
            shared.queue.forget(&work);
            shared.queue.add_after(work, after);
        }
        Requeue::Backoff => {
            because(Trigger::Retry, None);
            shared.queue.add_rate_limited(work);
            shared.plugin_metrics.retried();
        }
        Requeue::RetryAfter(after) => {
            because(Trigger::Retry, None);
            // Held to the requeue floor already, and to the backoff's ceiling by the queue.
            shared.queue.add_retry_after(work, after);
            shared.plugin_metrics.retried();
        }
        Requeue::Defer(after) => shared.queue.add_after(work, after),
    }
    match outcome {
        Outcome::Done { .. } => MetricOutcome::Success,
        Outcome::Retry | Outcome::RetryAfter(_) => MetricOutcome::Retry,
        Outcome::Wait => MetricOutcome::Failed,
        Outcome::Deferred(_) => MetricOutcome::Deferred,
    }
}

/// Asks the plugin which primaries a related object's change concerns, and queues them. A
/// failure the plugin may get over is retried with backoff, with the object's latest state.
///
/// `map` stays out of the plugin's health: a quarantine is about its reconciles, and a `map`
/// that works must not lift one that a trapping `reconcile` earned (nor the reverse).
async fn map_related(shared: &Arc<Shared>, related: &Related) {
    let work = Work::Map(related.clone());
    let Some((entry, went)) = shared.memory.take_related(related) else {
        // Mapped already, with the latest state, by an earlier pass.
        shared.queue.forget(&work);
        return;
    };
    let started = Instant::now();
    let span = tracing::info_span!("map", plugin = %shared.id, object = %work);
    // Its own task, as a reconcile: a panic in host code must not take the worker with it.
    let task = tokio::spawn({
        let (shared, entry) = (shared.clone(), entry.clone());
        async move {
            let services: Arc<dyn HostServices> = shared.cache.clone();
            shared.plugin.map(&entry.envelope, went, &shared.config.plugin_config, services).await
        }
        .instrument(span.clone())
    });
    let outcome = match task.await {
        Ok(Ok(refs)) => {
            let served = shared.served_namespaces();
            let namespaced = shared.primary_namespaced();
            let keys = plan::mapped_keys(refs, entry.envelope.namespace.as_deref(), namespaced, &served);
            let queued = keys.len();
            let changed = reference(&entry);
            keys.into_iter().for_each(|key| shared.enqueue_because(key, Trigger::RelatedChanged(changed.clone())));
            Outcome::Done { actions: queued, requeue_after: None }
        }
        Ok(Err(error)) if error.failure.is_host_pressure() => {
            span.in_scope(|| tracing::info!("map deferred: {error}"));
            shared.memory.keep_related(related, (entry, went));
            Outcome::Deferred(plan::HOST_PRESSURE_RETRY)
        }
        Ok(Err(error)) => {
            let transient = error.failure.is_transient();
            span.in_scope(|| tracing::warn!(transient, "map failed: {error}"));
            if transient {
                shared.memory.keep_related(related, (entry, went));
            }
            plan::retry_of(transient, None, shared.config.min_requeue)
        }
        Err(panic) => {
            span.in_scope(|| tracing::error!(%panic, "map panicked; retrying with backoff"));
            shared.memory.keep_related(related, (entry, went));
            Outcome::Retry
        }
    };
    let result = requeue(shared, work, outcome);
    shared.plugin_metrics.mapped(result, started.elapsed());
}

async fn reconcile(shared: &Arc<Shared>, key: &Key, attempt: u32) -> Outcome {
    let cached = shared.primary(key);
    let tombstone = if cached.is_none() { shared.memory.take_tombstone(key) } else { None };
    let observed = match &cached {
        None => Observed::Absent { tombstone: tombstone.is_some() },
        Some(entry) => Observed::Present {
            deleting: entry.deleting(),
            selected: entry.selected() && entry.selected_by(&shared.selector),
            finalizers: entry.finalizers(),
        },
    };
    let finalizer = shared.manifest.finalizer.as_deref();
    match plan::step(observed, finalizer, shared.executor.writes_requeue()) {
        Step::Nothing => {
            // Gone, or not the plugin's: its reasons go with it (a `map` may name anything).
            shared.reasons.lock().expect("lock").forget(key);
            Outcome::NOTHING
        }
        Step::Call(Phase::Deleted) => {
            let last = tombstone.expect("planned from a tombstone");
            let outcome = call(shared, key, last.clone(), Phase::Deleted, attempt).await;
            if !outcome.retries() {
                // Delivered: no requeue of it is due any more.
                shared.reasons.lock().expect("lock").forget(key);
            }
            if outcome.retries() {
                shared.memory.keep_tombstone(key, last);
            }
            outcome
        }
        Step::Call(phase) => call(shared, key, cached.expect("planned from the cache"), phase, attempt).await,
        Step::AddFinalizer { then_apply } => {
            let entry = cached.expect("planned from the cache");
            let f = finalizer.expect("planned from the manifest");
            let added = shared.executor.add_finalizer(&shared.manifest, &entry.envelope, entry.finalizers(), f).await;
            match added {
                Err(error) => {
                    failed(shared, &entry.envelope, &error.to_string(), error.event_reason(), error.is_transient())
                        .await
                }
                // The update requeues the key: the next pass calls the plugin.
                Ok(()) if !then_apply => Outcome::NOTHING,
                Ok(()) => call(shared, key, entry, Phase::Apply, attempt).await,
            }
        }
    }
}

async fn call(shared: &Arc<Shared>, key: &Key, entry: Arc<Entry>, phase: Phase, attempt: u32) -> Outcome {
    let request = request_for(shared, key, &entry, phase, attempt);
    let recording = shared.record.as_ref().map(|recorder| {
        Recording::new(shared.cache.clone(), shared.manifest.metadata_only.clone(), recorder.key.clone())
    });
    let services: Arc<dyn HostServices> = match &recording {
        Some(recording) => recording.clone(),
        None => shared.cache.clone(),
    };
    // A future on this task: the guest's log lines stay in the reconcile's span, and the
    // deadline holds even while the guest waits in a host call.
    let (result, timings) = shared.plugin.reconcile_timed(&request, services).await;
    shared.plugin_metrics.memory_waited(timings.memory_waits);
    if let Err(error) = &result
        && error.failure.is_host_pressure()
    {
        // The host had no room for it: not the plugin's doing, so it is neither recorded, nor
        // compared with a shadow, nor counted against the plugin; the key comes back shortly.
        tracing::info!(plugin = %shared.id, %key, "deferred: {error}");
        // The call did not happen: its reasons wait for the one that will.
        let reasons = (request.triggers, request.triggers_dropped);
        shared.reasons.lock().expect("lock").put_back(key.clone(), reasons);
        return Outcome::Deferred(plan::HOST_PRESSURE_RETRY);
    }
    if let (Some(recorder), Some(recording)) = (&shared.record, recording) {
        (recorder.sink)(record::case(&shared.plugin, &request, &recording, &result));
    }
    shared.plugin_metrics.instantiated(timings.instantiate);
    // Every failed call counts against the plugin's health, its own errors included: a
    // plugin that fails its objects on purpose still costs workers and Events.
    let healthy = result.is_ok();
    record_health(shared, &entry.envelope, healthy).await;
    if shared.denied.borrow().is_some() {
        // Revoked while the guest ran: what it answered rests on reads it may no longer make.
        // Every primary is requeued when access is granted again.
        tracing::info!(plugin = %shared.id, %key, "skipped: access revoked");
        return Outcome::NOTHING;
    }
    if let Some(shadow) = shared.shadow.current() {
        // After the serving call, on the same request and caches; it returns at once.
        shadow.compare(&shared.manifest, request, shared.cache.clone(), &result);
    }
    match result {
        Ok(response) => carry_out(shared, key, entry, phase, response).await,
        Err(error) => {
            let transient = error.failure.is_transient();
            guest_failed(shared, &entry.envelope, &error, transient).await
        }
    }
}

/// What the plugin is called with for `key`'s `entry` in `phase`: its children (none once it
/// is gone), the version it saw last, and why it runs.
fn request_for(shared: &Shared, key: &Key, entry: &Entry, phase: Phase, attempt: u32) -> Request {
    let uid = &entry.envelope.uid;
    let owned: Vec<Object> = if phase == Phase::Deleted {
        Vec::new()
    } else {
        shared.owned.iter().flat_map(|i| i.owned_by(uid)).map(|e| e.envelope.clone()).collect()
    };
    let previous = shared
        .manifest
        .deliver_previous
        .then(|| shared.memory.previous(key, uid))
        .flatten()
        .map(|e| e.envelope.clone());
    let (triggers, triggers_dropped) = shared.reasons.lock().expect("lock").take(key, Instant::now());
    Request {
        object: entry.envelope.clone(),
        owned,
        phase,
        previous,
        attempt,
        config: shared.config.plugin_config.clone(),
        triggers,
        triggers_dropped,
    }
}

/// Carries out what the plugin answered for `key`: its actions, then what the plan makes of
/// them (prune, release the finalizer, remember what it saw).
async fn carry_out(shared: &Arc<Shared>, key: &Key, entry: Arc<Entry>, phase: Phase, response: Response) -> Outcome {
    let uid = entry.envelope.uid.clone();
    let primary = &entry.envelope;
    let executor = &shared.executor;
    let applied = match executor.execute(&shared.manifest, primary, &response.actions).await {
        Ok(applied) => applied,
        Err(error) => {
            if let ExecError::Conflict { conflict, .. } = &error {
                // The plugin decides: its next reconcile is told which fields, and whose.
                shared.reasons.lock().expect("lock").add(key.clone(), conflict_trigger(conflict));
            }
            return failed(shared, primary, &error.to_string(), error.event_reason(), error.is_transient()).await;
        }
    };
    let follow_up = plan::follow_up(phase, &shared.manifest, response.prune);
    if follow_up.prune {
        let children: Vec<Arc<Entry>> = shared.owned.iter().flat_map(|i| i.owned_by(&uid)).collect();
        let children = children.iter().map(|c| Child {
            object: &c.envelope,
            controller: c.owner_references().iter().find(|o| o.controller == Some(true)).map(|o| o.uid.as_str()),
        });
        let stale: Vec<_> =
            plan::prune_targets(&uid, children, &applied).into_iter().map(wasmloop_sandbox::Action::Delete).collect();
        if let Err(error) = executor.execute(&shared.manifest, primary, &stale).await {
            return failed(shared, primary, &error.to_string(), error.event_reason(), error.is_transient()).await;
        }
    }
    if follow_up.release_finalizer {
        let f = shared.manifest.finalizer.as_deref().expect("planned from the manifest");
        if let Err(error) = executor.release_finalizer(&shared.manifest, primary, f).await {
            return failed(shared, primary, &error.to_string(), error.event_reason(), error.is_transient()).await;
        }
    }
    if follow_up.remember {
        shared.memory.remember(key, entry);
    }
    Outcome::Done { actions: response.actions.len(), requeue_after: response.requeue_after }
}

/// The contract's `conflict` trigger for a non-forced apply that met other managers' fields.
fn conflict_trigger(conflict: &crate::executor::conflicts::Conflict) -> Trigger {
    let t = &conflict.target;
    Trigger::Conflict(wasmloop_sandbox::ApplyConflict {
        target: wasmloop_sandbox::WitObjectRef {
            api_version: t.api_version.clone(),
            kind: t.kind.clone(),
            name: t.name.clone(),
            namespace: t.namespace.clone(),
            uid: None,
        },
        fields: conflict
            .fields
            .iter()
            .map(|f| wasmloop_sandbox::FieldConflict { manager: f.manager.clone(), field: f.field.clone() })
            .collect(),
        more: conflict.more,
    })
}

/// Records how a guest call ended in the plugin's health, and reports a quarantine entered or
/// lifted: in the log, the metrics, the host's board (`/readyz`) and an Event on `primary`.
async fn record_health(shared: &Shared, primary: &Object, healthy: bool) {
    let plugin = shared.id.as_str();
    let transition = shared.health.lock().expect("lock").record(healthy, Instant::now(), &shared.config.quarantine);
    match transition {
        Some(Transition::Entered(reason)) => {
            shared.quarantines.set(plugin, Some(&reason));
            shared.metrics.quarantined(plugin, true);
            tracing::error!(plugin, "plugin quarantined: {reason}");
            let note = format!("plugin {plugin} quarantined: {reason}; fix the plugin or its limits");
            shared.executor.charge(&shared.id).await;
            if let Err(error) = shared
                .host_executor
                .event(&shared.manifest, primary, EventType::Warning, "PluginQuarantined", &note, None)
                .await
            {
                tracing::warn!(%error, "could not record the quarantine as an Event");
            }
        }
        Some(Transition::Lifted) => {
            shared.quarantines.set(plugin, None);
            shared.metrics.quarantined(plugin, false);
            tracing::info!(plugin, "quarantine lifted: a call succeeded; requeueing every primary");
            shared.enqueue_all(|_| Trigger::Resync);
        }
        None => {}
    }
}

/// Logs a failed reconcile and records it as a Warning Event on the primary, written as the
/// host: only for failures the host detected and names with a reason of its own.
async fn failed(shared: &Shared, primary: &Object, message: &str, reason: &'static str, transient: bool) -> Outcome {
    let retry = plan::retry_of(transient, None, shared.config.min_requeue);
    failed_as(shared, &shared.host_executor, primary, message, (reason, reason), retry).await
}

/// A failed guest call. Traps, deadlines and broken limits are the host's findings, reported
/// as the host; an error the plugin returned carries the plugin's own reason and words, so it
/// is recorded as the plugin, and paid from its write budget, like any Event it emits.
///
/// A plugin's error may carry status and event actions (a condition saying why): they are
/// carried out first, as the plugin, and a retry delay it chose replaces the backoff.
async fn guest_failed(shared: &Shared, primary: &Object, error: &CallError, transient: bool) -> Outcome {
    let (message, reason) = (error.to_string(), error.failure.event_reason());
    let CallFailure::Plugin { retry_after, actions, .. } = &error.failure else {
        let metric = error.failure.metric_reason();
        let retry = plan::retry_of(transient, None, shared.config.min_requeue);
        return failed_as(shared, &shared.host_executor, primary, &message, (reason, metric), retry).await;
    };
    if !primary.uid.is_empty() {
        if let Err(e) = shared.executor.execute(&shared.manifest, primary, actions).await {
            tracing::warn!(error = %e, "could not carry out the actions of a failed reconcile");
        }
    }
    let retry = plan::retry_of(transient, *retry_after, shared.config.min_requeue);
    failed_as(shared, &shared.executor, primary, &message, (reason, error.failure.metric_reason()), retry).await
}

async fn failed_as(
    shared: &Shared,
    writer: &Executor,
    primary: &Object,
    message: &str,
    (reason, metric): (&str, &'static str),
    retry: Outcome,
) -> Outcome {
    let transient = retry.retries();
    // The message may quote a plugin's words or an API server's answer about them: cut once,
    // for the log line and the Event alike.
    let message = &wasmloop_contract::validate::foreign(message);
    tracing::warn!(reason, transient, "{message}");
    // The metric's reason label comes from a fixed set; a plugin's own reasons would not be.
    shared.metrics.reconcile_failed(shared.id.as_str(), metric);
    if !primary.uid.is_empty() {
        let next = match &retry {
            Outcome::RetryAfter(after) => format!("retrying in {} ms, as the plugin asked", after.as_millis()),
            Outcome::Retry => "retrying with backoff".to_owned(),
            _ => "waiting for the object or the plugin to change".to_owned(),
        };
        let note = format!("{message} ({next})");
        // Every Event about a plugin is paid from its write budget, the host's findings too:
        // a plugin that fails every object cannot make the host write without limit.
        shared.executor.charge(&shared.id).await;
        if let Err(error) = writer.event(&shared.manifest, primary, EventType::Warning, reason, &note, None).await {
            tracing::warn!(%error, "could not record the failure as an Event");
        }
    }
    retry
}
