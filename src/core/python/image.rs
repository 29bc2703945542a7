//! Python bindings of the image path: `ImageTransform`, `decode_image`, `decode_batch_into`,
//! `image_sizes`.
//! Arguments are checked here; the work runs with the GIL released.

use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBool, PyDict, PyString, PyTuple};

use half::f16;

use crate::image::batch::{self, BatchBuffer, BatchLayout, FailurePolicy};
use crate::image::decode;
use crate::image::error::DEFAULT_MAX_PIXELS;
use crate::image::geometry::{Crop, TransformSpec};
use crate::image::output::{Layout, OutputSpec, Slot};
use crate::image::transform;
use crate::panic_guard::guard;

/// Output element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DType {
    U8,
    F32,
    F16,
}

impl DType {
    fn name(self) -> &'static str {
        match self {
            DType::U8 => "uint8",
            DType::F32 => "float32",
            DType::F16 => "float16",
        }
    }
}

/// What to do to every image: resize, crop, flip, and how to store the result.
#[pyclass(frozen, module = "stoker._native")]
pub struct ImageTransform {
    spec: TransformSpec,
    output: OutputSpec,
    dtype: DType,
}

fn pair(value: Option<(usize, usize)>) -> Option<(usize, usize)> {
    // Python passes (height, width); inside we use (width, height).
    value.map(|(height, width)| (width, height))
}

/// A size as torchvision's crops take it: an int for a square, or (height, width), or [size].
/// `resize` takes (height, width) only: torchvision's `Resize(int)` means the shorter side.
fn size(name: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<(usize, usize)>> {
    let Some(value) = value else { return Ok(None) };
    if value.is_none() {
        return Ok(None);
    }
    let wrong = || {
        PyTypeError::new_err(format!(
            "{name} must be an int (a square) or (height, width) of positive ints, got {}",
            value.repr().map(|text| text.to_string()).unwrap_or_else(|_| "?".into())
        ))
    };
    if value.is_instance_of::<PyBool>() {
        return Err(wrong());
    }
    if let Ok(side) = value.extract::<usize>() {
        if name == "resize" {
            return Err(PyTypeError::new_err(format!(
                "resize takes (height, width); for torchvision's Resize({side}) (the shorter side to {side}) use resize_shorter={side}"
            )));
        }
        return Ok(Some((side, side)));
    }
    if value.is_instance_of::<PyString>() {
        return Err(wrong());
    }
    let Ok(sides) = value.extract::<Vec<usize>>() else { return Err(wrong()) };
    match sides.as_slice() {
        [side] if name != "resize" => Ok(Some((*side, *side))),
        [height, width] => Ok(Some((*height, *width))),
        _ => Err(wrong()),
    }
}

#[pymethods]
impl ImageTransform {
    #[new]
    #[pyo3(signature = (
        *, resize_shorter=None, resize=None, center_crop=None, random_resized_crop=None, cover=None, cover_crop="center",
        scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), flip_probability=0.0, grayscale=false,
        dct_scaling=true, layout="HWC", dtype="uint8", mean=None, std=None, max_pixels=DEFAULT_MAX_PIXELS
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        resize_shorter: Option<usize>,
        resize: Option<&Bound<'_, PyAny>>,
        center_crop: Option<&Bound<'_, PyAny>>,
        random_resized_crop: Option<&Bound<'_, PyAny>>,
        cover: Option<&Bound<'_, PyAny>>,
        cover_crop: &str,
        scale: (f64, f64),
        ratio: (f64, f64),
        flip_probability: f64,
        grayscale: bool,
        dct_scaling: bool,
        layout: &str,
        dtype: &str,
        mean: Option<Vec<f32>>,
        std: Option<Vec<f32>>,
        max_pixels: u64,
    ) -> PyResult<Self> {
        guard("ImageTransform()", None, || {
            let resize = size("resize", resize)?;
            let center_crop = size("center_crop", center_crop)?;
            let random_resized_crop = size("random_resized_crop", random_resized_crop)?;
            let cover = size("cover", cover)?;
            let random = match cover_crop {
                "center" => false,
                "random" => true,
                other => return Err(PyValueError::new_err(format!("cover_crop must be \"center\" or \"random\", got {other:?}"))),
            };
            let crop = match (pair(center_crop), pair(random_resized_crop), pair(cover)) {
                (Some((width, height)), None, None) => Crop::Center { width, height },
                (None, Some((width, height)), None) => Crop::RandomResized { width, height, scale, ratio },
                (None, None, Some((width, height))) => Crop::Cover { width, height, random },
                (None, None, None) => Crop::None,
                _ => return Err(PyValueError::new_err("center_crop, random_resized_crop and cover are exclusive")),
            };
            let spec =
                TransformSpec { resize_shorter, resize: pair(resize), crop, flip_probability, gray: grayscale, dct_scaling, max_pixels };
            spec.validate().map_err(|error| PyValueError::new_err(error.to_string()))?;
            let layout = match layout {
                "HWC" => Layout::Hwc,
                "CHW" => Layout::Chw,
                other => return Err(PyValueError::new_err(format!("layout must be \"HWC\" or \"CHW\", got {other:?}"))),
            };
            let dtype = match dtype {
                "uint8" => DType::U8,
                "float32" => DType::F32,
                "float16" => DType::F16,
                other => return Err(PyValueError::new_err(format!("dtype must be \"uint8\", \"float32\" or \"float16\", got {other:?}"))),
            };
            let channels = if grayscale { 1 } else { 3 };
            let per_channel = |name: &str, values: Option<Vec<f32>>, default: f32| -> PyResult<[f32; 3]> {
                let Some(values) = values else { return Ok([default; 3]) };
                if dtype == DType::U8 {
                    return Err(PyValueError::new_err(format!("{name} applies to float outputs; dtype is uint8")));
                }
                match values.len() {
                    1 => Ok([values[0]; 3]),
                    n if n == channels => Ok([values[0], values[n.min(2) - 1], values[n - 1]]),
                    n => Err(PyValueError::new_err(format!("{name} has {n} values for {channels} channel(s)"))),
                }
            };
            let mean = per_channel("mean", mean, 0.0)?;
            let std = per_channel("std", std, 1.0)?;
            if std.iter().any(|&value| value == 0.0 || !value.is_finite()) {
                return Err(PyValueError::new_err(format!("std must be finite and non-zero, got {std:?}")));
            }
            Ok(ImageTransform { spec, output: OutputSpec { layout, mean, std }, dtype })
        })
    }

    /// The largest image (width x height) this transform decodes.
    #[getter]
    fn max_pixels(&self) -> PyResult<u64> {
        guard("ImageTransform.max_pixels", None, || Ok(self.spec.max_pixels))
    }

    /// The (height, width) every output has, or None when it depends on the image.
    #[getter]
    fn output_size(&self) -> PyResult<Option<(usize, usize)>> {
        guard("ImageTransform.output_size", None, || Ok(self.spec.fixed_output_size().map(|(width, height)| (height, width))))
    }

    /// Number of channels in the output (1 for grayscale, else 3).
    #[getter]
    fn channels(&self) -> PyResult<usize> {
        guard("ImageTransform.channels", None, || Ok(self.channel_count()))
    }

    /// "uint8", "float32" or "float16".
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        guard("ImageTransform.dtype", None, || Ok(self.dtype.name()))
    }

    /// "HWC" or "CHW".
    #[getter]
    fn layout(&self) -> PyResult<&'static str> {
        guard("ImageTransform.layout", None, || Ok(self.layout_name()))
    }

    fn __repr__(&self) -> PyResult<String> {
        guard("ImageTransform.__repr__", None, || {
            Ok(format!("ImageTransform({:?}, {:?}, dtype={})", self.spec, self.output, self.dtype.name()))
        })
    }

    /// The keyword arguments that make this transform again: what pickle calls `__new__` with,
    /// so a transform travels to other processes (Ray tasks, DataLoader workers).
    fn __getnewargs_ex__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        guard("ImageTransform.__getnewargs_ex__", None, || {
            let options = PyDict::new(py);
            let spec = &self.spec;
            options.set_item("resize_shorter", spec.resize_shorter)?;
            options.set_item("resize", spec.resize.map(|(width, height)| (height, width)))?;
            match spec.crop {
                Crop::None => {}
                Crop::Center { width, height } => options.set_item("center_crop", (height, width))?,
                Crop::RandomResized { width, height, scale, ratio } => {
                    options.set_item("random_resized_crop", (height, width))?;
                    options.set_item("scale", scale)?;
                    options.set_item("ratio", ratio)?;
                }
                Crop::Cover { width, height, random } => {
                    options.set_item("cover", (height, width))?;
                    options.set_item("cover_crop", if random { "random" } else { "center" })?;
                }
            }
            options.set_item("flip_probability", spec.flip_probability)?;
            options.set_item("grayscale", spec.gray)?;
            options.set_item("dct_scaling", spec.dct_scaling)?;
            options.set_item("max_pixels", spec.max_pixels)?;
            options.set_item("layout", self.layout_name())?;
            options.set_item("dtype", self.dtype.name())?;
            if self.dtype != DType::U8 {
                // Stored per RGB channel; grayscale takes one value.
                let channels = self.channel_count();
                options.set_item("mean", self.output.mean[..channels].to_vec())?;
                options.set_item("std", self.output.std[..channels].to_vec())?;
            }
            Ok((PyTuple::empty(py), options))
        })
    }
}

impl ImageTransform {
    fn channel_count(&self) -> usize {
        if self.spec.gray {
            1
        } else {
            3
        }
    }

    fn layout_name(&self) -> &'static str {
        match self.output.layout {
            Layout::Hwc => "HWC",
            Layout::Chw => "CHW",
        }
    }

    fn shape(&self, width: usize, height: usize) -> Vec<usize> {
        let channels = self.channel_count();
        match self.output.layout {
            Layout::Hwc => vec![height, width, channels],
            Layout::Chw => vec![channels, height, width],
        }
    }
}

/// Decode and transform one image into a new numpy array.
#[pyfunction]
#[pyo3(signature = (data, transform, seed=0))]
pub fn decode_image<'py>(
    py: Python<'py>,
    data: PyBackedBytes,
    transform: &ImageTransform,
    seed: u64,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    guard("decode_image", None, || {
        let bytes: &[u8] = &data;
        let (width, height, _) = py
            .detach(|| transform::output_shape(bytes, &transform.spec, seed))
            .map_err(|error| PyValueError::new_err(error.to_string()))?;
        let shape = transform.shape(width, height);
        macro_rules! fill {
            ($type:ty, $variant:ident) => {{
                let array = PyArrayDyn::<$type>::zeros(py, shape, false);
                {
                    let mut writable = array.readwrite();
                    let slice = writable.as_slice_mut().map_err(|error| PyValueError::new_err(error.to_string()))?;
                    py.detach(|| {
                        transform::transform_into(bytes, &transform.spec, &transform.output, seed, None, &mut Slot::$variant(slice))
                    })
                    .map_err(|error| PyValueError::new_err(error.to_string()))?;
                }
                array.into_any().cast_into::<PyUntypedArray>().map_err(PyErr::from)
            }};
        }
        match transform.dtype {
            DType::U8 => fill!(u8, U8),
            DType::F32 => fill!(f32, F32),
            DType::F16 => fill!(f16, F16),
        }
    })
}

/// Decode `inputs` into `out` (shape (N, ...) with N >= len(inputs)), sample i into out[i].
///
/// Returns one entry per input: None, or the error message. With `compact`, successful samples
/// are moved to the front, in order.
#[pyfunction]
#[pyo3(signature = (inputs, transform, out, seeds, compact=false, threads=1))]
pub fn decode_batch_into(
    py: Python<'_>,
    inputs: Vec<PyBackedBytes>,
    transform: &ImageTransform,
    out: &Bound<'_, PyUntypedArray>,
    seeds: Vec<u64>,
    compact: bool,
    threads: usize,
) -> PyResult<Vec<Option<String>>> {
    guard("decode_batch_into", None, || {
        let Some((width, height)) = transform.spec.fixed_output_size() else {
            return Err(PyValueError::new_err("a batch needs one output size: give the transform a crop or an exact resize"));
        };
        if seeds.len() != inputs.len() {
            return Err(PyValueError::new_err(format!("{} seeds for {} inputs", seeds.len(), inputs.len())));
        }
        if threads == 0 {
            return Err(PyValueError::new_err("threads must be at least 1"));
        }
        let sample_shape = transform.shape(width, height);
        let shape = out.shape();
        if shape.len() != 4 || shape[1..] != sample_shape[..] || shape[0] < inputs.len() {
            return Err(PyValueError::new_err(format!(
                "out has shape {shape:?}; {} samples need (>= {}, {}, {}, {}) ({} layout)",
                inputs.len(),
                inputs.len(),
                sample_shape[0],
                sample_shape[1],
                sample_shape[2],
                transform.layout_name()
            )));
        }
        if !out.is_c_contiguous() {
            return Err(PyValueError::new_err("out must be C-contiguous"));
        }
        let dtype_name = out.dtype().str()?.to_string();
        let sample_len: usize = sample_shape.iter().product();
        let slices: Vec<&[u8]> = inputs.iter().map(|bytes| &**bytes).collect();
        let policy = if compact { FailurePolicy::Compact } else { FailurePolicy::ZeroFill };
        let wrong_dtype = || PyTypeError::new_err(format!("out has dtype {dtype_name}; the transform writes {}", transform.dtype.name()));
        macro_rules! run {
            ($type:ty, $variant:ident) => {{
                let array = out.cast::<PyArrayDyn<$type>>().map_err(|_| wrong_dtype())?;
                let mut writable = array.try_readwrite().map_err(|error| PyValueError::new_err(format!("out is not writable: {error}")))?;
                let slice = writable.as_slice_mut().map_err(|error| PyValueError::new_err(error.to_string()))?;
                py.detach(|| {
                    batch::decode_batch(
                        &slices,
                        &seeds,
                        &transform.spec,
                        &transform.output,
                        BatchBuffer::$variant(slice),
                        BatchLayout { sample_len, size: (width, height), policy, threads },
                    )
                })
            }};
        }
        let errors = match transform.dtype {
            DType::U8 => run!(u8, U8),
            DType::F32 => run!(f32, F32),
            DType::F16 => run!(f16, F16),
        };
        Ok(errors.into_iter().map(|error| error.map(|error| error.to_string())).collect())
    })
}

/// Each image's upright `(width, height)` from its header alone (JPEG with its EXIF orientation,
/// PNG, WebP), pixels left undecoded: what bucketing by aspect ratio needs of every sample.
///
/// Returns the widths and heights as int64 arrays, and per input None or the reason its header
/// could not be read (its size is then 0 x 0). A header declaring more than `max_pixels` is such
/// a reason: nothing is allocated from a size read in a header.
#[pyfunction]
#[pyo3(signature = (inputs, max_pixels=DEFAULT_MAX_PIXELS))]
#[allow(clippy::type_complexity)]
pub fn image_sizes<'py>(
    py: Python<'py>,
    inputs: Vec<PyBackedBytes>,
    max_pixels: u64,
) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>, Vec<Option<String>>)> {
    guard("image_sizes", None, || {
        let slices: Vec<&[u8]> = inputs.iter().map(|bytes| &**bytes).collect();
        let headers: Vec<Result<(usize, usize), String>> = py.detach(|| {
            slices
                .iter()
                .map(|data| {
                    decode::read_header(data, max_pixels).map(|header| (header.width, header.height)).map_err(|error| error.to_string())
                })
                .collect()
        });
        let mut widths = Vec::with_capacity(headers.len());
        let mut heights = Vec::with_capacity(headers.len());
        let mut errors = Vec::with_capacity(headers.len());
        for header in headers {
            let ((width, height), error) = match header {
                Ok(size) => (size, None),
                Err(error) => ((0, 0), Some(error)),
            };
            widths.push(width as i64);
            heights.push(height as i64);
            errors.push(error);
        }
        Ok((PyArray1::from_vec(py, widths), PyArray1::from_vec(py, heights), errors))
    })
}

/// Encode an (height, width, 3) uint8 RGB array as a JPEG at `quality` (Pillow's defaults).
#[pyfunction]
#[pyo3(signature = (pixels, quality=90))]
pub fn encode_jpeg<'py>(py: Python<'py>, pixels: &Bound<'py, PyUntypedArray>, quality: u8) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    guard("encode_jpeg", None, || {
        let shape = pixels.shape().to_vec();
        if shape.len() != 3 || shape[2] != 3 {
            return Err(PyValueError::new_err(format!("pixels must be (height, width, 3), got {shape:?}")));
        }
        let array = pixels.cast::<PyArrayDyn<u8>>().map_err(|_| PyTypeError::new_err("pixels must be uint8"))?;
        let readonly = array.try_readonly().map_err(|error| PyValueError::new_err(error.to_string()))?;
        let data = readonly.as_slice().map_err(|_| PyValueError::new_err("pixels must be C-contiguous"))?;
        let encoded =
            py.detach(|| crate::image::jpeg_encode::encode_rgb(data, shape[1], shape[0], quality)).map_err(PyValueError::new_err)?;
        Ok(pyo3::types::PyBytes::new(py, &encoded))
    })
}
