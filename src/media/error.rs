//! Why one audio or video sample could not be decoded. Each variant becomes a per-sample error in
//! a batch, and a `ValueError` naming the sample when raised to Python.

use std::fmt;

use stoker_native::panic_guard::Panicked;

/// A per-sample media failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaError {
    /// Zero bytes.
    Empty,
    /// The container could not be opened (not a media file, or its header is cut off).
    Open(String),
    /// The file holds no stream of the kind asked for ("audio" or "video").
    NoStream(&'static str),
    /// No decoder for the stream's codec in this FFmpeg build.
    UnsupportedCodec(String),
    /// The decoder rejected the data, or the data ends before what the file declares.
    Corrupt(String),
    /// The clip asked for is longer than the video.
    TooShort(String),
    /// The transform cannot apply to this sample (e.g. a channel it does not have).
    Transform(String),
    /// The native code panicked on this sample (a bug, caught: see `stoker_native::panic_guard`).
    Panicked(String),
}

impl From<Panicked> for MediaError {
    fn from(panic: Panicked) -> Self {
        MediaError::Panicked(panic.0)
    }
}

impl fmt::Display for MediaError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MediaError::Empty => write!(formatter, "empty input (0 bytes)"),
            MediaError::Open(detail) => write!(formatter, "not a readable audio or video file: {detail}"),
            MediaError::NoStream(kind) => write!(formatter, "the file has no {kind} stream"),
            MediaError::UnsupportedCodec(detail) => write!(formatter, "unsupported codec: {detail}"),
            MediaError::Corrupt(detail) => write!(formatter, "corrupt or truncated: {detail}"),
            MediaError::TooShort(detail) => write!(formatter, "too short: {detail}"),
            MediaError::Transform(detail) => write!(formatter, "cannot transform: {detail}"),
            MediaError::Panicked(message) => write!(formatter, "{}", Panicked::describe(message)),
        }
    }
}

impl std::error::Error for MediaError {}

pub type MediaResult<T> = Result<T, MediaError>;

/// An FFmpeg error as `Corrupt`, saying what was being done.
pub fn corrupt(doing: &str, error: ffmpeg_next::Error) -> MediaError {
    MediaError::Corrupt(format!("{doing}: {error}"))
}
