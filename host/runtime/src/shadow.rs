//! Shadow mode: a candidate version of a plugin called beside the serving version, with the
//! same request and the same caches, every time the serving version is called. Its response is
//! compared with the serving version's ([`crate::compare`]) and counted; nothing it returns is
//! carried out.
//!
//! What keeps a shadow from touching what serves:
//! - it has no executor, so it writes nothing, and no write budget to spend;
//! - it has its own instances, reserved from the pool like any plugin's, and is only called
//!   when one is free: a busy shadow skips a comparison (counted `skipped`) rather than make
//!   the serving version wait;
//! - its calls run in tasks of their own, after the serving version's call has returned, and
//!   their failures count against the shadow only: no retry, no quarantine, no Event on the
//!   primary;
//! - it reads through the serving version's caches, so under the serving version's identity
//!   and scope; a kind the serving version does not cache is refused to it, by name, and it
//!   must read metadata-only whatever the serving version reads metadata-only, and select
//!   what it selects of a kind watched through selectors ([`fits`]);
//! - it stands only beside a version from its own realm (the same plugin namespace, or the
//!   operator's files: seats are kept by realm and plugin), so a ConfigMap writer cannot
//!   shadow, or by promotion replace, another namespace's plugin.
//!
//! A shadow is a second `Plugin`, not a second controller. The registry keeps one
//! [`ShadowSeat`] per realm and plugin name, apart from the serving versions' slots, and hands
//! it to every version's controller, so a shadow seated before its plugin serves, or kept
//! across a new serving version, is called without rewiring. It gets the serving request, not
//! one rebuilt later; its look-ups are answered at its own call time, so a change between the
//! two calls can make them differ (rare; the next reconcile compares again); answering it from
//! the serving call's recorded look-ups would be exact, at the cost of recording every call.
//! [`ShadowSeat::seat`] checks and swaps under one lock, so two sources cannot both win a seat.
//! Findings flow one way: counts to the metric and a `watch` channel ([`ShadowReport`]), which
//! the registry forwards to the status writer at most once a second. Failures compare by
//! class (a trap, a deadline, a broken limit), whatever their messages say of timings.
//!
//! Promotion is a normal load: a source offering as serving, unchanged, the version it shadows
//! takes the plugin's slot from the source of its realm that held it, reuses the shadow's
//! instances (a full pool cannot stop it) and empties the seat first, so it is never compared
//! with itself; the status writer then marks the superseded object, which a restart reads.
//! Left out: a shadow's `map` (the serving version decides which keys run) and acting on its
//! `requeue-after` (compared only). While one is seated, replacing the serving version needs
//! room in the pool for three versions at once.
//!
//! ```
//! use wasmloop_runtime::compare::ShadowResult;
//! use wasmloop_runtime::shadow::ShadowReport;
//! let mut report = ShadowReport::default();
//! report.count(ShadowResult::Same, "Foo default/a", None, "2026-11-23T00:00:00Z");
//! report.count(ShadowResult::Differing, "Foo default/b", Some("-a\n+b\n".into()), "2026-11-23T00:00:01Z");
//! report.count(ShadowResult::Skipped, "Foo default/c", None, "2026-11-23T00:00:02Z");
//! assert_eq!((report.compared, report.same, report.differing, report.skipped), (2, 1, 1, 1));
//! assert_eq!(report.latest.as_ref().map(|d| d.object.as_str()), Some("Foo default/b"));
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use serde::Serialize;
use tokio::sync::{Semaphore, watch};
use wasmloop_sandbox::{CallError, Gvk, HostServices, Manifest, Object, Plugin, Request, Response, SourceId};

use crate::compare::{self, ShadowResult};
use crate::metrics::Metrics;
use crate::record;

/// The most of a diff a report keeps: enough to see what changed, small enough for an
/// annotation.
const DIFF_BYTES: usize = 2048;

/// What a shadow has found so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowReport {
    /// Calls compared: same, differing and failed.
    pub compared: u64,
    /// Same response, or same failure.
    pub same: u64,
    /// Another response.
    pub differing: u64,
    /// The shadow failed where the serving version did not fail the same way.
    pub failed: u64,
    /// Not compared: the shadow's instances were all busy.
    pub skipped: u64,
    /// The latest comparison that was neither the same nor skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest: Option<Difference>,
}

/// One comparison that found a difference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// The primary, as `Kind namespace/name`.
    pub object: String,
    /// `differing` or `failed`.
    pub result: ShadowResult,
    /// The serving outcome against the shadow's, as a unified diff, cut to 2 KiB.
    pub diff: String,
    /// When (RFC 3339).
    pub at: String,
}

impl ShadowReport {
    /// Counts one comparison of `object`; a difference becomes the latest one.
    pub fn count(&mut self, result: ShadowResult, object: &str, diff: Option<String>, at: &str) {
        if result != ShadowResult::Skipped {
            self.compared += 1;
        }
        let counter = match result {
            ShadowResult::Same => &mut self.same,
            ShadowResult::Differing => &mut self.differing,
            ShadowResult::Failed => &mut self.failed,
            ShadowResult::Skipped => &mut self.skipped,
        };
        *counter += 1;
        if matches!(result, ShadowResult::Differing | ShadowResult::Failed) {
            let diff = diff.unwrap_or_default();
            self.latest = Some(Difference { object: object.to_owned(), result, diff, at: at.to_owned() });
        }
    }

    /// Differences and failures found.
    pub fn differences(&self) -> u64 {
        self.differing + self.failed
    }
}

/// Whether a candidate may shadow a serving version: the same primary kind, every kind the
/// serving version reads metadata-only read metadata-only by the candidate too (the sandbox
/// strips objects by the candidate's own manifest), the same selection of every kind (the
/// caches hold only what the serving version's selected watches select) and the same kept
/// fields.
///
/// # Errors
/// What does not fit, and what to change.
pub fn fits(serving: &Manifest, candidate: &Manifest) -> Result<(), Misfit> {
    let (primary, theirs) = (&candidate.primary.kind, &serving.primary.kind);
    if primary != theirs {
        return Err(Misfit::Primary { primary: primary.clone(), serving: theirs.clone() });
    }
    let whole: Vec<String> =
        serving.metadata_only.iter().filter(|k| !candidate.is_metadata_only(k)).map(Gvk::to_string).collect();
    if !whole.is_empty() {
        return Err(Misfit::ReadsWhole { kinds: whole.join(", ") });
    }
    // It reads through the serving version's caches, which hold what that version's watches
    // select: a shadow that selects otherwise would be compared on a cache it would not have.
    // Only a watched kind can be selected, and this runs before every shadow call: compare
    // those alone.
    let watched = serving.watches.iter().chain(&candidate.watches).map(|w| &w.kind);
    if let Some(kinds) = differing(watched, |k| serving.visible(k) != candidate.visible(k)) {
        return Err(Misfit::Selection { kinds });
    }
    // It reads through the serving version's caches, which keep what that version keeps: a
    // shadow keeping other fields would be compared on objects it did not ask for.
    let declared = serving.declared_kinds().chain(candidate.declared_kinds());
    if let Some(kinds) = differing(declared, |k| serving.kept(k) != candidate.kept(k)) {
        return Err(Misfit::Kept { kinds });
    }
    Ok(())
}

/// Why a candidate cannot shadow a serving version ([`fits`]): what does not fit, and what to
/// change, as the rest of a sentence that begins with the shadow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Misfit {
    /// Another primary kind.
    #[error("reconciles {primary}, the serving version {serving}; a shadow is a candidate for the same primary kind")]
    Primary {
        /// The candidate's.
        primary: Gvk,
        /// The serving version's.
        serving: Gvk,
    },
    /// Kinds the serving version reads metadata-only, read whole.
    #[error(
        "reads {kinds} whole, which the serving version reads metadata-only; declare it metadata-only in the shadow too"
    )]
    ReadsWhole {
        /// The kinds.
        kinds: String,
    },
    /// Watched kinds selected otherwise.
    #[error(
        "would see other objects of {kinds} than the serving version, whose cache holds only what its watches select; declare the same watches (kinds, namespaces, label selectors) in the shadow, or roll the change out without one"
    )]
    Selection {
        /// The kinds.
        kinds: String,
    },
    /// Kinds whose kept fields differ.
    #[error(
        "keeps other fields of {kinds} than the serving version (keep-fields); keep the same in the shadow, or roll the change out without one"
    )]
    Kept {
        /// The kinds.
        kinds: String,
    },
}

/// The kinds among `kinds` for which `differs` holds, each named once, in order; none when
/// there is none.
fn differing<'a>(kinds: impl Iterator<Item = &'a Gvk>, differs: impl Fn(&Gvk) -> bool) -> Option<String> {
    let mut names: Vec<String> = kinds.filter(|k| differs(k)).map(Gvk::to_string).collect();
    names.sort();
    names.dedup();
    (!names.is_empty()).then(|| names.join(", "))
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A candidate version shadowing a plugin.
pub struct Shadow {
    plugin: Plugin,
    /// Tells this seating's findings from those of an earlier one of the same source.
    id: u64,
    source: SourceId,
    /// Its own configuration; none to run with the serving version's.
    config: Option<String>,
    /// One per instance reserved for it: a comparison runs only when one is free.
    permits: Arc<Semaphore>,
    report: watch::Sender<ShadowReport>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Shadow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shadow").field("source", &self.source).field("digest", &self.plugin.digest()).finish()
    }
}

impl Shadow {
    /// A shadow calling `plugin` (its instances reserved already, `instances` of them), with
    /// `config` if given, offered by `source`. Its findings arrive on the returned receiver.
    /// Its realm is the seat's: the registry keeps seats by realm and plugin.
    pub fn new(
        plugin: Plugin,
        source: SourceId,
        config: Option<String>,
        instances: usize,
        metrics: Arc<Metrics>,
    ) -> (Arc<Shadow>, watch::Receiver<ShadowReport>) {
        let (report, findings) = watch::channel(ShadowReport::default());
        let permits = Arc::new(Semaphore::new(instances.max(1)));
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        (Arc::new(Shadow { plugin, id, source, config, permits, report, metrics }), findings)
    }

    /// This seating's id: unique in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The candidate version.
    pub fn plugin(&self) -> &Plugin {
        &self.plugin
    }

    /// Where it comes from.
    pub fn source(&self) -> &SourceId {
        &self.source
    }

    /// Its configuration, if it has its own.
    pub fn config(&self) -> Option<&str> {
        self.config.as_deref()
    }

    /// What it has found so far.
    pub fn report(&self) -> ShadowReport {
        self.report.borrow().clone()
    }

    /// Calls the shadow with the serving version's `request`, reading `cache`, in a task of its
    /// own, and counts how its outcome compares with the serving version's `result`. Returns
    /// at once; when every instance of the shadow is busy, counts the call skipped instead.
    pub fn compare(
        self: &Arc<Self>,
        serving_manifest: &Manifest,
        request: Request,
        cache: Arc<dyn HostServices>,
        result: &Result<Response, CallError>,
    ) {
        let object = shown(&request.object);
        if let Err(why) = fits(serving_manifest, self.plugin.manifest()) {
            // Seated before this serving version started, and it does not fit it: not called.
            self.count(ShadowResult::Failed, &object, Some(format!("not called: the shadow {why}\n")));
            return;
        }
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            self.count(ShadowResult::Skipped, &object, None);
            return;
        };
        // Only once a comparison will run: serializing the response is not free.
        let serving = record::outcome(result);
        let shadow = self.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut request = request;
            if let Some(config) = &shadow.config {
                request.config.clone_from(config);
            }
            let called = shadow.plugin.reconcile(&request, cache).await;
            if called.as_ref().is_err_and(|e| e.failure.is_host_pressure()) {
                // The host had no room for the shadow's call: nothing was compared.
                shadow.count(ShadowResult::Skipped, &object, None);
                return;
            }
            let now = record::outcome(&called);
            let result = ShadowResult::of(compare::judge(&serving, &now, &[]), &now);
            let diff =
                (result != ShadowResult::Same).then(|| cut(compare::diff(&serving, &now, ("serving", "shadow"))));
            shadow.count(result, &object, diff);
        });
    }

    fn count(&self, result: ShadowResult, object: &str, diff: Option<String>) {
        let plugin = &self.plugin.manifest().id();
        self.metrics.shadow_reconciled(plugin.as_str(), result.label());
        let at = k8s_openapi::jiff::Timestamp::now().to_string();
        let mut differences = 0;
        self.report.send_modify(|report| {
            report.count(result, object, diff.clone(), &at);
            differences = report.differences();
        });
        if matches!(result, ShadowResult::Differing | ShadowResult::Failed) && differences.is_power_of_two() {
            // The first difference, then at powers of two: a shadow that differs on every
            // object must not flood the log.
            tracing::info!(
                %plugin,
                shadow = %self.source,
                object,
                result = result.label(),
                differences,
                "the shadow's response differs from the serving version's:\n{}",
                diff.unwrap_or_default()
            );
        }
    }
}

/// An object as `Kind namespace/name`.
fn shown(object: &Object) -> String {
    match &object.namespace {
        Some(namespace) => format!("{} {namespace}/{}", object.kind, object.name),
        None => format!("{} {}", object.kind, object.name),
    }
}

/// `text` cut to [`DIFF_BYTES`] on a line boundary, saying so.
fn cut(text: String) -> String {
    if text.len() <= DIFF_BYTES {
        return text;
    }
    let boundary = text.floor_char_boundary(DIFF_BYTES);
    // On a line boundary when there is one; a first line longer than the cut is cut inside.
    let end = text[..boundary].rfind('\n').map_or(boundary, |i| i + 1);
    format!("{}... ({} more bytes)\n", &text[..end], text.len() - end)
}

/// Where a plugin's shadow sits, shared by the registry and every version of the plugin's
/// controller: a shadow outlives a new serving version, and a serving version picks up a
/// shadow offered after it started.
#[derive(Debug, Default)]
pub struct ShadowSeat(RwLock<Option<Arc<Shadow>>>);

impl ShadowSeat {
    /// The shadow seated now.
    pub fn current(&self) -> Option<Arc<Shadow>> {
        self.0.read().expect("lock").clone()
    }

    /// Seats `shadow` unless another source's shadow sits here, returning the one it
    /// replaces; one check and swap, so two sources cannot both win.
    ///
    /// # Errors
    /// The source of the shadow seated.
    pub fn seat(&self, shadow: Arc<Shadow>) -> Result<Option<Arc<Shadow>>, SourceId> {
        let mut seat = self.0.write().expect("lock");
        match seat.as_ref() {
            Some(current) if current.source != shadow.source => Err(current.source.clone()),
            _ => Ok(seat.replace(shadow)),
        }
    }

    /// Empties the seat if `source`'s shadow sits here, returning it.
    pub fn vacate(&self, source: &SourceId) -> Option<Arc<Shadow>> {
        let mut seat = self.0.write().expect("lock");
        if seat.as_ref().is_some_and(|s| s.source == *source) { seat.take() } else { None }
    }
}

#[cfg(test)]
mod tests {
    use wasmloop_sandbox::KindSelector;

    use super::*;

    fn manifest(primary: &str, metadata_only: &[&str]) -> Manifest {
        let gvk = |kind: &str| Gvk::from_api_version("v1", kind).unwrap();
        Manifest {
            reads: metadata_only.iter().map(|k| KindSelector::of(gvk(k))).collect(),
            metadata_only: metadata_only.iter().map(|k| gvk(k)).collect(),
            ..Manifest::declaring("p", gvk(primary))
        }
    }

    fn keeping(kind: &str) -> Manifest {
        let mut m = manifest("ConfigMap", &["Secret"]);
        let keep = wasmloop_sandbox::Keep {
            kind: Gvk::from_api_version("v1", kind).unwrap(),
            managed_fields: true,
            last_applied: false,
        };
        m.keeps.push(keep);
        m
    }

    fn watching(selector: Option<&str>) -> Manifest {
        let mut m = manifest("ConfigMap", &["Secret"]);
        let pods = Gvk::from_api_version("v1", "Pod").unwrap();
        m.watches.push(KindSelector { label_selector: selector.map(|s| s.parse().unwrap()), ..KindSelector::of(pods) });
        m
    }

    #[test]
    fn a_shadow_fits_only_where_it_would_see_what_the_serving_version_caches() {
        let serving = watching(Some("app=web"));
        let cases = [
            ("the same selected watch", watching(Some("app=web")), None),
            ("another selector", watching(Some("app=db")), Some("would see other objects of v1/Pod")),
            ("the whole kind", watching(None), Some("would see other objects of v1/Pod")),
            ("no watch of it", manifest("ConfigMap", &["Secret"]), Some("would see other objects of v1/Pod")),
        ];
        for (name, candidate, refused) in cases {
            match (fits(&serving, &candidate), refused) {
                (Ok(()), None) => {}
                (Err(why), Some(part)) => assert!(why.to_string().contains(part), "{name}: {why}"),
                (got, want) => panic!("{name}: got {got:?}, wanted a refusal saying {want:?}"),
            }
        }
    }

    #[test]
    fn a_shadow_fits_with_the_same_primary_and_at_least_the_serving_metadata_only_kinds() {
        let cases = [
            ("the same manifest", manifest("ConfigMap", &["Secret"]), None),
            ("more metadata-only", manifest("ConfigMap", &["Secret", "Pod"]), None),
            ("another primary", manifest("Service", &["Secret"]), Some("a candidate for the same primary kind")),
            ("Secrets read whole", manifest("ConfigMap", &[]), Some("reads v1/Secret whole")),
            (
                "keeping managedFields the serving version does not",
                keeping("ConfigMap"),
                Some("keeps other fields of v1/ConfigMap"),
            ),
        ];
        let serving = manifest("ConfigMap", &["Secret"]);
        for (name, candidate, refused) in cases {
            match (fits(&serving, &candidate), refused) {
                (Ok(()), None) => {}
                (Err(why), Some(part)) => assert!(why.to_string().contains(part), "{name}: {why}"),
                (got, want) => panic!("{name}: got {got:?}, wanted a refusal saying {want:?}"),
            }
        }
    }

    #[test]
    fn each_result_is_counted_and_a_difference_becomes_the_latest() {
        let mut report = ShadowReport::default();
        let steps = [
            (ShadowResult::Same, "a", None),
            (ShadowResult::Differing, "b", Some("diff b")),
            (ShadowResult::Skipped, "c", None),
            (ShadowResult::Failed, "d", Some("diff d")),
            (ShadowResult::Same, "e", None),
        ];
        for (result, object, diff) in steps {
            report.count(result, object, diff.map(str::to_owned), "t");
        }
        let counts = (report.compared, report.same, report.differing, report.failed, report.skipped);
        assert_eq!(counts, (4, 2, 1, 1, 1), "a skipped call is not compared");
        let latest = report.latest.expect("a difference");
        assert_eq!(
            (latest.object.as_str(), latest.result, latest.diff.as_str()),
            ("d", ShadowResult::Failed, "diff d")
        );
    }

    #[test]
    fn a_long_diff_is_cut_on_a_line_and_says_how_much_is_left() {
        let long: String = (0..500).map(|i| format!("+line {i}\n")).collect();
        let short = cut(long.clone());
        assert!(short.len() < DIFF_BYTES + 40, "{}", short.len());
        assert!(short.ends_with("more bytes)\n"), "{short}");
        let kept = short.rsplit_once("... (").expect("marked").0;
        assert!(long.starts_with(kept) && kept.ends_with('\n'));
        assert_eq!(cut("-a\n+b\n".into()), "-a\n+b\n");
    }

    #[test]
    fn a_diff_is_cut_between_characters_whatever_they_are() {
        for pad in 0..4 {
            let long = format!("{}{}\n", "x".repeat(pad), "é€😀".repeat(400));
            let short = cut(long.clone());
            assert!(short.ends_with("more bytes)\n"), "{short}");
        }
    }
}
