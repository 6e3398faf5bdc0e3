//! The source's three watches as one stream: plugin ConfigMaps, `WasmPlugin`s, and the
//! metadata of the namespace's other ConfigMaps (those a `WasmPlugin` may name).

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use wasmloop_contract::names::Namespace;
use wasmloop_runtime::api;
use wasmloop_sandbox::SourceKind;

use super::plan::Shipper;
use crate::plugin_configmap::PLUGIN_LABEL;
use crate::wasmplugin::WasmPlugin;

/// A watch event of either kind, or of a ConfigMap a `WasmPlugin` may name.
pub(super) enum Watched {
    /// A plugin ConfigMap's or a `WasmPlugin`'s.
    Shipper(SourceKind, Result<watcher::Event<Shipper>, watcher::Error>),
    /// Another ConfigMap of the namespace changed or went.
    Named(Result<Option<Named>, watcher::Error>),
}

/// A change of a ConfigMap that is no plugin ConfigMap: one a `WasmPlugin` may name.
pub(super) struct Named {
    pub(super) name: String,
    /// Its resourceVersion; none when it went.
    pub(super) version: Option<String>,
}

/// `event` with its object made a [`Shipper`] by `make`.
fn shipped<K>(event: watcher::Event<K>, make: fn(K) -> Shipper) -> watcher::Event<Shipper> {
    match event {
        watcher::Event::Apply(k) => watcher::Event::Apply(make(k)),
        watcher::Event::Delete(k) => watcher::Event::Delete(make(k)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(k) => watcher::Event::InitApply(make(k)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// The three watches, as one stream.
pub(super) fn watches(
    client: &kube::Client,
    configmaps: &Api<ConfigMap>,
    wasmplugins: &Api<WasmPlugin>,
    namespace: &Namespace,
) -> impl Stream<Item = Watched> + Send + use<> {
    let configmaps = watcher(configmaps.clone(), watcher::Config::default().labels(PLUGIN_LABEL))
        .default_backoff()
        .map(|event| Watched::Shipper(SourceKind::ConfigMap, event.map(|e| shipped(e, Shipper::ConfigMap))));
    let wasmplugins = watcher(wasmplugins.clone(), watcher::Config::default())
        .default_backoff()
        .map(|event| Watched::Shipper(SourceKind::WasmPlugin, event.map(|e| shipped(e, Shipper::WasmPlugin))));
    // Metadata only: the namespace's other ConfigMaps are the tenant's, of any size.
    let metadata: Api<PartialObjectMeta<ConfigMap>> = api::typed_api(client.clone(), namespace);
    let others = watcher(metadata, watcher::Config::default().labels(&format!("!{PLUGIN_LABEL}")))
        .default_backoff()
        .map(|event| {
            Watched::Named(event.map(|e| match e {
                watcher::Event::Apply(meta) | watcher::Event::InitApply(meta) => {
                    Some(Named { name: meta.name_any(), version: meta.resource_version() })
                }
                watcher::Event::Delete(meta) => Some(Named { name: meta.name_any(), version: None }),
                watcher::Event::Init | watcher::Event::InitDone => None,
            }))
        });
    futures::stream::select(futures::stream::select(configmaps, wasmplugins), others)
}
