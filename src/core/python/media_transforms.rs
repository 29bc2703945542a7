//! Python classes `AudioTransform` and `VideoTransform`: what to make of each audio or video
//! sample, checked when built. They hold no FFmpeg: decoding is the media part's
//! (`stoker._media`), loaded on first use, which rebuilds the same spec from the keyword
//! arguments `__getnewargs_ex__` gives (the same ones pickling uses).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::media::frame_geometry::Resize;
use crate::media::spec::{audio_spec, placement_name, video_spec, AudioOptions, AudioSpec, Channels, VideoOptions, VideoSpec};
use crate::media::window::ClipStep;
use crate::panic_guard::guard;

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
        guard("AudioTransform()", None, || {
            let options = AudioOptions { sample_rate, samples, channels, select_channel, window, dtype };
            let (spec, int16) = audio_spec(&options).map_err(PyValueError::new_err)?;
            Ok(AudioTransform { spec, int16 })
        })
    }

    /// Each sample's shape: (channels, samples).
    #[getter]
    fn output_shape(&self) -> PyResult<(usize, usize)> {
        guard("AudioTransform.output_shape", None, || Ok((self.spec.output_channels(), self.spec.length)))
    }

    #[getter]
    fn sample_rate(&self) -> PyResult<u32> {
        guard("AudioTransform.sample_rate", None, || Ok(self.spec.sample_rate))
    }

    /// "float32" or "int16".
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        guard("AudioTransform.dtype", None, || Ok(self.dtype_name()))
    }

    fn __repr__(&self) -> PyResult<String> {
        guard("AudioTransform.__repr__", None, || Ok(format!("AudioTransform({:?}, dtype={})", self.spec, self.dtype_name())))
    }

    /// The keyword arguments that make this transform again (pickling, and the media part).
    fn __getnewargs_ex__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        guard("AudioTransform.__getnewargs_ex__", None, || {
            let options = PyDict::new(py);
            options.set_item("sample_rate", self.spec.sample_rate)?;
            options.set_item("samples", self.spec.length)?;
            match self.spec.channels {
                Channels::Mix(count) => options.set_item("channels", count)?,
                Channels::Select(channel) => options.set_item("select_channel", channel)?,
            }
            options.set_item("window", placement_name(self.spec.placement))?;
            options.set_item("dtype", self.dtype_name())?;
            Ok((PyTuple::empty(py), options))
        })
    }
}

impl AudioTransform {
    fn dtype_name(&self) -> &'static str {
        if self.int16 {
            "int16"
        } else {
            "float32"
        }
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
        cover=None, cover_crop="center", flip_probability=0.0, layout="TCHW"
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
        cover: Option<(usize, usize)>,
        cover_crop: &str,
        flip_probability: f64,
        layout: &str,
    ) -> PyResult<Self> {
        guard("VideoTransform()", None, || {
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
            Ok(VideoTransform { spec: video_spec(&options).map_err(PyValueError::new_err)? })
        })
    }

    /// Each clip's shape, in the layout's order.
    #[getter]
    fn output_shape(&self) -> PyResult<(usize, usize, usize, usize)> {
        guard("VideoTransform.output_shape", None, || Ok(self.spec.output_shape()))
    }

    /// Always "uint8".
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        guard("VideoTransform.dtype", None, || Ok("uint8"))
    }

    fn __repr__(&self) -> PyResult<String> {
        guard("VideoTransform.__repr__", None, || Ok(format!("VideoTransform({:?})", self.spec)))
    }

    /// The keyword arguments that make this transform again (pickling, and the media part).
    fn __getnewargs_ex__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        guard("VideoTransform.__getnewargs_ex__", None, || {
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
                Resize::Cover(width, height) => {
                    options.set_item("cover", (height, width))?;
                    options.set_item("cover_crop", if spec.geometry.random_crop { "random" } else { "center" })?;
                }
            }
            if let (Some((width, height)), false) = (spec.geometry.crop, matches!(spec.geometry.resize, Resize::Cover(..))) {
                options.set_item(if spec.geometry.random_crop { "random_crop" } else { "center_crop" }, (height, width))?;
            }
            options.set_item("flip_probability", spec.geometry.flip_probability)?;
            options.set_item("layout", spec.layout.name())?;
            Ok((PyTuple::empty(py), options))
        })
    }
}
