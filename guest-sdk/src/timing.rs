//! Where guest time goes, for the host's benchmark (feature `phase-timing`).
//!
//! Without the feature every function here is a direct call, so shipped plugins pay
//! nothing.

#[cfg(feature = "phase-timing")]
mod imp {
    use std::cell::Cell;
    use std::time::Instant;

    thread_local! {
        static DECODE: Cell<u64> = const { Cell::new(0) };
        static ENCODE: Cell<u64> = const { Cell::new(0) };
    }

    fn timed<T>(slot: &'static std::thread::LocalKey<Cell<u64>>, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        let ns = start.elapsed().as_nanos() as u64;
        slot.with(|c| c.set(c.get() + ns));
        out
    }

    pub(crate) fn decode<T>(f: impl FnOnce() -> T) -> T {
        timed(&DECODE, f)
    }

    pub(crate) fn encode<T>(f: impl FnOnce() -> T) -> T {
        timed(&ENCODE, f)
    }

    /// Runs one reconcile's logic and returns (decode, logic, encode) nanoseconds, where
    /// logic excludes the decode and encode done inside it.
    pub(crate) fn phases<T>(f: impl FnOnce() -> T) -> (T, [u64; 3]) {
        DECODE.with(|c| c.set(0));
        ENCODE.with(|c| c.set(0));
        let start = Instant::now();
        let out = f();
        let total = start.elapsed().as_nanos() as u64;
        let decode = DECODE.with(Cell::get);
        let encode = ENCODE.with(Cell::get);
        (out, [decode, total.saturating_sub(decode + encode), encode])
    }

    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))] // used by the component glue
    pub(crate) fn now() -> Option<Instant> {
        Some(Instant::now())
    }
}

#[cfg(not(feature = "phase-timing"))]
mod imp {
    #[inline(always)]
    pub(crate) fn decode<T>(f: impl FnOnce() -> T) -> T {
        f()
    }

    #[inline(always)]
    pub(crate) fn encode<T>(f: impl FnOnce() -> T) -> T {
        f()
    }

    #[allow(dead_code)]
    #[inline(always)]
    pub(crate) fn phases<T>(f: impl FnOnce() -> T) -> (T, [u64; 3]) {
        (f(), [0; 3])
    }

    #[allow(dead_code)]
    #[inline(always)]
    pub(crate) fn now() -> Option<std::time::Instant> {
        None
    }
}

pub(crate) use imp::*;
