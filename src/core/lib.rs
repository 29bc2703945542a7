//! stoker's native core.
//!
//! The pure-Rust modules hold the hot loops and are tested with `cargo test`, which needs no
//! Python. The `python` feature adds the PyO3 bindings (the `python/` module, one file per
//! concern: image, packing, storage) that maturin builds into the `stoker._native` extension
//! module.

pub mod build_info;
pub mod image;
pub mod media;
pub mod packing;
pub mod panic_guard;
pub mod storage;
pub mod text;

#[cfg(feature = "python")]
mod python;
