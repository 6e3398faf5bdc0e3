//! Event recorders that keep client-go's series semantics.
//!
//! kube's `Recorder` folds events that differ only in their note into one series that keeps
//! the first note; client-go keys series by the message too. Plugins put the news in the
//! message (node-image-watch's new total, the cause of a rejected plugin version), so the
//! host keeps one recorder per reporting controller and message.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;
use kube::runtime::events::{Recorder, Reporter};

/// Recorders are forgotten past this many, which only loses the aggregation of old
/// messages into series, never an event.
const MAX_RECORDERS: usize = 4096;

/// Recorders by reporting controller and message.
pub struct Recorders {
    client: Client,
    recorders: Mutex<HashMap<(String, String), Recorder>>,
}

impl Recorders {
    /// Recorders that publish with `client`.
    pub fn new(client: Client) -> Recorders {
        Recorders { client, recorders: Mutex::new(HashMap::new()) }
    }

    /// The recorder for events of `controller` carrying `message`.
    pub fn get(&self, controller: &str, message: &str) -> Recorder {
        let mut recorders = self.recorders.lock().expect("lock");
        if recorders.len() >= MAX_RECORDERS {
            recorders.clear();
        }
        recorders
            .entry((controller.to_owned(), message.to_owned()))
            .or_insert_with(|| {
                let reporter = Reporter { controller: controller.to_owned(), instance: std::env::var("HOSTNAME").ok() };
                Recorder::new(self.client.clone(), reporter)
            })
            .clone()
    }
}
