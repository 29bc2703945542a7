//! Why one image could not be decoded or transformed. Each variant becomes a per-sample error in a
//! batch, and a `ValueError` naming the sample when raised to Python.

use std::fmt;

use crate::panic_guard::Panicked;

/// A per-image failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageError {
    /// Zero bytes.
    Empty,
    /// Not a JPEG, PNG or WebP signature.
    UnknownFormat,
    /// The codec rejected the data (truncated, corrupt, unsupported variant).
    Corrupt { format: &'static str, detail: String },
    /// Dimensions beyond what we decode (guards memory): the image's and the limit in force.
    TooLarge { width: u64, height: u64, limit: u64 },
    /// The transform cannot apply to this image (e.g. zero-sized output).
    Transform(String),
    /// The native code panicked on this image (a bug, caught: see `panic_guard`).
    Panicked(String),
}

impl From<Panicked> for ImageError {
    fn from(panic: Panicked) -> Self {
        ImageError::Panicked(panic.0)
    }
}

impl fmt::Display for ImageError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageError::Empty => write!(formatter, "empty input (0 bytes)"),
            ImageError::UnknownFormat => write!(formatter, "not a JPEG, PNG or WebP image (unknown signature)"),
            ImageError::Corrupt { format, detail } => write!(formatter, "corrupt {format}: {detail}"),
            ImageError::TooLarge { width, height, limit } => write!(
                formatter,
                "image of {width}x{height} = {} pixels is over the limit of {limit} pixels (a decompression bomb, or \
                 raise ImageTransform(max_pixels=...))",
                width * height
            ),
            ImageError::Transform(detail) => write!(formatter, "cannot transform: {detail}"),
            ImageError::Panicked(message) => write!(formatter, "{}", Panicked::describe(message)),
        }
    }
}

impl std::error::Error for ImageError {}

/// Largest image we ever decode: 2^28 pixels (16384 x 16384), 768 MiB as RGB.
pub const MAX_PIXELS: u64 = 1 << 28;

/// The default limit, Pillow's `Image.MAX_IMAGE_PIXELS` (1024 * 1024 * 1024 // 4 // 3): about
/// 89.5 M pixels, 256 MiB as RGB.
pub const DEFAULT_MAX_PIXELS: u64 = 89_478_485;

pub type ImageResult<T> = Result<T, ImageError>;
