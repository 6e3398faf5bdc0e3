//! The data of one Store: WASI context, memory limiter, and the host imports.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::Selector;
use crate::bindings::{Gvk, Object, wit};
use crate::host_services::HostServices;
use crate::manifest::Manifest;

/// Captured guest stderr is capped: it only has to hold a panic message.
const GUEST_OUTPUT_CAP: usize = 16 << 10;

/// Denies growth past the limit and remembers that it did, so the resulting trap (the guest
/// aborts when allocation fails) is reported as a memory limit, not as a bug.
pub(crate) struct MemoryLimiter {
    pub(crate) limit: usize,
    pub(crate) refused: Option<usize>,
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.refused = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

pub(crate) struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) stderr: MemoryOutputPipe,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) services: Arc<dyn HostServices>,
    /// None while the manifest itself is being read: nothing is declared yet.
    pub(crate) manifest: Option<Arc<Manifest>>,
    pub(crate) plugin: Arc<str>,
    /// A look-up of an undeclared kind, kept so the call fails with it even if the guest
    /// swallowed the error.
    pub(crate) undeclared: Option<(String, String)>,
}

impl State {
    pub(crate) fn new(
        plugin: Arc<str>,
        manifest: Option<Arc<Manifest>>,
        services: Arc<dyn HostServices>,
        memory_limit: usize,
    ) -> State {
        let stderr = MemoryOutputPipe::new(GUEST_OUTPUT_CAP);
        // No preopens, no environment, no network: the builder grants none by default.
        let wasi = WasiCtxBuilder::new().stderr(stderr.clone()).build();
        State {
            wasi,
            table: ResourceTable::new(),
            stderr,
            limiter: MemoryLimiter { limit: memory_limit, refused: None },
            services,
            manifest,
            plugin,
            undeclared: None,
        }
    }

    fn check_declared(&mut self, kind: &Gvk, verb: &str) -> Result<(), String> {
        let declared = self.manifest.as_ref().is_some_and(|m| m.declares(kind));
        if declared {
            return Ok(());
        }
        self.undeclared = Some((verb.to_owned(), kind.to_string()));
        Err(format!(
            "plugin {} may not {verb} {kind}: its manifest does not declare that kind; add it to owns, watches or reads",
            self.plugin
        ))
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl wit::TypesHost for State {}

impl wit::Host for State {
    fn log(&mut self, level: wit::LogLevel, message: String) {
        self.services.log(&self.plugin, level, &message);
    }

    fn get_object(&mut self, kind: Gvk, namespace: Option<String>, name: String) -> Result<Option<Object>, String> {
        self.check_declared(&kind, "get")?;
        Ok(self.services.get(&kind, namespace.as_deref(), &name))
    }

    fn list_objects(
        &mut self,
        kind: Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<Object>, String> {
        self.check_declared(&kind, "list")?;
        let selector: Selector = label_selector
            .as_deref()
            .unwrap_or_default()
            .parse()
            .map_err(|e| format!("plugin {}: {e}", self.plugin))?;
        Ok(self.services.list(&kind, namespace.as_deref(), &selector))
    }
}
