//! The Python-facing module `stoker._native`. Thin: argument conversion and GIL release only;
//! the work lives in the pure-Rust modules beside this one. Every entry point runs under
//! `panic_guard::guard`: a panic is a `stoker.errors.NativePanicError`, never a `PanicException`.

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
