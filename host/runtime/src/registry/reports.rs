//! What happened to each source's plugin, as one typed stream in the order it happened: the
//! registry's outcomes (a version loaded, parked or moved; a shadow seated and what it finds)
//! and a source's own (a refusal before a version reaches the registry, the source gone). Whoever shows
//! plugins' state (the status writer of `wasmloop run`) reads it; nothing flows back.
//!
//! The stream is an unbounded channel with one reader: a report is never dropped, and a source
//! never waits for the reader. Without a reader ([`Reporter::none`]) nothing is kept.
//!
//! ```
//! use wasmloop_runtime::registry::reports::{self, Report, Reported};
//! use wasmloop_sandbox::SourceId;
//! let (reporter, mut reports) = reports::channel();
//! reporter.publish(Report::new(SourceId::file("hello.wasm"), Reported::Removed));
//! assert_eq!(reports.try_recv().map(|r| r.what), Ok(Reported::Removed));
//! ```

use tokio::sync::mpsc;
use wasmloop_sandbox::{PluginId, SourceId};

use crate::shadow::ShadowReport;

/// One thing that happened to a source's plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The source.
    pub source: SourceId,
    /// What happened.
    pub what: Reported,
}

impl Report {
    /// That `what` happened to `source`'s plugin.
    pub fn new(source: SourceId, what: Reported) -> Report {
        Report { source, what }
    }
}

/// What happened to a source's plugin.
#[derive(Debug, Clone, PartialEq)]
pub enum Reported {
    /// What a version the source offered did: loaded, replaced, promoted, parked (another
    /// replica runs it), or unchanged (what serves is what it offers). Also sent when sharding
    /// moves a version here ([`Loaded::Started`]) or away ([`Loaded::Parked`]).
    Loaded(Loaded),
    /// The source's newest version was refused; whatever served from it still does.
    Refused {
        /// A CamelCase word for Events and metrics (`InvalidConfigMap`, `PullFailed`, a
        /// [`super::RegistryError::reason`]).
        reason: String,
        /// What was wrong and what to do, cut as outside text is.
        message: String,
    },
    /// The source marked itself superseded (a promoted shadow serves its plugin from another
    /// source): it loads nothing. `said`: what its status said already (a restart reads it
    /// back), if anything.
    Retired {
        /// What its status said.
        said: Option<String>,
    },
    /// A candidate of the source now shadows its plugin.
    ShadowSeated {
        /// The seating's id: findings of an earlier seating are stale.
        id: u64,
        /// The plugin it shadows.
        plugin: PluginId,
        /// The candidate's version.
        version: String,
        /// SHA-256 of component and configuration.
        digest: String,
    },
    /// The source's candidate is the one that shadows already.
    ShadowUnchanged,
    /// What a shadow has found so far (sent as it changes, at most once a second).
    ShadowFindings {
        /// The seating's id.
        id: u64,
        /// The findings.
        report: ShadowReport,
    },
    /// The source is gone (a ConfigMap deleted): whatever it served or shadowed stopped, and
    /// nothing is to be shown for it any more.
    Removed,
    /// The source asked for what it served or shadowed to stop (a suspended `WasmPlugin`, or a
    /// refused version under `failurePolicy: Stop`), and it has stopped.
    Stopped {
        /// A CamelCase word, as [`Reported::Refused`]'s.
        reason: String,
        /// Why, and what to do, cut as outside text is.
        message: String,
    },
    /// The version just loaded (the [`Reported::Loaded`] before this) runs with less than its
    /// settings ask: its memory limit times its concurrency would not fit the host's guest
    /// memory budget ([`wasmloop_sandbox::Capped`]).
    Capped {
        /// What was cut, and what to do, in a sentence.
        message: String,
    },
    /// The source began handling generation `generation` of its object (a `WasmPlugin`'s
    /// `metadata.generation`): the next outcome reported for it is that generation's, and
    /// `settled` says there is none to wait for (what it offers is what it offered).
    Observed {
        /// The object's generation.
        generation: i64,
        /// What pins the version it offers (an image's digest, a digest pin), if anything.
        pin: Option<String>,
        /// Nothing more comes for this generation: what is shown is its outcome.
        settled: bool,
    },
}

/// Sends reports to the stream's reader; cheap to clone.
#[derive(Debug, Clone)]
pub struct Reporter(Option<mpsc::UnboundedSender<Report>>);

impl Reporter {
    /// A reporter with no reader: what it is given goes nowhere.
    pub fn none() -> Reporter {
        Reporter(None)
    }

    /// Sends `report`. A reader that has gone (the host stopping) loses nothing it needed.
    pub fn publish(&self, report: Report) {
        if let Some(sender) = &self.0 {
            let _ = sender.send(report);
        }
    }
}

impl Default for Reporter {
    fn default() -> Reporter {
        Reporter::none()
    }
}

/// The reading end of the stream.
pub type Reports = mpsc::UnboundedReceiver<Report>;

/// A stream: its reporter, to clone into the registry and the sources, and its one reader.
pub fn channel() -> (Reporter, Reports) {
    let (sender, receiver) = mpsc::unbounded_channel();
    (Reporter(Some(sender)), receiver)
}

/// What an accepted candidate did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// A plugin that was not running now is.
    Started {
        /// The plugin.
        name: PluginId,
        /// Its version.
        version: String,
        /// SHA-256 of component and configuration.
        digest: String,
    },
    /// A new version replaced the running one.
    Replaced {
        /// The plugin.
        name: PluginId,
        /// The new version.
        version: String,
        /// The version it replaced.
        previous: String,
        /// SHA-256 of component and configuration.
        digest: String,
    },
    /// The source's shadow now serves, replacing what served from another source (the
    /// shadow was promoted: its source offered it as serving).
    Promoted {
        /// The plugin.
        name: PluginId,
        /// The new version.
        version: String,
        /// The version it replaced, if one served.
        previous: Option<String>,
        /// The source that served it, and now serves nothing.
        superseded: Option<SourceId>,
        /// SHA-256 of component and configuration.
        digest: String,
    },
    /// Valid, but another replica runs this plugin (`--shard`): compiled and kept here, not
    /// started, until the plugin is admitted ([`super::Registry::admit`]).
    Parked {
        /// The plugin.
        name: PluginId,
        /// SHA-256 of component and configuration.
        digest: String,
    },
    /// The same component and configuration already serve: nothing to do.
    Unchanged {
        /// The plugin.
        name: PluginId,
        /// SHA-256 of component and configuration.
        digest: String,
    },
}

impl Loaded {
    /// The plugin.
    pub fn name(&self) -> &PluginId {
        self.plugin_and_digest().0
    }

    /// The digest now serving.
    pub fn digest(&self) -> &str {
        self.plugin_and_digest().1
    }

    fn plugin_and_digest(&self) -> (&PluginId, &str) {
        match self {
            Loaded::Started { name, digest, .. }
            | Loaded::Replaced { name, digest, .. }
            | Loaded::Promoted { name, digest, .. }
            | Loaded::Parked { name, digest }
            | Loaded::Unchanged { name, digest } => (name, digest),
        }
    }
}

impl std::fmt::Display for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Loaded::Started { name, version, .. } => write!(f, "plugin {name} {version} serving"),
            Loaded::Replaced { name, version, previous, .. } => {
                write!(f, "plugin {name} {version} serving, replacing {previous}; every primary requeued")
            }
            Loaded::Promoted { name, version, previous, superseded, .. } => {
                write!(f, "plugin {name} {version} promoted from shadow to serving")?;
                if let Some(previous) = previous {
                    write!(f, ", replacing {previous}")?;
                }
                if let Some(source) = superseded {
                    write!(f, " from {source}, which now serves nothing")?;
                }
                Ok(())
            }
            Loaded::Parked { name, .. } => write!(f, "plugin {name} parked: another replica runs it"),
            Loaded::Unchanged { name, .. } => write!(f, "plugin {name} unchanged"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> PluginId {
        PluginId::parse("team-a/p").unwrap()
    }

    #[test]
    fn each_outcome_reads_as_a_sentence_naming_the_plugin() {
        let source = SourceId::file("b.wasm");
        let cases = [
            (Loaded::Started { name: p(), version: "1".into(), digest: "d".into() }, "plugin team-a/p 1 serving"),
            (
                Loaded::Replaced { name: p(), version: "2".into(), previous: "1".into(), digest: "d".into() },
                "plugin team-a/p 2 serving, replacing 1; every primary requeued",
            ),
            (
                Loaded::Promoted {
                    name: p(),
                    version: "2".into(),
                    previous: Some("1".into()),
                    superseded: Some(source),
                    digest: "d".into(),
                },
                "plugin team-a/p 2 promoted from shadow to serving, replacing 1 from file b.wasm, which now serves nothing",
            ),
            (Loaded::Parked { name: p(), digest: "d".into() }, "plugin team-a/p parked: another replica runs it"),
            (Loaded::Unchanged { name: p(), digest: "d".into() }, "plugin team-a/p unchanged"),
        ];
        for (loaded, sentence) in cases {
            assert_eq!(loaded.to_string(), sentence);
            assert_eq!((loaded.name(), loaded.digest()), (&p(), "d"));
        }
    }

    #[test]
    fn reports_reach_the_reader_in_the_order_they_were_published() {
        let (reporter, mut reports) = channel();
        let source = SourceId::file("a.wasm");
        reporter.publish(Report::new(source.clone(), Reported::ShadowUnchanged));
        reporter.publish(Report::new(source, Reported::Removed));
        assert_eq!(reports.try_recv().map(|r| r.what), Ok(Reported::ShadowUnchanged));
        assert_eq!(reports.try_recv().map(|r| r.what), Ok(Reported::Removed));
    }

    #[test]
    fn a_reporter_whose_reader_is_gone_loses_nothing_it_needed() {
        let (reporter, reports) = channel();
        drop(reports);
        reporter.publish(Report::new(SourceId::file("a.wasm"), Reported::Removed));
        Reporter::none().publish(Report::new(SourceId::file("a.wasm"), Reported::Removed));
    }
}
