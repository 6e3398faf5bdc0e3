//! Links the release `wasmloop` binary with the code a running host executes first and
//! together, in the order `link-order.txt` lists it (`scripts/link-order` writes it from an
//! instrumented run).
//!
//! The kernel maps a program's code 64 KiB around each page it first runs, so the few
//! thousand functions a host runs, spread over 28 MB of code, made 17 MiB of it resident;
//! packed together they map a few (`docs/benchmarks.md`, "A plugin's fixed memory"). Only the
//! layout changes, not the code. Symbols the list names that the binary lacks (after a
//! dependency or the toolchain changed their hashes) are skipped.
//!
//! With `WASMLOOP_PACK_RELOCS=on`, which `scripts/build-release` (and so the image) sets, its
//! relocations are packed too (`-z pack-relative-relocs`): the binary then needs glibc 2.36 to
//! run, as the image (Debian 12) has.
//!
//! Only release builds for x86_64 Linux GNU, where Rust links with its own `lld` (since 1.90),
//! the linker that reads the list; a build that turns that linker off fails to link unless
//! `WASMLOOP_LINK_ORDER=off` leaves both out.

fn main() {
    println!("cargo:rerun-if-changed=link-order.txt");
    println!("cargo:rerun-if-env-changed=WASMLOOP_LINK_ORDER");
    println!("cargo:rerun-if-env-changed=WASMLOOP_PACK_RELOCS");
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let lld_by_default = env("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && env("CARGO_CFG_TARGET_OS") == "linux"
        && env("CARGO_CFG_TARGET_ENV") == "gnu";
    if env("PROFILE") != "release" || !lld_by_default || env("WASMLOOP_LINK_ORDER") == "off" {
        return;
    }
    // The position-independent binary's relocations as a bitmap: the loader read 1.3 MiB of
    // them at every start, and kept them resident. Only when asked (`scripts/build-release`,
    // so the image): the binary then needs glibc 2.36 wherever it runs.
    if env("WASMLOOP_PACK_RELOCS") == "on" {
        println!("cargo:rustc-link-arg-bin=wasmloop=-Wl,-z,pack-relative-relocs");
    }
    let list = std::path::Path::new(&env("CARGO_MANIFEST_DIR")).join("link-order.txt");
    if list.exists() {
        println!("cargo:rustc-link-arg-bin=wasmloop=-Wl,--symbol-ordering-file={}", list.display());
        println!("cargo:rustc-link-arg-bin=wasmloop=-Wl,--no-warn-symbol-ordering");
    }
}
