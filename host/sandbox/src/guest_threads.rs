//! Threads of their own for guests that compute: the calls of a plugin that has been seen to
//! run past an epoch tick run there, not on the host's async runtime.
//!
//! A guest in wasm code yields to the executor at every epoch tick (`plugin`), so it never holds
//! a thread for long. But on a one-CPU pod the host's runtime has one thread, and each of the
//! host's own tasks (a watch event, a write's reply) then waits behind every spinning guest's
//! tick: four spinning calls are four milliseconds per hop, and a reconcile of another plugin
//! takes several hops. On threads of their own, guests are scheduled by the kernel beside the
//! host's thread, which wakes ahead of them, and the CPU budget holds them to their share.
//!
//! Most calls take microseconds, and a hand-over to another thread costs about as much as the
//! call: a plugin's call runs here when its previous call ran past a tick (and its first call,
//! before anything is known of it), beside the host's tasks otherwise. A light plugin is not
//! kept here by one slow call: a heavy one holds these threads between its yields (one
//! `memory.fill` of 230 MiB is one instruction, 100 ms of page faults), and a light plugin
//! stuck behind it waited that long (`run_budgets`: a second tenant's p99 went from 60 to
//! 130 ms while it stayed).

use std::future::Future;

/// A runtime of its own for long-running guest calls; shut down in the background when dropped
/// (a runtime may not be dropped inside another).
pub(crate) struct GuestThreads {
    runtime: Option<tokio::runtime::Runtime>,
}

impl GuestThreads {
    /// `threads` threads (at least one).
    pub(crate) fn new(threads: usize) -> std::io::Result<GuestThreads> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("wasmloop-guest")
            .enable_all()
            .build()?;
        Ok(GuestThreads { runtime: Some(runtime) })
    }

    /// Runs `call` on these threads and waits for it; dropping the wait stops the call.
    pub(crate) async fn run<T: Send + 'static>(&self, call: impl Future<Output = T> + Send + 'static) -> T {
        let runtime = self.runtime.as_ref().expect("shut down only when dropped");
        // The caller's span goes along: the guest's log lines stay in its reconcile's.
        let mut task = Aborting(runtime.spawn(tracing::Instrument::instrument(call, tracing::Span::current())));
        match (&mut task.0).await {
            Ok(out) => out,
            // A panic in host code stays a panic: the caller's task reports it as before.
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(error) => panic!("a guest call's task was cancelled: {error}"),
        }
    }
}

impl Drop for GuestThreads {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Aborts its task when dropped: a caller that stops waiting stops the call.
struct Aborting<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for Aborting<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_runs_on_a_guest_thread_and_its_result_comes_back() {
        let threads = GuestThreads::new(1).unwrap();
        let name = threads.run(async { std::thread::current().name().map(str::to_owned) }).await;
        assert_eq!(name.as_deref(), Some("wasmloop-guest"));
    }

    #[tokio::test]
    async fn dropping_the_wait_stops_the_call() {
        let threads = GuestThreads::new(1).unwrap();
        let (sender, receiver) = tokio::sync::oneshot::channel::<()>();
        let waiting = threads.run(async move {
            let _kept = sender;
            std::future::pending::<()>().await;
        });
        let _ = tokio::time::timeout(std::time::Duration::from_millis(10), waiting).await;
        // The call's task was aborted: what it held is dropped.
        assert!(receiver.await.is_err());
    }
}
