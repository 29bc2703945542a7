//! The Python-facing module `stoker._native`. Thin: argument conversion and GIL release only;
//! the work lives in the pure-Rust modules beside this one. Every entry point runs under
//! `panic_guard::guard`: a panic is a `stoker.errors.NativePanicError`, never a `PanicException`.
//!
//! ## Shared without the GIL
//!
//! The module declares `gil_used = false`, so on a free-threaded build any number of threads call
//! one object at once, with nothing serializing them. Every class is `#[pyclass(frozen)]` (PyO3
//! then checks at compile time that it is `Sync`, and never borrow-checks it at run time: a
//! non-frozen class's `&mut self` method called from two threads raises "Already borrowed"
//! there). What a class may change sits behind a lock of its own:
//!
//! | class | what changes | kept whole by |
//! | --- | --- | --- |
//! | `ImageTransform`, `AudioTransform`, `VideoTransform`, `TextTokenizer` | nothing | immutable after `__new__` (a decode's scratch buffers are thread-local) |
//! | `TokenPacker` | the packer's rows and counters | a `Mutex`: waited for detached (`lock_py_attached`, or inside `py.detach`), and no Python object is made while it is held (was: `state()` built its dicts holding it while other calls waited for it holding the GIL: a collection inside `state()` ran a finalizer, another thread took the GIL and waited for the lock, and neither went on; `tests/stress/test_native_classes.py` stuck in 3 runs of 3. Without the GIL, the same wait blocks a stop-the-world collection) |
//! | `CacheEntries` | the open entries (gone after `close`) | an `RwLock` around an `Arc`: a call clones the `Arc` and lets go of the lock before any work; inside, the entries' own `Mutex`es and `RwLock` (never held across a call into Python) and a `flock` between processes |
//!
//! Module-wide state (the rayon pools by size, `media`'s polyphase filter banks) is a `OnceLock<Mutex<_>>`
//! held only for a lookup, never across a call into Python. The `_media` module
//! (`src/media/python.rs`) has functions only.

use pyo3::prelude::*;

use crate::build_info;
use crate::panic_guard::guard;

mod cache;
mod image;
mod media_transforms;
mod packing;
mod storage;
mod text;

/// Return a dict describing this build of the native core.
#[pyfunction]
#[pyo3(name = "build_info")]
fn describe_build(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    guard("build_info", None, || {
        let info = pyo3::types::PyDict::new(py);
        info.set_item("version", build_info::VERSION)?;
        info.set_item("optimized", build_info::is_optimized())?;
        info.set_item("target_features", build_info::target_features())?;
        Ok(info)
    })
}

/// `gil_used = false`: nothing here relies on the GIL for safety, so the module is importable on
/// free-threaded CPython without re-enabling the GIL.
#[pymodule(gil_used = false)]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", build_info::VERSION)?;
    module.add_function(wrap_pyfunction!(describe_build, module)?)?;
    module.add_class::<image::ImageTransform>()?;
    module.add_function(wrap_pyfunction!(image::decode_image, module)?)?;
    module.add_function(wrap_pyfunction!(image::decode_batch_into, module)?)?;
    module.add_function(wrap_pyfunction!(image::image_sizes, module)?)?;
    module.add_function(wrap_pyfunction!(image::encode_jpeg, module)?)?;
    module.add_function(wrap_pyfunction!(storage::read_ranges, module)?)?;
    module.add_function(wrap_pyfunction!(storage::crc32, module)?)?;
    #[cfg(unix)]
    module.add_function(wrap_pyfunction!(storage::lock_bytes, module)?)?;
    #[cfg(unix)]
    module.add_function(wrap_pyfunction!(storage::unlock_bytes, module)?)?;
    module.add_function(wrap_pyfunction!(storage::list_tree, module)?)?;
    module.add_function(wrap_pyfunction!(storage::key_hashes, module)?)?;
    module.add_class::<cache::CacheEntries>()?;
    module.add_class::<packing::TokenPacker>()?;
    module.add_class::<text::TextTokenizer>()?;
    module.add_function(wrap_pyfunction!(text::check_tokenizer_json, module)?)?;
    module.add("MAX_TOKEN_ID", crate::text::limits::MAX_TOKEN_ID)?;
    module.add_class::<media_transforms::AudioTransform>()?;
    module.add_class::<media_transforms::VideoTransform>()?;
    Ok(())
}
