//! Which components the host accepts: components (not core modules) built for a version of
//! `wasmloop:plugin` it serves, 0.3 natively and 0.2 and 0.1 through the adapters.
//!
//! Compatible means what cargo means by semver: the same major, or for `0.x` the same minor.
//! The version is read from the component's `wasmloop:plugin/*` import and export names
//! before anything is linked (`check`), and any other is refused naming it and what this
//! host serves. How versions are added is the rule in `docs/architecture.md`, "How the
//! contract evolves".

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::manifest::Contract;

/// The WIT package the host serves.
pub const CONTRACT_PACKAGE: &str = "wasmloop:plugin";
/// The contract version the host is written against; components built for `0.3.x` are
/// accepted, and so are those built for [`LEGACY_CONTRACT_VERSIONS`].
pub const CONTRACT_VERSION: &str = "0.3.0";
/// The older contract versions still served, through adapters, newest first.
pub const LEGACY_CONTRACT_VERSIONS: [&str; 2] = ["0.2.1", "0.1.0"];

/// The version of the contract `contract` the host serves it as.
pub fn version_of(contract: Contract) -> &'static str {
    match contract {
        Contract::V0_3 => CONTRACT_VERSION,
        Contract::V0_2 => LEGACY_CONTRACT_VERSIONS[0],
        Contract::V0_1 => LEGACY_CONTRACT_VERSIONS[1],
    }
}

/// The optional interface of cache options of a component built for `contract`, probed for by
/// name (wasmtime's semver lookup finds later patch versions' exports of it too); none before
/// 0.2.1 added it.
pub(crate) fn cache_options(contract: Contract) -> Option<String> {
    match contract {
        Contract::V0_1 => None,
        other => Some(format!("{CONTRACT_PACKAGE}/cache-options@{}", version_of(other))),
    }
}

/// What the 8-byte preamble says a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binary {
    Component,
    CoreModule,
    NotWasm,
}

pub(crate) fn classify(bytes: &[u8]) -> Binary {
    // `\0asm`, then a 2-byte version and a 2-byte layer: layer 0 is a core module, layer 1 a
    // component (component-model binary format, "preamble").
    match bytes {
        [0x00, 0x61, 0x73, 0x6d, _, _, 0x00, 0x00, ..] => Binary::CoreModule,
        [0x00, 0x61, 0x73, 0x6d, _, _, 0x01, 0x00, ..] => Binary::Component,
        _ => Binary::NotWasm,
    }
}

/// `(major, minor)` compatibility class of a semver string: `0.x` versions are compatible only
/// within one minor, as cargo and the component model treat them.
fn compat_class(version: &str) -> Option<(u64, u64)> {
    let mut parts = version.split(['.', '-', '+']).map(|p| p.parse::<u64>());
    let major = parts.next()?.ok()?;
    let minor = parts.next()?.ok()?;
    Some(if major == 0 { (0, minor) } else { (major, 0) })
}

/// The contract versions a component was built for, from its export and import names.
fn contract_versions(engine: &Engine, component: &Component) -> Vec<String> {
    let ty = component.component_type();
    let prefix = format!("{CONTRACT_PACKAGE}/");
    let names = ty.exports(engine).map(|(n, _)| n.to_owned()).chain(ty.imports(engine).map(|(n, _)| n.to_owned()));
    let mut versions: Vec<String> =
        names.filter(|n| n.starts_with(&prefix)).filter_map(|n| n.split_once('@').map(|(_, v)| v.to_owned())).collect();
    versions.sort();
    versions.dedup();
    versions
}

/// Why a component does not fit the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mismatch {
    /// It exports nothing of `wasmloop:plugin`; the names it does export are listed.
    NotAPlugin { exports: Vec<String> },
    /// It was built for another version.
    Version { found: String },
    /// It names two served versions at once (exports of one, imports of the other).
    Mixed { found: Vec<String> },
}

/// The contract a version string belongs to, if the host serves it.
fn served(version: &str) -> Option<Contract> {
    let class = compat_class(version)?;
    [Contract::V0_3, Contract::V0_2, Contract::V0_1].into_iter().find(|c| compat_class(version_of(*c)) == Some(class))
}

/// Checks the component against the contract; returns the full name of the plugin interface
/// it exports (`wasmloop:plugin/plugin@0.2.0`) and the contract it was built for.
pub(crate) fn check(engine: &Engine, component: &Component) -> Result<(String, Contract), Mismatch> {
    let versions = contract_versions(engine, component);
    if let Some(found) = versions.iter().find(|v| served(v).is_none()) {
        return Err(Mismatch::Version { found: found.clone() });
    }
    // A component mixing two served versions would call one contract through the other.
    let contracts: Vec<Contract> = versions.iter().filter_map(|v| served(v)).collect();
    if contracts.windows(2).any(|w| w[0] != w[1]) {
        return Err(Mismatch::Mixed { found: versions });
    }
    let contract = contracts.first().copied().unwrap_or(Contract::V0_3);
    let plugin = format!("{CONTRACT_PACKAGE}/plugin@");
    match component.component_type().exports(engine).find(|(n, _)| n.starts_with(&plugin)) {
        Some((name, _)) => Ok((name.to_owned(), contract)),
        None => {
            let exports = component.component_type().exports(engine).map(|(n, _)| n.to_owned()).collect();
            Err(Mismatch::NotAPlugin { exports })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preamble_tells_core_modules_from_components() {
        assert_eq!(classify(b"\0asm\x01\0\0\0"), Binary::CoreModule);
        assert_eq!(classify(b"\0asm\x0d\0\x01\0rest"), Binary::Component);
        assert_eq!(classify(b"apiVersion: v1"), Binary::NotWasm);
        assert_eq!(classify(b""), Binary::NotWasm);
    }

    #[test]
    fn the_host_serves_0_3_0_2_and_0_1_and_nothing_else() {
        assert_eq!(served("0.3.0"), Some(Contract::V0_3));
        assert_eq!(served("0.3.2"), Some(Contract::V0_3));
        assert_eq!(served("0.2.0"), Some(Contract::V0_2));
        assert_eq!(served("0.2.3"), Some(Contract::V0_2));
        assert_eq!(served("0.1.0"), Some(Contract::V0_1));
        assert_eq!(served("0.4.0"), None);
        assert_eq!(served("1.0.0"), None);
        assert_eq!(served("x"), None);
    }

    #[test]
    fn zero_major_versions_are_compatible_within_a_minor_only() {
        assert_eq!(compat_class("0.1.0"), compat_class("0.1.7"));
        assert_ne!(compat_class("0.1.0"), compat_class("0.2.0"));
        assert_eq!(compat_class("1.2.0"), compat_class("1.9.1"));
        assert_ne!(compat_class("1.0.0"), compat_class("2.0.0"));
    }
}
