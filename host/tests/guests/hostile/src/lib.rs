//! Misbehaves as its config says (`{"mode": "..."}`), so tests can check that the host
//! contains and explains each kind of failure.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde::Deserialize;
use serde_json::json;
use wasmloop_sdk::prelude::*;

#[derive(Deserialize)]
struct Config {
    mode: String,
}

struct Hostile;

impl Reconciler for Hostile {
    fn manifest() -> Manifest {
        Manifest::new("hostile", "0.1.0").primary::<ConfigMap>()
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        let config: Config = request.config()?;
        match config.mode.as_str() {
            "panic" => panic!("hostile plugin panicked on purpose"),
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
            "oversize" => Ok(vec![status(json!({ "blob": "x".repeat(5 << 20) }))]),
            "read-undeclared" => {
                cache::get::<Secret>(Some("default"), "token")?;
                Ok(Vec::new())
            }
            "apply-undeclared" => {
                let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
                Ok(vec![apply(&secret)])
            }
            other => Err(Error::permanent(format!("unknown mode {other:?}"))),
        }
    }
}

wasmloop_sdk::export_plugin!(Hostile);
