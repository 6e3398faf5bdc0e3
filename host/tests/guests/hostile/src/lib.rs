//! Misbehaves as its config says (`{"mode": "..."}`), so tests can check that the host
//! contains and explains each kind of failure.

// Natively the export macro expands to nothing, leaving the plugin unused.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde::Deserialize;
use serde_json::json;
use wasmloop_sdk::prelude::*;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    mode: String,
    /// How often `requeue` ticks.
    #[serde(default = "default_interval")]
    interval_ms: u64,
    /// How many actions `flood` and `shared-strings` return.
    #[serde(default)]
    count: usize,
    /// The ConfigMap `steal` reads and overwrites, `NAMESPACE/NAME`, unless the trigger's
    /// `data.target` names another.
    #[serde(default)]
    target: String,
    /// The page size `list-pages` asks for.
    #[serde(default)]
    limit: u32,
    /// How many bytes `hold` fills.
    #[serde(default)]
    bytes: usize,
    /// How long `hold` keeps them, and how long `spin` computes, in milliseconds.
    #[serde(default)]
    ms: u64,
}

/// Whole pages of a static: `scribble` checks each holds what the image gave it.
#[repr(align(4096))]
struct Canary([u8; 8192]);

/// In the data segment: the image gives it 0x5A.
static DATA_CANARY: std::sync::Mutex<Canary> = std::sync::Mutex::new(Canary([0x5A; 8192]));
/// In `.bss`: the image gives it zeros.
static BSS_CANARY: std::sync::Mutex<Canary> = std::sync::Mutex::new(Canary([0; 8192]));

/// `bytes` of new linear memory (rounded up to wasm pages), outside the allocator's heap.
#[cfg(target_arch = "wasm32")]
#[expect(unsafe_code, reason = "new pages are wasm memory no allocator owns")]
fn grown(bytes: usize) -> Option<&'static mut [u8]> {
    let pages = bytes.div_ceil(65536);
    let base = core::arch::wasm32::memory_grow(0, pages);
    if base == usize::MAX {
        return None;
    }
    // SAFETY: the pages were just added to memory 0, and nothing else knows of them.
    Some(unsafe { std::slice::from_raw_parts_mut((base * 65536) as *mut u8, pages * 65536) })
}

#[cfg(not(target_arch = "wasm32"))]
fn grown(_bytes: usize) -> Option<&'static mut [u8]> {
    None
}

fn default_interval() -> u64 {
    500
}

struct Hostile;

/// A Deployment with this label starts `map`, which misbehaves as the label's value says.
const MAP_LABEL: &str = "wasmloop.dev/map";

impl Reconciler for Hostile {
    fn manifest() -> Manifest {
        // Watches Deployments, only the labelled ones (they start `map`), so its watch is
        // selected at the API server and shared with no plugin reading them whole. May patch
        // ConfigMaps in its primary's namespace, so that `steal` meets RBAC, the second wall,
        // there, and the host's grant check everywhere else.
        Manifest::new("hostile", "0.1.0")
            .primary::<ConfigMap>()
            .watches(KindSelector::of::<Deployment>().labels(MAP_LABEL))
            .metadata_only::<Deployment>()
            .writes(Grant::of::<ConfigMap>().patch())
            // Contract 0.2.1: keeps managedFields of its ConfigMaps, not their last-applied
            // annotation, so a test sees one kept field and one stripped on one object.
            .keep_managed_fields::<ConfigMap>()
    }

    fn map(related: &Object, _config: &wasmloop_sdk::Config) -> Vec<ObjectRef> {
        let labels = related.parse::<Deployment>().ok().and_then(|d| d.metadata.labels).unwrap_or_default();
        match labels.get(MAP_LABEL).map(String::as_str).unwrap_or_default() {
            "panic" => panic!("hostile map panicked on purpose"),
            "wrong-kind" => vec![ObjectRef::new::<Deployment>(related.name.clone())],
            "bad-name" => vec![ObjectRef::new::<ConfigMap>("../secrets")],
            "same-name" => vec![ObjectRef::new::<ConfigMap>(related.name.clone())],
            _ => Vec::new(),
        }
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        let config: Config = request.config()?;
        match config.mode.as_str() {
            "panic" => panic!("hostile plugin panicked on purpose"),
            "panic-until-healed" => {
                // Traps on every object until the object is labelled healed.
                let object: ConfigMap = request.object()?;
                if object.metadata.labels.unwrap_or_default().contains_key("wasmloop.dev/healed") {
                    wasmloop_sdk::info!("healed {}", request.object.name);
                    Ok(Vec::new())
                } else {
                    panic!("hostile plugin panicked on purpose")
                }
            }
            "loop" => {
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
                }
            }
            "ok" => Ok(Vec::new()),
            "hold" => {
                // Fills `bytes` of memory, every page touched, holds it `ms` on a WASI clock,
                // and succeeds: within its limits, never a failure.
                let mut held = vec![0u8; config.bytes];
                for page in held.chunks_mut(4096) {
                    page[0] = 1;
                }
                std::thread::sleep(std::time::Duration::from_millis(config.ms));
                wasmloop_sdk::info!("held {} bytes for {}", std::hint::black_box(&held).len(), request.object.name);
                Ok(Vec::new())
            }
            "scribble" => {
                // Grows its memory by `bytes`, which wasm promises are zeros whatever an earlier
                // instance in the same pool slot wrote there (the allocator would hide stale
                // bytes behind its own zeroing), then marks every other page: disjoint dirty
                // regions, more than one scan of the kernel's dirty pages reports.
                let pages = grown(config.bytes).ok_or_else(|| Error::permanent("memory.grow refused"))?;
                let stale = pages.iter().filter(|b| **b != 0).count();
                if stale != 0 {
                    return Err(Error::permanent(format!("{stale} bytes of an earlier instance")));
                }
                // The same for a static the image initialises and one it leaves to zero.
                let mut data = DATA_CANARY.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let mut bss = BSS_CANARY.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let stale = data.0.iter().filter(|b| **b != 0x5A).count() + bss.0.iter().filter(|b| **b != 0).count();
                if stale != 0 {
                    return Err(Error::permanent(format!("{stale} static bytes of an earlier instance")));
                }
                data.0.fill(0xA5);
                bss.0.fill(0xA5);
                for page in pages.chunks_mut(4096).step_by(2) {
                    page.fill(0xA5);
                }
                wasmloop_sdk::info!("scribbled {} bytes", std::hint::black_box(&pages).len());
                Ok(Vec::new())
            }
            "spin" => {
                // Computes for `ms` and succeeds: a plugin that is slow, not broken.
                let until = std::time::Instant::now() + std::time::Duration::from_millis(config.ms);
                let mut n = 0u64;
                while std::time::Instant::now() < until {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
                wasmloop_sdk::info!("spun on {}", request.object.name);
                Ok(Vec::new())
            }
            "remember" => {
                // Module state: under a fresh instance per call it holds only this call's name.
                static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
                let mut seen = SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                seen.push(request.object.name.clone());
                Ok(vec![status(json!({ "seen": *seen }))])
            }
            "event" => Ok(vec![event(EventType::Normal, "Hello", "an event on the primary")]),
            "requeue" => {
                wasmloop_sdk::info!("tick {}", request.object.name);
                Ok(vec![requeue_after(std::time::Duration::from_millis(config.interval_ms))])
            }
            "oversize" => Ok(vec![status(json!({ "blob": "x".repeat(5 << 20) }))]),
            "read-undeclared" => {
                cache::get::<Secret>(Some("default"), "token")?;
                Ok(Vec::new())
            }
            "apply-undeclared" => {
                let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
                Ok(vec![apply(&secret)])
            }
            "escape" => {
                // Reports what the sandbox let through; the host must grant none of it.
                let env = std::env::vars().count();
                let fs = std::fs::read_dir("/").map(|d| d.count()).map_err(|e| e.to_string());
                let net = std::net::TcpStream::connect("127.0.0.1:1").map(|_| ()).map_err(|e| e.to_string());
                Ok(vec![status(json!({
                    "envVars": env,
                    "rootDir": fs.map_or_else(|e| json!({"error": e}), |n| json!({"entries": n})),
                    "connect": net.map_or_else(|e| json!({"error": e}), |_| json!("connected")),
                }))])
            }
            "sleep" => {
                wasmloop_sdk::info!("sleeping on {}", request.object.name);
                // A WASI clock wait, not a busy loop: epoch interruption alone never fires here.
                std::thread::sleep(std::time::Duration::from_secs(3600));
                Ok(Vec::new())
            }
            "namespace-escape" => {
                // A namespace that would splice another resource into the URL path.
                let target = ObjectRef::new::<ConfigMap>("y").namespace("tenant-a/secrets/victim?x=");
                Ok(vec![delete(target)])
            }
            "bad-name" => {
                let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "../../secrets/x"}});
                Ok(vec![apply(&object)])
            }
            "bad-api-version" => {
                let object = json!({"apiVersion": "v1/../../apis", "kind": "ConfigMap", "metadata": {"name": "x"}});
                Ok(vec![apply(&object)])
            }
            "long-event" => Ok(vec![event(EventType::Normal, "R".repeat(1 << 10), "m".repeat(1 << 20))]),
            "steal" => {
                // Another tenant's ConfigMap: whether the cache serves it, then an overwrite.
                let trigger: ConfigMap = request.object()?;
                let target = trigger.data.and_then(|d| d.get("target").cloned()).unwrap_or(config.target);
                let (namespace, name) =
                    target.split_once('/').ok_or_else(|| Error::permanent("target is not NS/NAME"))?;
                let visible = match cache::get_object(&ConfigMap::gvk(), Some(namespace), name) {
                    Ok(found) => found.is_some(),
                    Err(cache::CacheError::OutOfScope(why)) => {
                        wasmloop_sdk::info!("out of scope: {why}");
                        false
                    }
                    Err(other) => return Err(other.into()),
                };
                let target = ObjectRef::new::<ConfigMap>(name).namespace(namespace);
                Ok(vec![
                    event(EventType::Normal, "Read", format!("visible: {visible}")),
                    patch(target, PatchKind::Merge, &json!({"data": {"stolen": "yes"}})),
                ])
            }
            "list-pages" => {
                // Walks the primary's namespace page by page, checking that no key repeats and
                // that the pages are in order.
                let namespace = request.object.namespace.as_deref();
                let (mut seen, mut pages, mut token) = (Vec::<String>::new(), 0u32, None::<String>);
                loop {
                    let page = cache::list_page(&ConfigMap::gvk(), namespace, None, config.limit, token.as_deref())?;
                    pages += 1;
                    seen.extend(page.items.iter().map(|o| o.name.clone()));
                    match page.continue_token {
                        Some(next) => token = Some(next),
                        None => break,
                    }
                }
                let ordered = seen.windows(2).all(|w| w[0] < w[1]);
                Ok(vec![event(
                    EventType::Normal,
                    "Listed",
                    format!("listed {} in {pages} pages, in order: {ordered}", seen.len()),
                )])
            }
            "stale-write" => {
                // The first try carries a resourceVersion no object has: a 409 Conflict for
                // certain. Retries write without it, and succeed.
                let stale = (request.attempt == 0).then_some("1");
                let patch_doc = json!({"metadata": {"resourceVersion": stale}, "data": {"written": "yes"}});
                Ok(vec![patch(request.object.to_ref(), PatchKind::Merge, &patch_doc)])
            }
            // Its manifest does not allow pruning: the host must refuse the ask.
            "prune" => Ok(vec![prune()]),
            "forged-token" => {
                let token = "no position at all";
                cache::list_page(&ConfigMap::gvk(), None, None, 0, Some(token))?;
                Ok(Vec::new())
            }
            "list-deployments" => {
                // Deployments are watched through a selector (`MAP_LABEL`): which does the
                // cache hold?
                let namespace = request.object.namespace.as_deref();
                let page = cache::list_page(&Deployment::gvk(), namespace, None, 0, None)?;
                let names: Vec<&str> = page.items.iter().map(|o| o.name.as_str()).collect();
                Ok(vec![event(EventType::Normal, "Listed", format!("deployments: {}", names.join(",")))])
            }
            "peek-deployment" => {
                // Deployments are metadata-only for this plugin: what does it get?
                let found = cache::get_object(&Deployment::gvk(), request.object.namespace.as_deref(), "web")?
                    .ok_or_else(|| Error::permanent("no Deployment web in the cache"))?;
                let value: serde_json::Value =
                    serde_json::from_str(found.json()).map_err(|e| Error::permanent(e.to_string()))?;
                let fields: Vec<&str> =
                    value.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
                let managed = value.pointer("/metadata/managedFields").is_some();
                Ok(vec![event(
                    EventType::Normal,
                    "Peeked",
                    format!("fields {}; managedFields: {managed}", fields.join(",")),
                )])
            }
            "peek-fields" => {
                // What reached it of the fields the host strips unless kept, on its primary as
                // the request carries it and as the cache serves it.
                let cached =
                    cache::get_object(&ConfigMap::gvk(), request.object.namespace.as_deref(), &request.object.name)?
                        .ok_or_else(|| Error::permanent("its own ConfigMap is not in the cache"))?;
                let report = |json: &str| -> Result<String, Error> {
                    let value: serde_json::Value =
                        serde_json::from_str(json).map_err(|e| Error::permanent(e.to_string()))?;
                    let managed = value.pointer("/metadata/managedFields").is_some();
                    let applied = value
                        .pointer("/metadata/annotations")
                        .and_then(|a| a.get("kubectl.kubernetes.io/last-applied-configuration"))
                        .is_some();
                    Ok(format!("managedFields: {managed}, last-applied: {applied}"))
                };
                Ok(vec![event(
                    EventType::Normal,
                    "Peeked",
                    format!("request {}; cache {}", report(request.object.json())?, report(cached.json())?),
                )])
            }
            "log-flood" => {
                // `count` lines of 10 KiB each.
                let line = "L".repeat(10 << 10);
                for _ in 0..config.count {
                    wasmloop_sdk::info!("{line}");
                }
                Ok(Vec::new())
            }
            "patch-ungranted" => {
                // Deployments are only read: patching one needs a grant the manifest lacks.
                let target = ObjectRef::new::<Deployment>("web");
                Ok(vec![patch(target, PatchKind::Merge, &json!({"metadata": {"labels": {"stolen": "yes"}}}))])
            }
            // A failure that still reports on the primary, and says when to retry.
            "fail-with-status" => Err(Error::transient("waiting for something")
                .reason("Waiting")
                .retry_after(std::time::Duration::from_millis(config.interval_ms))
                .with_action(status(json!({"waiting": true})))),
            // The same with an Event, which a ConfigMap (no status subresource) can show.
            "fail-with-event" => {
                wasmloop_sdk::info!("fail-with-event try {} of {}", request.attempt, request.object.name);
                Err(Error::transient("waiting for something")
                    .reason("Waiting")
                    .retry_after(std::time::Duration::from_millis(config.interval_ms))
                    .with_action(event(EventType::Normal, "StillWaiting", "told before the retry")))
            }
            // An error in the plugin's own words, with a reason of its own choosing.
            "fail" => Err(Error::permanent("the plugin's own words").reason("PluginChosenReason")),
            // A failure in `count` bytes of the plugin's own words, unique to each object, as
            // an outside probe sent them: the host must keep none of it.
            "fail-huge" => Err(Error::permanent(format!("{} {}", request.object.name, "e".repeat(config.count)))),
            "flood" => Ok((0..config.count).map(|i| event(EventType::Normal, "Flood", format!("{i}"))).collect()),
            "shared-strings" => Ok(shared_strings(config.count)),
            other => Err(Error::permanent(format!("unknown mode {other:?}"))),
        }
    }
}

/// `count` status actions whose strings all alias one 1 MiB buffer. The canonical ABI lowers
/// each string as a pointer and a length, so the host sees `count` MiB of strings while the
/// guest holds one: a host that copies before it counts runs out of memory.
#[allow(unsafe_code)]
fn shared_strings(count: usize) -> Vec<Action> {
    let mut blob = std::mem::ManuallyDrop::new(format!("{{\"blob\":\"{}\"}}", "x".repeat(1 << 20)));
    let (ptr, len, cap) = (blob.as_mut_ptr(), blob.len(), blob.capacity());
    (0..count)
        // SAFETY: deliberately unsound aliasing; these strings are only ever lowered to the
        // host, and the instance is discarded after the call.
        .map(|_| Action::Status(unsafe { String::from_raw_parts(ptr, len, cap) }))
        .collect()
}

wasmloop_sdk::export_plugin!(Hostile);
