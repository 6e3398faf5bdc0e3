//! The cache conformance suite ([`wasmloop_contract::conformance`]) run through the imports a
//! plugin calls, so a host cache is tested as a plugin sees it.

use crate::HostServices;
use crate::bindings::{Gvk, Object, wit, wit::CacheError};
use crate::manifest::{Keep, KindSelector, Manifest};
use crate::state::{State, cache_error_text};
use wasmloop_contract::cache::ListKey;
use wasmloop_contract::conformance::{CacheUnderTest, KEEPS, KINDS, Kind, METADATA_ONLY, Page, Refused, WATCHED};
pub use wasmloop_contract::conformance::{Seed, run};

/// A `HostServices` cache as a plugin declaring the suite's kinds reaches it: through `State`.
pub struct Imports(State);
fn gvk(k: Kind) -> Gvk {
    Gvk::from_api_version(k.api_version, k.kind).expect("the suite's kinds are kinds")
}

/// A kind as a guest passes it to the cache imports.
fn wit_gvk(k: Kind) -> wit::Gvk {
    let g = gvk(k);
    wit::Gvk { group: g.group().to_string(), version: g.version().to_string(), kind: g.kind().to_string() }
}

fn key(o: &Object) -> ListKey {
    (o.namespace.clone().unwrap_or_default(), o.name.clone())
}

fn refused(e: CacheError) -> Refused {
    match e {
        CacheError::InvalidSelector(_) => Refused::InvalidSelector,
        CacheError::InvalidContinue(_) => Refused::InvalidContinue,
        other => Refused::Other(cache_error_text(&other).to_owned()),
    }
}

/// The manifest of the plugin the suite asks as: every kind of the suite, `KINDS[0]` as the
/// primary, `WATCHED` watched through its selector, `METADATA_ONLY` metadata-only and `KEEPS`
/// kept. A cache that strips by a plugin's
/// manifest (the offline cache) is built for this one.
pub fn manifest() -> Manifest {
    Manifest {
        watches: WATCHED
            .iter()
            .map(|(k, namespace, selector)| KindSelector {
                namespaces: namespace
                    .iter()
                    .map(|ns| ns.parse().expect("the suite's namespaces are namespaces"))
                    .collect(),
                label_selector: Some(selector.parse().expect("the suite's selectors are selectors")),
                ..KindSelector::of(gvk(*k))
            })
            .collect(),
        reads: KINDS[1..].iter().map(|k| KindSelector::of(gvk(*k))).collect(),
        metadata_only: METADATA_ONLY.iter().map(|k| gvk(*k)).collect(),
        keeps: KEEPS
            .iter()
            .map(|(k, kept)| Keep {
                kind: gvk(*k),
                managed_fields: kept.managed_fields,
                last_applied: kept.last_applied,
            })
            .collect(),
        ..Manifest::declaring("conformance", gvk(KINDS[0]))
    }
}

impl Imports {
    /// `services` as a plugin declaring every kind of the suite reads it ([`manifest`]).
    pub fn new(services: std::sync::Arc<dyn HostServices>) -> Imports {
        let limiter = crate::state::MemoryLimiter::unbudgeted(64 << 20);
        Imports(State::new("conformance".into(), Some(manifest().into()), services, limiter))
    }
}

impl CacheUnderTest for Imports {
    fn get(&mut self, kind: Kind, ns: Option<&str>, name: &str) -> Result<Option<serde_json::Value>, Refused> {
        let found = self.0.get(wit_gvk(kind), ns.map(Into::into), name.into()).map_err(refused)?;
        Ok(found.map(|o| serde_json::from_str(&o.json).expect("a cache serves JSON")))
    }
    fn list_page(
        &mut self,
        kind: Kind,
        ns: Option<&str>,
        sel: Option<&str>,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, Refused> {
        let page = self
            .0
            .list_page(wit_gvk(kind), ns.map(Into::into), sel.map(Into::into), limit, token.map(Into::into))
            .map_err(refused)?;
        Ok(Page { keys: page.items.iter().map(key).collect(), token: page.continue_token })
    }
}
