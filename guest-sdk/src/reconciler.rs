//! The trait a plugin implements. Defined here, not at the crate root, so the modules that
//! call it (`testing`, `__private`) depend on a module and not on the root that declares them.

use crate::action::Action;
use crate::error::Error;
use crate::manifest::Manifest;
use crate::request::{Config, Object, ObjectRef, Related, Request};

/// What a plugin implements. The host calls it through the WIT contract; tests call it
/// natively through [`testing::TestCase`](crate::testing::TestCase).
pub trait Reconciler {
    /// Describes the plugin: its kinds, finalizer and defaults. Called once per load.
    fn manifest() -> Manifest;

    /// Reconciles one primary object and returns the actions the host should take, in order.
    ///
    /// # Errors
    /// Return [`Error::transient`] to be retried with backoff, [`Error::permanent`] to wait
    /// for the next change of the object.
    fn reconcile(request: &Request) -> Result<Vec<Action>, Error>;

    /// Maps a changed object of a watched kind to the primaries to requeue. The default maps
    /// nothing. [`crate::cache::list_by_index`] finds the primaries that name it.
    fn map(related: &Object, config: &Config) -> Vec<ObjectRef> {
        let _ = (related, config);
        Vec::new()
    }

    /// [`Reconciler::map`], told whether the object was deleted (or left the watch's
    /// selection). The default calls `map` with the object.
    fn map_change(related: &Related, config: &Config) -> Vec<ObjectRef> {
        Self::map(&related.object, config)
    }
}
