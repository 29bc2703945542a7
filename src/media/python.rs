//! The Python-facing module `_media` of one FFmpeg major's build: `decode_audio_batch_into` and
//! `decode_video_batch_into`, and `probe_media_into` (lengths from headers). The decoders take the transform's keyword arguments (what
//! `AudioTransform.__getnewargs_ex__` gives) rather than the core's object, which another native
//! module cannot read; the spec is rebuilt by the core's own checks. The work runs with the GIL
//! released.

use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;

use stoker_native::image::batch::FailurePolicy;
use stoker_native::media::spec::{audio_spec, video_spec, AudioOptions, VideoOptions};
use stoker_native::panic_guard::guard;

use ffmpeg_next::media::Type;

use crate::batch::{decode_audio_batch, decode_video_batch, probe_batch, AudioBuffer};
use crate::probe::PROBE_FIELDS;

/// `out`'s shape checked against (>= count, *sample_shape), C-contiguous.
fn check_out(out: &Bound<'_, PyUntypedArray>, count: usize, sample_shape: &[usize], seeds: usize, threads: usize) -> PyResult<()> {
    if seeds != count {
        return Err(PyValueError::new_err(format!("{seeds} seeds for {count} inputs")));
    }
    if threads == 0 {
        return Err(PyValueError::new_err("threads must be at least 1"));
    }
    let shape = out.shape();
    if shape.len() != sample_shape.len() + 1 || shape[1..] != sample_shape[..] || shape[0] < count {
        return Err(PyValueError::new_err(format!("out has shape {shape:?}; {count} samples need (>= {count}, {sample_shape:?})")));
    }
    if !out.is_c_contiguous() {
        return Err(PyValueError::new_err("out must be C-contiguous"));
    }
    Ok(())
}

fn policy(compact: bool) -> FailurePolicy {
    if compact {
        FailurePolicy::Compact
    } else {
        FailurePolicy::ZeroFill
    }
}

fn writable<'a, T: numpy::Element>(array: &'a Bound<'_, PyArrayDyn<T>>) -> PyResult<numpy::PyReadwriteArrayDyn<'a, T>> {
    array.try_readwrite().map_err(|error| PyValueError::new_err(format!("out is not writable: {error}")))
}

/// Decode audio `inputs` into `out` (shape (N, channels, samples), N >= len(inputs)).
///
/// Returns one entry per input: None, or the error message.
#[pyfunction]
#[pyo3(signature = (inputs, out, seeds, compact=false, threads=1, *, sample_rate, samples, channels=1, select_channel=None, window, dtype))]
#[allow(clippy::too_many_arguments)]
fn decode_audio_batch_into(
    py: Python<'_>,
    inputs: Vec<PyBackedBytes>,
    out: &Bound<'_, PyUntypedArray>,
    seeds: Vec<u64>,
    compact: bool,
    threads: usize,
    sample_rate: u32,
    samples: usize,
    channels: usize,
    select_channel: Option<usize>,
    window: &str,
    dtype: &str,
) -> PyResult<Vec<Option<String>>> {
    guard("decode_audio_batch_into", None, || {
        let options = AudioOptions { sample_rate, samples, channels, select_channel, window, dtype };
        let (spec, int16) = audio_spec(&options).map_err(PyValueError::new_err)?;
        check_out(out, inputs.len(), &[spec.output_channels(), spec.length], seeds.len(), threads)?;
        let slices: Vec<&[u8]> = inputs.iter().map(|bytes| &**bytes).collect();
        let wrong_dtype = || PyTypeError::new_err(format!("out must be {dtype}"));
        let errors = if int16 {
            let array = out.cast::<PyArrayDyn<i16>>().map_err(|_| wrong_dtype())?;
            let mut out = writable(array)?;
            let slice = out.as_slice_mut().map_err(|error| PyValueError::new_err(error.to_string()))?;
            py.detach(|| decode_audio_batch(&slices, &seeds, &spec, AudioBuffer::I16(slice), threads, policy(compact)))
        } else {
            let array = out.cast::<PyArrayDyn<f32>>().map_err(|_| wrong_dtype())?;
            let mut out = writable(array)?;
            let slice = out.as_slice_mut().map_err(|error| PyValueError::new_err(error.to_string()))?;
            py.detach(|| decode_audio_batch(&slices, &seeds, &spec, AudioBuffer::F32(slice), threads, policy(compact)))
        };
        Ok(errors.into_iter().map(|error| error.map(|error| error.to_string())).collect())
    })
}

/// Decode video `inputs` into `out` (shape (N, *transform.output_shape), uint8).
///
/// Returns one entry per input: None, or the error message.
#[pyfunction]
#[pyo3(signature = (
    inputs, out, seeds, compact=false, threads=1, *, frames, stride=1, fps=None, clip, resize_shorter=None, resize=None,
    center_crop=None, random_crop=None, cover=None, cover_crop="center", flip_probability, layout
))]
#[allow(clippy::too_many_arguments)]
fn decode_video_batch_into(
    py: Python<'_>,
    inputs: Vec<PyBackedBytes>,
    out: &Bound<'_, PyUntypedArray>,
    seeds: Vec<u64>,
    compact: bool,
    threads: usize,
    frames: usize,
    stride: usize,
    fps: Option<f64>,
    clip: &str,
    resize_shorter: Option<usize>,
    resize: Option<(usize, usize)>,
    center_crop: Option<(usize, usize)>,
    random_crop: Option<(usize, usize)>,
    cover: Option<(usize, usize)>,
    cover_crop: &str,
    flip_probability: f64,
    layout: &str,
) -> PyResult<Vec<Option<String>>> {
    guard("decode_video_batch_into", None, || {
        let options = VideoOptions {
            frames,
            stride,
            fps,
            clip,
            resize_shorter,
            resize,
            center_crop,
            random_crop,
            cover,
            cover_crop,
            flip_probability,
            layout,
        };
        let spec = video_spec(&options).map_err(PyValueError::new_err)?;
        let shape = spec.output_shape();
        check_out(out, inputs.len(), &[shape.0, shape.1, shape.2, shape.3], seeds.len(), threads)?;
        let slices: Vec<&[u8]> = inputs.iter().map(|bytes| &**bytes).collect();
        let array = out.cast::<PyArrayDyn<u8>>().map_err(|_| PyTypeError::new_err("out must be uint8"))?;
        let mut out = writable(array)?;
        let slice = out.as_slice_mut().map_err(|error| PyValueError::new_err(error.to_string()))?;
        let slot_len = spec.slot_len().expect("checked in video_spec");
        let errors = py.detach(|| decode_video_batch(&slices, &seeds, &spec, slice, slot_len, threads, policy(compact)));
        Ok(errors.into_iter().map(|error| error.map(|error| error.to_string())).collect())
    })
}

/// Probe `inputs` into `out` (shape (N, 5), float64): each file's duration in seconds, frame
/// count, frame or sample rate, width and height, from its headers (nothing decoded).
///
/// Returns one entry per input: None, or why its length cannot be read (its row left zero).
#[pyfunction]
#[pyo3(signature = (inputs, out, kind, threads=1))]
fn probe_media_into(
    py: Python<'_>,
    inputs: Vec<PyBackedBytes>,
    out: &Bound<'_, PyUntypedArray>,
    kind: &str,
    threads: usize,
) -> PyResult<Vec<Option<String>>> {
    guard("probe_media_into", None, || {
        let kind = match kind {
            "audio" => Type::Audio,
            "video" => Type::Video,
            other => return Err(PyValueError::new_err(format!("kind must be \"audio\" or \"video\", got {other:?}"))),
        };
        check_out(out, inputs.len(), &[PROBE_FIELDS], inputs.len(), threads)?;
        let slices: Vec<&[u8]> = inputs.iter().map(|bytes| &**bytes).collect();
        let array = out.cast::<PyArrayDyn<f64>>().map_err(|_| PyTypeError::new_err("out must be float64"))?;
        let mut out = writable(array)?;
        let slice = out.as_slice_mut().map_err(|error| PyValueError::new_err(error.to_string()))?;
        let errors = py.detach(|| probe_batch(&slices, kind, slice, threads));
        Ok(errors.into_iter().map(|error| error.map(|error| error.to_string())).collect())
    })
}

/// The libavcodec this module was built for (its major) and the one it runs with, as
/// `{"built_major": 59, "running": "59.37.100"}`: a bug report can say both.
#[pyfunction]
fn ffmpeg_versions(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    guard("ffmpeg_versions", None, || {
        let versions = pyo3::types::PyDict::new(py);
        versions.set_item("built_major", ffmpeg_sys_next::LIBAVCODEC_VERSION_MAJOR)?;
        // SAFETY: avcodec_version returns a constant of the loaded library; it has no preconditions.
        let running = unsafe { ffmpeg_sys_next::avcodec_version() };
        versions.set_item("running", format!("{}.{}.{}", running >> 16, (running >> 8) & 0xff, running & 0xff))?;
        Ok(versions)
    })
}

/// `gil_used = false`: nothing here relies on the GIL for safety.
#[pymodule(gil_used = false)]
fn _media(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", stoker_native::build_info::VERSION)?;
    module.add_function(wrap_pyfunction!(decode_audio_batch_into, module)?)?;
    module.add_function(wrap_pyfunction!(decode_video_batch_into, module)?)?;
    module.add_function(wrap_pyfunction!(probe_media_into, module)?)?;
    module.add_function(wrap_pyfunction!(ffmpeg_versions, module)?)?;
    Ok(())
}
