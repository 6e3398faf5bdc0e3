//! The data of one Store: WASI context, memory limiter, and the host imports.
//!
//! The imports answer from the cache the host lends ([`crate::HostServices`]), and hold a
//! plugin to what it declared:
//! - only declared kinds are readable (`State::declared`); a look-up of another is remembered,
//!   so the call fails as `UndeclaredKind` even when the guest swallowed the error;
//! - every name a look-up carries is parsed where it arrives (`State::gate`), and each refusal
//!   is a typed `cache-error`: undeclared kind, bad selector, namespace out of scope, access
//!   revoked, bad continue token;
//! - lists come a page at a time (at most 500), in (namespace, name) order; a 0.1 guest, whose
//!   import does not page, gets its list gathered page by page and refused past 10,000
//!   objects (`State::list_all`);
//! - objects of `metadata-only` kinds are served as `apiVersion`, `kind` and `metadata`
//!   (`State::served`), the shape of the `PartialObjectMetadata` watch the informers keep;
//! - a guest's log lines are cut to 4 KiB, at most 1,000 a call (`State::log`);
//! - the host's time in these imports is the plugin's CPU (`State::take_host_ticks`).

use std::sync::Arc;
use wasmloop_contract::cache::{PAGE_SIZE, parse_token, token_of};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::Selector;
use crate::bindings::wit::{CacheError, Page};
use crate::bindings::{Gvk, Object, parse_gvk, wit};
use crate::call_clock::CallClock;
use crate::host_services::{CacheDenied, HostServices};
use crate::manifest::Manifest;
use crate::memory_budget::{Charge, Pressure};
use crate::validate;
use wasmloop_contract::names::{Name, Namespace};

/// Captured guest stderr is capped: it only has to hold a panic message.
const GUEST_OUTPUT_CAP: usize = 16 << 10;

/// Holds each instance to the plugin's memory ceiling, and every growth to the host's guest
/// memory budget when there is one. A growth past the ceiling is denied (the guest aborts,
/// and the call is reported as a memory limit, not a bug); one that finds no room in the
/// budget fails the call as host pressure.
pub(crate) struct MemoryLimiter {
    pub(crate) limit: usize,
    pub(crate) refused: Option<usize>,
    /// The call's account with the host's budget.
    pub(crate) charge: Option<Charge>,
    /// Why the budget refused a growth, when it did.
    pub(crate) pressure: Option<Pressure>,
    /// A wait for room is the host's time: it moves the call's deadline.
    pub(crate) clock: Arc<CallClock>,
}

impl MemoryLimiter {
    /// A limiter of `limit` bytes per memory, charging no budget: for Stores that only serve
    /// imports (the conformance suite, tests).
    #[cfg(any(test, feature = "conformance"))]
    pub(crate) fn unbudgeted(limit: usize) -> MemoryLimiter {
        let clock = Arc::new(CallClock::start(std::time::Duration::from_secs(1)));
        MemoryLimiter { limit, refused: None, charge: None, pressure: None, clock }
    }
}

#[async_trait::async_trait]
impl wasmtime::ResourceLimiterAsync for MemoryLimiter {
    async fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.refused = Some(desired);
            return Ok(false);
        }
        let Some(charge) = &mut self.charge else { return Ok(true) };
        let grown = u64::try_from(desired.saturating_sub(current)).unwrap_or(u64::MAX);
        let clock = self.clock.clone();
        let _held = clock.hold();
        match charge.grow(grown).await {
            Ok(()) => Ok(true),
            // More than one plugin may ever hold: its own limit, like its ceiling.
            Err(Pressure::Never { .. }) => {
                self.refused = Some(desired);
                Ok(false)
            }
            Err(pressure) => {
                self.pressure = Some(pressure);
                Err(wasmtime::Error::msg(pressure.to_string()))
            }
        }
    }

    async fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
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
    /// Log lines written in this call.
    logged: usize,
    /// Time the host spent serving this call's cache imports, not yet charged to the plugin's
    /// CPU budget: the epoch callback charges it at the guest's next tick.
    host_time: std::time::Duration,
    /// The guest's time, as its epoch callbacks charge it: see [`GuestTime`].
    pub(crate) time: GuestTime,
    /// The call ran past an epoch tick of guest time.
    pub(crate) computed: bool,
}

/// How long a call's guest code has run, told apart from its time in host functions (a WASI
/// clock wait, a cache look-up, the memory budget's wait) by the Store's call hook: what the
/// CPU budget charges at each epoch callback, however long an instruction ran between two
/// ticks (a `memory.fill` over a large memory), and never a wait.
#[derive(Debug)]
pub(crate) struct GuestTime {
    /// The start of the span not charged yet.
    mark: std::time::Instant,
    /// When the host function under way was entered, if one is.
    in_host: Option<std::time::Instant>,
    /// Time in host functions since `mark`, those ended.
    host: std::time::Duration,
    /// Guest time charged so far in this call.
    total: std::time::Duration,
}

impl GuestTime {
    fn new() -> GuestTime {
        GuestTime {
            mark: std::time::Instant::now(),
            in_host: None,
            host: std::time::Duration::ZERO,
            total: std::time::Duration::ZERO,
        }
    }

    /// The guest called into the host (`entering`), or the host returned to it.
    pub(crate) fn host_call(&mut self, entering: bool, now: std::time::Instant) {
        match (entering, self.in_host.take()) {
            (true, None) => self.in_host = Some(now),
            (true, Some(since)) => self.in_host = Some(since),
            (false, Some(since)) => self.host += now.saturating_duration_since(since),
            (false, None) => {}
        }
    }

    /// The guest time since the last charge (the epoch callback runs inside a host call, the
    /// epoch's), and the call's total so far; the next span starts where this callback
    /// entered the host, so its yield counts as host time.
    pub(crate) fn charge(&mut self, now: std::time::Instant) -> (std::time::Duration, std::time::Duration) {
        let entered = self.in_host.unwrap_or(now);
        let guest = entered.saturating_duration_since(self.mark).saturating_sub(self.host);
        (self.mark, self.host) = (entered, std::time::Duration::ZERO);
        self.total += guest;
        (guest, self.total)
    }
}

impl State {
    pub(crate) fn new(
        plugin: Arc<str>,
        manifest: Option<Arc<Manifest>>,
        services: Arc<dyn HostServices>,
        limiter: MemoryLimiter,
    ) -> State {
        let stderr = MemoryOutputPipe::new(GUEST_OUTPUT_CAP);
        // No preopens, no environment, no network: the builder grants none by default.
        let wasi = WasiCtxBuilder::new().stderr(stderr.clone()).build();
        State {
            wasi,
            table: ResourceTable::new(),
            stderr,
            limiter,
            services,
            manifest,
            plugin,
            undeclared: None,
            logged: 0,
            host_time: std::time::Duration::ZERO,
            time: GuestTime::new(),
            computed: false,
        }
    }

    /// The whole epoch ticks of host time spent in imports since the last charge; the rest
    /// stays for the next.
    pub(crate) fn take_host_ticks(&mut self, tick: std::time::Duration) -> u32 {
        let tick = tick.as_nanos().max(1);
        let ticks = self.host_time.as_nanos() / tick;
        let charged = std::time::Duration::from_nanos(u64::try_from(ticks * tick).unwrap_or(u64::MAX));
        self.host_time = self.host_time.saturating_sub(charged);
        u32::try_from(ticks).unwrap_or(u32::MAX)
    }

    /// Runs a cache import, counting its time as the plugin's.
    fn timed<T>(&mut self, serve: impl FnOnce(&mut State) -> T) -> T {
        let started = std::time::Instant::now();
        let out = serve(self);
        self.host_time += started.elapsed();
        out
    }

    /// The guest's kind, parsed and declared. A kind that does not parse is no kind the
    /// manifest could declare; the message quotes it cut.
    fn declared(&mut self, kind: &wit::Gvk, verb: &str) -> Result<Gvk, CacheError> {
        let parsed = parse_gvk(kind);
        let declared = match &parsed {
            Ok(gvk) => self.manifest.as_ref().is_some_and(|m| m.declares(gvk)),
            Err(_) => false,
        };
        if let (true, Ok(gvk)) = (declared, &parsed) {
            return Ok(gvk.clone());
        }
        let shown = match parsed {
            Ok(gvk) => gvk.to_string(),
            Err(invalid) => format!("a kind that is not one ({invalid})"),
        };
        let error = CacheError::UndeclaredKind(format!(
            "plugin {} may not {verb} {shown}: its manifest does not declare that kind; add it to owns, watches or reads",
            self.plugin
        ));
        self.undeclared = Some((verb.to_owned(), shown));
        Err(error)
    }

    /// The checks every look-up passes: a declared kind, and nothing the cache refuses.
    /// Returns the parsed kind and namespace, or none for a namespace that is not one: it
    /// holds nothing, as the API server would say of it.
    #[allow(clippy::type_complexity)]
    fn gate(
        &mut self,
        kind: &wit::Gvk,
        namespace: Option<&str>,
        verb: &str,
    ) -> Result<Option<(Gvk, Option<Namespace>)>, CacheError> {
        let kind = self.declared(kind, verb)?;
        let Ok(namespace) = namespace.map(Namespace::parse).transpose() else { return Ok(None) };
        match self.services.denied(&kind, namespace.as_ref()) {
            None => Ok(Some((kind, namespace))),
            Some(CacheDenied::Revoked(why)) => Err(CacheError::AccessRevoked(format!("plugin {}: {why}", self.plugin))),
            Some(CacheDenied::OutOfScope(why)) => Err(CacheError::OutOfScope(format!("plugin {}: {why}", self.plugin))),
        }
    }

    fn selector(&self, label_selector: Option<&str>) -> Result<Selector, CacheError> {
        label_selector
            .unwrap_or_default()
            .parse()
            .map_err(|e| CacheError::InvalidSelector(format!("plugin {}: {e}", self.plugin)))
    }

    fn invalid_continue(&self, kind: &Gvk, why: String) -> CacheError {
        CacheError::InvalidContinue(format!("plugin {}, listing {kind}: {why}", self.plugin))
    }

    /// What a metadata-only kind's plugin is served.
    fn served(&self, kind: &Gvk, objects: Vec<Object>) -> Vec<Object> {
        match &self.manifest {
            Some(m) if m.is_metadata_only(kind) => objects.iter().map(crate::object::metadata_only).collect(),
            _ => objects,
        }
    }

    /// A guest's log line, cut to [`LOG_LINE_BYTES`]; past [`LOG_LINES`] lines in one call
    /// the rest are dropped, with one line saying so. A plugin's log is not a way to fill the
    /// host's disk.
    pub(crate) fn log(&mut self, level: wit::LogLevel, message: &str) {
        self.logged += 1;
        if self.logged > LOG_LINES {
            if self.logged == LOG_LINES + 1 {
                let note = format!("more than {LOG_LINES} log lines in one call: the rest of this call's are dropped");
                self.services.log(&self.plugin, wit::LogLevel::Warn, &note);
            }
            return;
        }
        if message.len() <= LOG_LINE_BYTES {
            return self.services.log(&self.plugin, level, message);
        }
        let mut end = LOG_LINE_BYTES;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let cut = format!("{}… ({} bytes cut)", &message[..end], message.len() - end);
        self.services.log(&self.plugin, level, &cut);
    }

    pub(crate) fn get(
        &mut self,
        kind: wit::Gvk,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<Object>, CacheError> {
        self.timed(|state| {
            let Some((kind, namespace)) = state.gate(&kind, namespace.as_deref(), "get")? else { return Ok(None) };
            // No object has a name that is not one: nothing to look up.
            let Ok(name) = Name::parse(&name) else { return Ok(None) };
            let found = state.services.get(&kind, namespace.as_ref(), &name);
            Ok(found.and_then(|o| state.served(&kind, vec![o]).pop()))
        })
    }

    /// The whole list, for 0.1 guests, whose import does not page: gathered page by page (each
    /// a bounded amount of work) and refused past [`MAX_UNPAGED_LIST`] objects, so one call
    /// cannot make the host copy a whole cache.
    pub(crate) fn list_all(
        &mut self,
        kind: wit::Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<Object>, CacheError> {
        let mut all = Vec::new();
        let mut token = None;
        loop {
            let page = self.list_page(kind.clone(), namespace.clone(), label_selector.clone(), 0, token)?;
            all.extend(page.items);
            if all.len() > MAX_UNPAGED_LIST {
                return Err(CacheError::OutOfScope(format!(
                    "plugin {}: listing {}/{}/{} finds more than {MAX_UNPAGED_LIST} objects, more than a contract 0.1 list may return; select fewer (a namespace, a label selector), or rebuild the plugin with a current wasmloop-sdk, whose lists page",
                    self.plugin,
                    validate::quoted(&kind.group),
                    validate::quoted(&kind.version),
                    validate::quoted(&kind.kind)
                )));
            }
            match page.continue_token {
                Some(next) => token = Some(next),
                None => return Ok(all),
            }
        }
    }

    pub(crate) fn list_page(
        &mut self,
        kind: wit::Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
        limit: u32,
        token: Option<String>,
    ) -> Result<Page, CacheError> {
        self.timed(|state| {
            let gated = state.gate(&kind, namespace.as_deref(), "list")?;
            let selector = state.selector(label_selector.as_deref())?;
            let Some((kind, namespace)) = gated else { return Ok(Page { items: Vec::new(), continue_token: None }) };
            let after = token
                .as_deref()
                .map(|t| parse_token(t).map_err(|why| state.invalid_continue(&kind, why)))
                .transpose()?;
            let limit = if limit == 0 { PAGE_SIZE } else { (limit as usize).min(PAGE_SIZE) };
            let page = state.services.list_page(&kind, namespace.as_ref(), &selector, after.as_ref(), limit);
            let continue_token = page.resume.as_ref().map(token_of);
            Ok(Page { items: state.served(&kind, page.items), continue_token })
        })
    }
}

impl State {
    pub(crate) fn list_by_index(&mut self, q: IndexQuery) -> Result<Page, CacheError> {
        self.timed(|state| {
            let gated = state.gate(&q.kind, q.namespace.as_deref(), "list by index")?;
            let Some((kind, namespace)) = gated else { return Ok(Page { items: Vec::new(), continue_token: None }) };
            // The manifest's own index, borrowed: nothing is copied per look-up.
            let manifest = state.manifest.clone();
            let Some(index) = manifest.as_deref().and_then(|m| m.index(&kind, &q.index)) else {
                return Err(CacheError::UnknownIndex(format!(
                    "plugin {}: the manifest declares no index {} on {kind}; declare it under `indexes`",
                    state.plugin,
                    validate::quoted(&q.index)
                )));
            };
            // No value the index holds is longer than an object's text allows; a longer key
            // finds nothing, and is not copied further.
            if q.key.len() > MAX_INDEX_KEY {
                return Ok(Page { items: Vec::new(), continue_token: None });
            }
            let after = q
                .token
                .as_deref()
                .map(|t| parse_token(t).map_err(|why| state.invalid_continue(&kind, why)))
                .transpose()?;
            let limit = if q.limit == 0 { PAGE_SIZE } else { (q.limit as usize).min(PAGE_SIZE) };
            let page = state.services.list_by_index(index, &q.key, namespace.as_ref(), after.as_ref(), limit);
            let continue_token = page.resume.as_ref().map(token_of);
            Ok(Page { items: state.served(&kind, page.items), continue_token })
        })
    }
}

/// One `list-by-index` call's arguments, as the guest gave them.
pub(crate) struct IndexQuery {
    pub(crate) kind: wit::Gvk,
    pub(crate) index: String,
    pub(crate) key: String,
    pub(crate) namespace: Option<String>,
    pub(crate) limit: u32,
    pub(crate) token: Option<String>,
}

/// Longest index key looked up: keys are values of an object's fields.
pub(crate) const MAX_INDEX_KEY: usize = 4 << 10;

/// The most objects a contract 0.1 list import returns: its WIT has no pages.
pub(crate) const MAX_UNPAGED_LIST: usize = 10_000;

/// A guest's log line is cut to this many bytes.
pub(crate) const LOG_LINE_BYTES: usize = 4 << 10;
/// Log lines one call may write.
pub(crate) const LOG_LINES: usize = 1000;

/// A cache error as one sentence, for 0.1 guests and for logs.
pub(crate) fn cache_error_text(e: &CacheError) -> &str {
    match e {
        CacheError::UndeclaredKind(s)
        | CacheError::InvalidSelector(s)
        | CacheError::OutOfScope(s)
        | CacheError::AccessRevoked(s)
        | CacheError::InvalidContinue(s)
        | CacheError::UnknownIndex(s) => s,
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl wit::TypesHost for State {}

impl wit::LogHost for State {
    fn log(&mut self, level: wit::LogLevel, message: String) {
        State::log(self, level, &message);
    }
}

impl wit::CacheHost for State {
    fn get_object(
        &mut self,
        kind: wit::Gvk,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<Object>, CacheError> {
        self.get(kind, namespace, name)
    }

    fn list_objects(
        &mut self,
        kind: wit::Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
        limit: u32,
        continue_token: Option<String>,
    ) -> Result<Page, CacheError> {
        self.list_page(kind, namespace, label_selector, limit, continue_token)
    }

    fn list_by_index(
        &mut self,
        kind: wit::Gvk,
        index: String,
        key: String,
        namespace: Option<String>,
        limit: u32,
        token: Option<String>,
    ) -> Result<Page, CacheError> {
        State::list_by_index(self, IndexQuery { kind, index, key, namespace, limit, token })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache holding `count` ConfigMaps in namespace `t`.
    struct ManyConfigMaps(usize);

    impl HostServices for ManyConfigMaps {
        fn get(&self, _: &Gvk, _: Option<&Namespace>, _: &Name) -> Option<Object> {
            None
        }

        fn list(&self, _: &Gvk, _: Option<&Namespace>, _: &Selector) -> Vec<Object> {
            let object = |i: usize| Object {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: format!("cm-{i:06}"),
                namespace: Some("t".into()),
                uid: String::new(),
                json: "{}".into(),
            };
            (0..self.0).map(object).collect()
        }
    }

    fn state(count: usize) -> State {
        let configmap = Gvk::new("", "v1", "ConfigMap").unwrap();
        let manifest = Manifest::declaring("lister", configmap);
        let limiter = MemoryLimiter::unbudgeted(64 << 20);
        State::new("lister".into(), Some(Arc::new(manifest)), Arc::new(ManyConfigMaps(count)), limiter)
    }

    fn configmaps() -> wit::Gvk {
        wit::Gvk { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() }
    }

    #[test]
    fn an_unpaged_list_returns_up_to_its_bound_and_refuses_beyond_it() {
        let all = state(MAX_UNPAGED_LIST).list_all(configmaps(), None, None).expect("within the bound");
        assert_eq!(all.len(), MAX_UNPAGED_LIST);
        let refused = state(MAX_UNPAGED_LIST + 1).list_all(configmaps(), None, None).unwrap_err();
        assert!(cache_error_text(&refused).contains("more than 10000 objects"), "{}", cache_error_text(&refused));
    }

    #[test]
    fn guest_time_leaves_out_the_time_in_host_functions() {
        let ms = std::time::Duration::from_millis;
        let start = std::time::Instant::now();
        let mut time = GuestTime { mark: start, in_host: None, host: ms(0), total: ms(0) };
        // 3 ms of guest code, a 500 ms WASI wait, 2 ms of guest code, then the epoch's call.
        time.host_call(true, start + ms(3));
        time.host_call(false, start + ms(503));
        time.host_call(true, start + ms(505));
        assert_eq!(time.charge(start + ms(505)), (ms(5), ms(5)));
        // The callback's own yield, then 20 ms of one long instruction.
        time.host_call(false, start + ms(510));
        time.host_call(true, start + ms(530));
        assert_eq!(time.charge(start + ms(530)), (ms(20), ms(25)));
    }

    #[test]
    fn time_spent_in_cache_imports_is_owed_to_the_plugins_cpu_budget_in_whole_ticks() {
        let mut state = state(2_000);
        state.list_all(configmaps(), None, None).unwrap();
        assert!(state.host_time > std::time::Duration::ZERO, "the list was timed");
        let tick = std::time::Duration::from_millis(5);
        state.host_time = tick * 3 + std::time::Duration::from_millis(2);
        assert_eq!(state.take_host_ticks(tick), 3, "every whole tick is charged");
        assert_eq!(state.host_time, std::time::Duration::from_millis(2), "the rest waits for the next charge");
        assert_eq!(state.take_host_ticks(tick), 0);
    }

    #[test]
    fn continue_tokens_are_positions_and_anything_else_is_refused() {
        assert_eq!(parse_token("shop/web"), Ok(("shop".into(), "web".into())));
        assert_eq!(parse_token("/node-1"), Ok((String::new(), "node-1".into())));
        // Any name the API server stores, RBAC's `system:` and `@` names included.
        assert_eq!(parse_token("/system:node@x"), Ok((String::new(), "system:node@x".into())));
        for bad in ["", "web", "shop/", "a/b/c", "shop/../x"] {
            assert!(parse_token(bad).is_err(), "{bad:?}");
        }
    }
}
