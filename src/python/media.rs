//! Python bindings of the audio and video path: `AudioTransform`, `VideoTransform`,
//! `decode_audio_batch_into`, `decode_video_batch_into`. Arguments are checked here; the work
//! runs with the GIL released.

use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyDict, PyTuple};

use crate::image::batch::FailurePolicy;
use crate::media::audio::{AudioSpec, Channels};
use crate::media::batch::{decode_audio_batch, decode_video_batch, AudioBuffer};
use crate::media::frame_geometry::{FrameGeometry, Resize};
use crate::media::video::{VideoLayout, VideoSpec};
use crate::media::window::{ClipStep, Placement};

fn placement(name: &str, what: &str) -> PyResult<Placement> {
    match name {
        "random" => Ok(Placement::Random),
        "center" => Ok(Placement::Center),
        "start" => Ok(Placement::Start),
        other => Err(PyValueError::new_err(format!("{what} must be \"random\", \"center\" or \"start\", got {other:?}"))),
    }
}

fn placement_name(placement: Placement) -> &'static str {
    match placement {
        Placement::Random => "random",
        Placement::Center => "center",
        Placement::Start => "start",
    }
}

/// What to make of every audio sample: a window at one rate, mixed or selected channels.
#[pyclass(frozen, module = "stoker._native")]
pub struct AudioTransform {
    spec: AudioSpec,
    int16: bool,
}

#[pymethods]
impl AudioTransform {
    #[new]
    #[pyo3(signature = (*, sample_rate=16000, samples, channels=1, select_channel=None, window="random", dtype="float32"))]
    fn new(sample_rate: u32, samples: usize, channels: usize, select_channel: Option<usize>, window: &str, dtype: &str) -> PyResult<Self> {
        if !(1..=768_000).contains(&sample_rate) {
            return Err(PyValueError::new_err(format!("sample_rate must be 1..768000 Hz, got {sample_rate}")));
        }
        if samples == 0 {
            return Err(PyValueError::new_err("the window must hold at least one sample"));
        }
        let channels = match select_channel {
            Some(channel) if channels == 1 => Channels::Select(channel),
            Some(_) => return Err(PyValueError::new_err("select_channel gives one channel: leave channels at 1")),
            None if (1..=8).contains(&channels) => Channels::Mix(channels),
            None => return Err(PyValueError::new_err(format!("channels must be 1..8, got {channels}"))),
        };
        let int16 = match dtype {
            "float32" => false,
            "int16" => true,
            other => return Err(PyValueError::new_err(format!("dtype must be \"float32\" or \"int16\", got {other:?}"))),
        };
        let spec = AudioSpec { sample_rate, length: samples, channels, placement: placement(window, "window")? };
        Ok(AudioTransform { spec, int16 })
    }

    /// Each sample's shape: (channels, samples).
    #[getter]
    fn output_shape(&self) -> (usize, usize) {
        (self.spec.output_channels(), self.spec.length)
    }

    #[getter]
    fn sample_rate(&self) -> u32 {
        self.spec.sample_rate
    }

    /// "float32" or "int16".
    #[getter]
    fn dtype(&self) -> &'static str {
        if self.int16 {
            "int16"
        } else {
            "float32"
        }
    }

    fn __repr__(&self) -> String {
        format!("AudioTransform({:?}, dtype={})", self.spec, self.dtype())
    }

    /// The keyword arguments that make this transform again (pickling, for other processes).
    fn __getnewargs_ex__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        let options = PyDict::new(py);
        options.set_item("sample_rate", self.spec.sample_rate)?;
        options.set_item("samples", self.spec.length)?;
        match self.spec.channels {
            Channels::Mix(count) => options.set_item("channels", count)?,
            Channels::Select(channel) => options.set_item("select_channel", channel)?,
        }
        options.set_item("window", placement_name(self.spec.placement))?;
        options.set_item("dtype", self.dtype())?;
        Ok((PyTuple::empty(py), options))
    }
}

/// What to make of every video sample: a clip of frames, each resized and cropped to RGB.
#[pyclass(frozen, module = "stoker._native")]
pub struct VideoTransform {
    spec: VideoSpec,
}

#[pymethods]
impl VideoTransform {
    #[new]
    #[pyo3(signature = (
        *, frames, stride=1, fps=None, clip="random", resize_shorter=None, resize=None, center_crop=None, random_crop=None,
        flip_probability=0.0, layout="TCHW"
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        frames: usize,
        stride: usize,
        fps: Option<f64>,
        clip: &str,
        resize_shorter: Option<usize>,
        resize: Option<(usize, usize)>,
        center_crop: Option<(usize, usize)>,
        random_crop: Option<(usize, usize)>,
        flip_probability: f64,
        layout: &str,
    ) -> PyResult<Self> {
        if !(0.0..=1.0).contains(&flip_probability) {
            return Err(PyValueError::new_err(format!("flip_probability must be in [0, 1], got {flip_probability}")));
        }
        if center_crop.is_some() && random_crop.is_some() {
            return Err(PyValueError::new_err("center_crop and random_crop are exclusive"));
        }
        if frames == 0 || stride == 0 {
            return Err(PyValueError::new_err("frames and stride must be at least 1"));
        }
        let (step, placement) = match (clip, fps) {
            ("uniform", None) if stride == 1 => (ClipStep::Spread, Placement::Start),
            ("uniform", _) => {
                return Err(PyValueError::new_err("clip=\"uniform\" spreads the frames over the whole video: give no stride or fps"))
            }
            (_, Some(rate)) if !(rate.is_finite() && rate > 0.0) => {
                return Err(PyValueError::new_err(format!("fps must be positive, got {rate}")))
            }
            (_, Some(_)) if stride != 1 => return Err(PyValueError::new_err("give stride or fps, not both")),
            (name, Some(rate)) => (ClipStep::Rate(rate), placement(name, "clip")?),
            (name, None) => (ClipStep::Stride(stride), placement(name, "clip")?),
        };
        let resize = match (resize_shorter, resize) {
            (Some(_), Some(_)) => return Err(PyValueError::new_err("give resize_shorter or resize, not both")),
            (Some(side), None) => Resize::Shorter(side),
            (None, Some((height, width))) => Resize::Exact(width, height),
            (None, None) => Resize::None,
        };
        let geometry = FrameGeometry {
            resize,
            crop: center_crop.or(random_crop).map(|(height, width)| (width, height)),
            random_crop: random_crop.is_some(),
            flip_probability,
        };
        let zero = matches!(resize, Resize::Shorter(0) | Resize::Exact(0, _) | Resize::Exact(_, 0))
            || geometry.crop.is_some_and(|(width, height)| width == 0 || height == 0);
        if zero {
            return Err(PyValueError::new_err("sizes must be positive"));
        }
        if geometry.output_size().is_none() {
            return Err(PyValueError::new_err("a batch needs one frame size: give center_crop, random_crop or resize=(height, width)"));
        }
        let layout = match layout {
            "THWC" => VideoLayout::Thwc,
            "TCHW" => VideoLayout::Tchw,
            "CTHW" => VideoLayout::Cthw,
            other => return Err(PyValueError::new_err(format!("layout must be \"TCHW\", \"THWC\" or \"CTHW\", got {other:?}"))),
        };
        Ok(VideoTransform { spec: VideoSpec { frames, step, placement, geometry, layout } })
    }

    /// Each clip's shape, in the layout's order.
    #[getter]
    fn output_shape(&self) -> (usize, usize, usize, usize) {
        let (width, height) = self.spec.geometry.output_size().expect("checked in new");
        let frames = self.spec.frames;
        match self.spec.layout {
            VideoLayout::Thwc => (frames, height, width, 3),
            VideoLayout::Tchw => (frames, 3, height, width),
            VideoLayout::Cthw => (3, frames, height, width),
        }
    }

    /// Always "uint8".
    #[getter]
    fn dtype(&self) -> &'static str {
        "uint8"
    }

    fn __repr__(&self) -> String {
        format!("VideoTransform({:?})", self.spec)
    }

    /// The keyword arguments that make this transform again (pickling, for other processes).
    fn __getnewargs_ex__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        let options = PyDict::new(py);
        let spec = &self.spec;
        options.set_item("frames", spec.frames)?;
        match spec.step {
            ClipStep::Stride(stride) => options.set_item("stride", stride)?,
            ClipStep::Rate(rate) => options.set_item("fps", rate)?,
            ClipStep::Spread => {}
        }
        options.set_item("clip", if spec.step == ClipStep::Spread { "uniform" } else { placement_name(spec.placement) })?;
        match spec.geometry.resize {
            Resize::None => {}
            Resize::Shorter(side) => options.set_item("resize_shorter", side)?,
            Resize::Exact(width, height) => options.set_item("resize", (height, width))?,
        }
        if let Some((width, height)) = spec.geometry.crop {
            options.set_item(if spec.geometry.random_crop { "random_crop" } else { "center_crop" }, (height, width))?;
        }
        options.set_item("flip_probability", spec.geometry.flip_probability)?;
        let layout = match spec.layout {
            VideoLayout::Thwc => "THWC",
            VideoLayout::Tchw => "TCHW",
            VideoLayout::Cthw => "CTHW",
        };
        options.set_item("layout", layout)?;
        Ok((PyTuple::empty(py), options))
    }
}

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

/// Decode audio `inputs` into `out` (shape (N, channels, samples), N >= len(inputs)).
///
/// Returns one entry per input: None, or the error message.
#[pyfunction]
#[pyo3(signature = (inputs, transform, out, seeds, compact=false, threads=1))]
pub fn decode_audio_batch_into(
    py: Python<'_>,
    inputs: Vec<PyBackedBytes>,
    transform: &AudioTransform,
    out: &Bound<'_, PyUntypedArray>,
    seeds: Vec<u64>,
    compact: bool,
    threads: usize,
) -> PyResult<Vec<Option<String>>> {
    let (channels, samples) = transform.output_shape();
    check_out(out, inputs.len(), &[channels, samples], seeds.len(), threads)?;
    let slices: Vec<&[u8]> = inputs.iter().map(|bytes| &**bytes).collect();
    let wrong_dtype = || PyTypeError::new_err(format!("out must be {}", transform.dtype()));
    let spec = &transform.spec;
    let errors = if transform.int16 {
        let array = out.cast::<PyArrayDyn<i16>>().map_err(|_| wrong_dtype())?;
        let mut writable = array.try_readwrite().map_err(|error| PyValueError::new_err(format!("out is not writable: {error}")))?;
        let slice = writable.as_slice_mut().map_err(|error| PyValueError::new_err(error.to_string()))?;
        py.detach(|| decode_audio_batch(&slices, &seeds, spec, AudioBuffer::I16(slice), threads, policy(compact)))
    } else {
        let array = out.cast::<PyArrayDyn<f32>>().map_err(|_| wrong_dtype())?;
        let mut writable = array.try_readwrite().map_err(|error| PyValueError::new_err(format!("out is not writable: {error}")))?;
        let slice = writable.as_slice_mut().map_err(|error| PyValueError::new_err(error.to_string()))?;
        py.detach(|| decode_audio_batch(&slices, &seeds, spec, AudioBuffer::F32(slice), threads, policy(compact)))
    };
    Ok(errors.into_iter().map(|error| error.map(|error| error.to_string())).collect())
}

/// Decode video `inputs` into `out` (shape (N, *transform.output_shape), uint8).
///
/// Returns one entry per input: None, or the error message.
#[pyfunction]
#[pyo3(signature = (inputs, transform, out, seeds, compact=false, threads=1))]
pub fn decode_video_batch_into(
    py: Python<'_>,
    inputs: Vec<PyBackedBytes>,
    transform: &VideoTransform,
    out: &Bound<'_, PyUntypedArray>,
    seeds: Vec<u64>,
    compact: bool,
    threads: usize,
) -> PyResult<Vec<Option<String>>> {
    let shape = transform.output_shape();
    check_out(out, inputs.len(), &[shape.0, shape.1, shape.2, shape.3], seeds.len(), threads)?;
    let slices: Vec<&[u8]> = inputs.iter().map(|bytes| &**bytes).collect();
    let array = out.cast::<PyArrayDyn<u8>>().map_err(|_| PyTypeError::new_err("out must be uint8"))?;
    let mut writable = array.try_readwrite().map_err(|error| PyValueError::new_err(format!("out is not writable: {error}")))?;
    let slice = writable.as_slice_mut().map_err(|error| PyValueError::new_err(error.to_string()))?;
    let spec = &transform.spec;
    let slot_len = spec.slot_len().expect("checked in new");
    let errors = py.detach(|| decode_video_batch(&slices, &seeds, spec, slice, slot_len, threads, policy(compact)));
    Ok(errors.into_iter().map(|error| error.map(|error| error.to_string())).collect())
}
