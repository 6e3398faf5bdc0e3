//! The host's HTTP endpoints, as in controller-runtime: `/metrics` on the metrics address,
//! `/healthz` and `/readyz` on the health-probe address (one listener when both are equal).
//! Served with axum. `/readyz` lists what it still waits for (a source's first list, a pull,
//! a plugin's caches) and the plugins quarantined, which do not make the host unready: the
//! other plugins serve.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use wasmloop_runtime::Metrics;
use wasmloop_runtime::quarantine::Board;

/// Where to listen: `host:port`, `:port` (every interface), or `0` for not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddress(pub Option<SocketAddr>);

/// A bind address flag that names no address to listen on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an address to listen on; write HOST:PORT, :PORT for every interface, or 0 to turn it off")]
pub struct BadBindAddress(String);

impl FromStr for BindAddress {
    type Err = BadBindAddress;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "0" {
            return Ok(BindAddress(None));
        }
        let full = if text.starts_with(':') { format!("0.0.0.0{text}") } else { text.to_owned() };
        full.parse().map(|a| BindAddress(Some(a))).map_err(|_| BadBindAddress(text.to_owned()))
    }
}

/// Why an endpoint cannot serve: the probes and metrics the flags ask for would be missing.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address is taken, or not this host's.
    #[error("cannot listen for {what} on {address}; pick a free address or 0 to turn it off")]
    Listen {
        /// What was to be served there.
        what: &'static str,
        /// The address.
        address: SocketAddr,
        /// What binding said.
        #[source]
        source: std::io::Error,
    },
    /// The bound listener cannot say its address.
    #[error(transparent)]
    LocalAddress(std::io::Error),
}

/// What `/readyz` waits for: named conditions not met yet. Ready when there are none. Its
/// details also list quarantined plugins, which do not make the host unready: the other
/// plugins serve.
#[derive(Debug, Default)]
pub struct Readiness {
    pending: Mutex<BTreeMap<String, String>>,
    quarantines: Arc<Board>,
}

impl Readiness {
    /// Readiness whose details list the plugins on `quarantines`.
    pub fn new(quarantines: Arc<Board>) -> Readiness {
        Readiness { pending: Mutex::default(), quarantines }
    }

    /// `what` is not ready, because of `why`.
    pub fn pending(&self, what: &str, why: &str) {
        self.pending.lock().expect("lock").insert(what.to_owned(), why.to_owned());
    }

    /// `what` is ready.
    pub fn ready(&self, what: &str) {
        self.pending.lock().expect("lock").remove(what);
    }

    /// Ready or not, and the details.
    fn report(&self) -> (bool, String) {
        let pending = self.pending.lock().expect("lock");
        let mut details: String = pending.iter().map(|(what, why)| format!("{what}: {why}\n")).collect();
        if pending.is_empty() {
            details.push_str("ok\n");
        }
        for (plugin, reason) in self.quarantines.list() {
            details.push_str(&format!("plugin {plugin} quarantined: {reason}\n"));
        }
        (pending.is_empty(), details)
    }
}

fn metrics_routes(metrics: Arc<Metrics>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move {
                (
                    [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
                    metrics.encode(),
                )
            }
        }),
    )
}

fn probe_routes(readiness: Arc<Readiness>) -> Router {
    Router::new().route("/healthz", get(|| async { "ok\n" })).route(
        "/readyz",
        get(move || {
            let readiness = readiness.clone();
            async move {
                match readiness.report() {
                    (true, details) => (StatusCode::OK, details).into_response(),
                    (false, details) => (StatusCode::SERVICE_UNAVAILABLE, details).into_response(),
                }
            }
        }),
    )
}

/// Starts the listeners the flags ask for and logs where each listens (a `:0` port becomes a
/// real one, which tests read from the log).
///
/// # Errors
/// A [`ServeError`] when an address cannot be bound.
pub async fn serve(
    metrics_address: BindAddress,
    probe_address: BindAddress,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
) -> Result<(), ServeError> {
    let mut servers: Vec<(SocketAddr, Router, &'static str)> = Vec::new();
    match (metrics_address.0, probe_address.0) {
        (Some(m), Some(p)) if m == p => {
            servers.push((m, metrics_routes(metrics).merge(probe_routes(readiness)), "metrics and health probes"))
        }
        (m, p) => {
            servers.extend(m.map(|m| (m, metrics_routes(metrics), "metrics")));
            servers.extend(p.map(|p| (p, probe_routes(readiness), "health probes")));
        }
    }
    for (address, routes, what) in servers {
        let listener = tokio::net::TcpListener::bind(address).await.map_err(|source| ServeError::Listen {
            what,
            address,
            source,
        })?;
        let bound = listener.local_addr().map_err(ServeError::LocalAddress)?;
        tracing::info!(address = %bound, "serving {what}");
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, routes).await {
                tracing::error!(address = %bound, %error, "the {what} server stopped");
            }
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_alone_means_every_interface() {
        assert_eq!(":8080".parse::<BindAddress>().unwrap().0, Some("0.0.0.0:8080".parse().unwrap()));
    }

    #[test]
    fn zero_turns_the_endpoint_off() {
        assert_eq!("0".parse::<BindAddress>().unwrap().0, None);
    }

    #[test]
    fn a_bad_address_says_what_to_write() {
        let error = "localhost".parse::<BindAddress>().unwrap_err().to_string();
        assert!(error.contains("HOST:PORT"), "{error}");
    }

    #[test]
    fn readiness_lists_what_it_waits_for() {
        let readiness = Readiness::default();
        readiness.pending("plugin foo", "cache of v1/Pod not synced");
        assert_eq!(readiness.report(), (false, "plugin foo: cache of v1/Pod not synced\n".into()));
        readiness.ready("plugin foo");
        assert_eq!(readiness.report(), (true, "ok\n".into()));
    }

    #[test]
    fn readiness_details_name_quarantined_plugins_without_failing() {
        let board = Arc::new(Board::default());
        let readiness = Readiness::new(board.clone());
        board.set("hostile", Some("every call failed for 60 s"));
        assert_eq!(readiness.report(), (true, "ok\nplugin hostile quarantined: every call failed for 60 s\n".into()));
        board.set("hostile", None);
        assert_eq!(readiness.report(), (true, "ok\n".into()));
    }
}
