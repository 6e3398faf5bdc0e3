//! How many pulls run at once, and how much memory they hold: per plugin namespace, so that one
//! tenant's slow registries hold up only its own plugins.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::input::MAX_COMPONENT;

/// How many pulls of one plugin namespace may run at once; more wait their turn. Turns are per
/// namespace so that one tenant's hanging registries hold up only the plugins of its own
/// namespace: tenants that must not hold up each other's pulls get plugin namespaces of their
/// own (`--plugin-namespace` is repeatable). Not per registry too, since a namespace could then
/// multiply its pulls by naming registries.
pub const PULLS_PER_NAMESPACE: usize = 2;

/// How many MiB of components being loaded may be held in memory at once, across namespaces:
/// a pull's from the manifest's word on the layer's size, a plugin ConfigMap's from before its
/// gzip is expanded, until the component is compiled (what then waits for its caches to sync
/// holds none). Within `deploy/`'s 512 MiB limit beside the serving plugins and the host's
/// guest memory budget.
pub const LOAD_MEMORY_MIB: u32 = 96;

/// How many of [`LOAD_MEMORY_MIB`] the loads of one plugin namespace may hold: a registry that
/// trickles bytes keeps its share for the whole pull, so one namespace never holds them all.
pub const NAMESPACE_LOAD_MEMORY_MIB: u32 = 64;

// A component of the largest size must fit in a namespace's share, and a share in the whole, or
// a pull would wait for more permits than exist.
const _: () =
    assert!(MAX_COMPONENT >> 20 <= NAMESPACE_LOAD_MEMORY_MIB as u64 && NAMESPACE_LOAD_MEMORY_MIB <= LOAD_MEMORY_MIB);

/// A load's share of memory: its namespace's, then the whole host's. Given back when dropped:
/// it goes with the component's bytes, until they are compiled.
#[derive(Debug)]
pub struct Memory {
    pub(super) _namespace: Turn,
    pub(super) _host: OwnedSemaphorePermit,
}

/// A component's share of [`LOAD_MEMORY_MIB`].
pub(crate) fn mib(bytes: u64) -> u32 {
    u32::try_from(bytes.min(MAX_COMPONENT).div_ceil(1 << 20).max(1)).expect("at most MAX_COMPONENT")
}

/// Permits per key, for keys a caller chooses (namespaces, references); a key is forgotten once
/// nobody holds or waits for its permits, so the map stays as small as the pulls under way.
#[derive(Debug)]
pub(super) struct Turns {
    per_key: usize,
    keys: std::sync::Mutex<std::collections::HashMap<String, Arc<Semaphore>>>,
}

/// Permits of [`Turns`], or the wait for them. Owned, so that it can go with a pull's bytes into
/// blocking work and outlive the pull's task.
#[derive(Debug)]
pub struct Turn {
    turns: Arc<Turns>,
    key: String,
    semaphore: Arc<Semaphore>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Turns {
    pub(super) fn new(per_key: usize) -> Self {
        Turns { per_key, keys: std::sync::Mutex::default() }
    }

    /// `count` of `key`'s permits; callers ask for at most `per_key`.
    pub(super) async fn take(self: &Arc<Self>, key: &str, count: u32) -> Turn {
        debug_assert!(count as usize <= self.per_key, "{count} of {} permits would wait forever", self.per_key);
        let semaphore = {
            let mut keys = self.keys.lock().expect("not poisoned");
            keys.entry(key.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(self.per_key))).clone()
        };
        // The guard exists before the wait, so a wait that is given up still forgets the key.
        let mut turn = Turn { turns: self.clone(), key: key.to_owned(), semaphore, permit: None };
        turn.permit = Some(turn.semaphore.clone().acquire_many_owned(count).await.expect("never closed"));
        turn
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.keys.lock().expect("not poisoned").len()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.permit = None;
        let mut keys = self.turns.keys.lock().expect("not poisoned");
        // The map's and this guard's: nobody else holds or waits.
        if Arc::strong_count(&self.semaphore) == 2 {
            keys.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_are_per_key_and_forgotten_when_nobody_waits() {
        let turns = Arc::new(Turns::new(1));
        let a = turns.take("tenant-a", 1).await;
        // Polled once and given up: it must wait, and giving up must forget it.
        let waiting = futures::FutureExt::now_or_never(turns.take("tenant-a", 1));
        assert!(waiting.is_none(), "a key's one turn is taken");
        let b = turns.take("tenant-b", 1).await;
        assert_eq!(turns.len(), 2, "another key has turns of its own");
        drop((a, b));
        assert_eq!(turns.len(), 0, "a wait given up and turns given back leave nothing behind");
    }
}
