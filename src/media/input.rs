//! A container opened over a sample's bytes, and the decoder of its best stream of one kind.

use std::io::Cursor;
use std::sync::Once;

use ffmpeg_next::codec;
use ffmpeg_next::format::context::{Input, StreamIo};
use ffmpeg_next::media::Type;
use ffmpeg_next::Rational;

use super::error::{MediaError, MediaResult};

/// FFmpeg's one-time set-up. Its own log stays quiet: every failure reaches the caller as a
/// per-sample error naming the sample, so FFmpeg's lines on stderr would only say it twice,
/// without the name.
fn initialize() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let _ = ffmpeg_next::init();
        ffmpeg_next::util::log::set_level(ffmpeg_next::util::log::Level::Quiet);
    });
}

/// A container opened over `bytes` (copied once: FFmpeg's reader owns what it reads from, and the
/// copy costs microseconds against milliseconds of decoding).
pub fn open(bytes: &[u8]) -> MediaResult<Input> {
    if bytes.is_empty() {
        return Err(MediaError::Empty);
    }
    initialize();
    let io = StreamIo::from_read_seek(Cursor::new(bytes.to_vec())).map_err(|error| MediaError::Open(error.to_string()))?;
    ffmpeg_next::format::input_from_stream(io, None, None).map_err(|error| MediaError::Open(error.to_string()))
}

/// The best stream of `kind` in `input`: its index, time base, and an opened decoder context.
pub struct StreamDecoder {
    pub index: usize,
    pub time_base: Rational,
    pub context: codec::context::Context,
}

/// Find the best stream of `kind` ("audio" or "video" in errors) and make its decoder context.
pub fn best_stream(input: &Input, kind: Type) -> MediaResult<StreamDecoder> {
    let name = if kind == Type::Audio { "audio" } else { "video" };
    let stream = input.streams().best(kind).ok_or(MediaError::NoStream(name))?;
    let parameters = stream.parameters();
    let codec_id = parameters.id();
    if ffmpeg_next::decoder::find(codec_id).is_none() {
        return Err(MediaError::UnsupportedCodec(format!("no {name} decoder for {codec_id:?} in this FFmpeg build")));
    }
    let context = codec::context::Context::from_parameters(parameters)
        .map_err(|error| MediaError::UnsupportedCodec(format!("{codec_id:?}: {error}")))?;
    Ok(StreamDecoder { index: stream.index(), time_base: stream.time_base(), context })
}

impl StreamDecoder {
    /// The decoder, told the stream's time base: decoders that trim encoder delay (MP3's LAME
    /// header, Opus pre-skip, AAC priming) move the first frame's timestamp by what they trimmed
    /// only when they know it, and would otherwise shift the whole file by that much.
    pub fn decoder(self) -> ffmpeg_next::decoder::Decoder {
        let mut decoder = self.context.decoder();
        decoder.set_packet_time_base(self.time_base);
        decoder
    }
}

/// A time in a stream's time base, in seconds.
pub fn seconds(timestamp: i64, time_base: Rational) -> f64 {
    timestamp as f64 * f64::from(time_base.numerator()) / f64::from(time_base.denominator().max(1))
}

/// Seek the container back to its start (after a seek that went too far).
pub fn seek_to_start(input: &mut Input) {
    let _ = input.seek(i64::MIN + 1, ..0);
}

/// Seek the container to the last keyframe at or before `seconds` (no-op at the start). A failed
/// seek leaves the reader where it was, at the start: slower, never wrong.
pub fn seek_before(input: &mut Input, seconds: f64) {
    if seconds <= 0.0 {
        return;
    }
    let timestamp = (seconds * f64::from(ffmpeg_next::ffi::AV_TIME_BASE)) as i64;
    let _ = input.seek(timestamp, ..timestamp);
}
