//! What a file's headers say of its length, read without decoding a frame: an audio stream's
//! duration, a video stream's frame rate, frame count and frame size. Buckets by length
//! (`stoker.sampling.LengthBuckets`) sort a dataset with these before its first epoch; the
//! decoders use the same reading to place their windows and clips.

use ffmpeg_next::format::context::Input;
use ffmpeg_next::media::Type;

use super::error::{MediaError, MediaResult};
use super::input::{self, seconds};

/// The values `probe` writes per file, in this order.
pub const PROBE_FIELDS: usize = 5;

/// A stream's start time and its declared duration in seconds (the container's when the stream
/// has none), or None when neither says.
pub fn declared_span(container: &Input, index: usize) -> (f64, Option<f64>) {
    let Some(stream) = container.stream(index) else { return (0.0, None) };
    let start =
        if stream.start_time() == ffmpeg_next::ffi::AV_NOPTS_VALUE { 0.0 } else { seconds(stream.start_time(), stream.time_base()) };
    if stream.duration() > 0 {
        return (start, Some(seconds(stream.duration(), stream.time_base())));
    }
    let duration = container.duration();
    (start, (duration > 0).then(|| duration as f64 / f64::from(ffmpeg_next::ffi::AV_TIME_BASE)))
}

/// A video stream's frame rate, frame count and start time, from the container's header.
pub struct VideoFacts {
    pub rate: f64,
    pub frames: usize,
    pub start: f64,
}

/// The facts of video stream `index`: its average (else nominal) frame rate, its declared frame
/// count (else its duration times the rate), and its start.
pub fn video_facts(container: &Input, index: usize) -> MediaResult<VideoFacts> {
    let header = container.stream(index).ok_or(MediaError::NoStream("video"))?;
    let rate = [header.avg_frame_rate(), header.rate()].into_iter().map(f64::from).find(|rate| rate.is_finite() && *rate > 0.0);
    let Some(rate) = rate else { return Err(MediaError::Corrupt("the video stream declares no frame rate".into())) };
    let (start, duration) = declared_span(container, index);
    let frames = if header.frames() > 0 { header.frames() as usize } else { (duration.unwrap_or(0.0) * rate).round() as usize };
    Ok(VideoFacts { rate, frames, start })
}

/// Probe one file's best stream of `kind` into `out` (`PROBE_FIELDS` values): duration in
/// seconds, frame count (video; 0 for audio), frame rate or sample rate, width, height (0 for
/// audio).
///
/// Errors: the file cannot be opened, has no such stream, or declares no length.
pub fn probe(bytes: &[u8], kind: Type, out: &mut [f64]) -> MediaResult<()> {
    super::riff::check(bytes)?;
    if kind == Type::Audio {
        // A WAV cut short reads as a shorter, valid file to FFmpeg; its header says otherwise.
        super::riff::check_wav_length(bytes)?;
    }
    let container = input::open(bytes)?;
    let stream = input::best_stream(&container, kind)?;
    let parameters = container.stream(stream.index).ok_or(MediaError::NoStream("audio"))?.parameters();
    // SAFETY: `parameters` wraps the stream's valid AVCodecParameters, alive with `container`;
    // plain fields are read.
    let (width, height, sample_rate) = unsafe {
        let raw = &*parameters.as_ptr();
        (f64::from(raw.width.max(0)), f64::from(raw.height.max(0)), f64::from(raw.sample_rate.max(0)))
    };
    let values = if kind == Type::Video {
        let facts = video_facts(&container, stream.index)?;
        if facts.frames == 0 {
            return Err(MediaError::Corrupt("the video declares neither a frame count nor a duration".into()));
        }
        [facts.frames as f64 / facts.rate, facts.frames as f64, facts.rate, width, height]
    } else {
        let Some(duration) = declared_span(&container, stream.index).1 else {
            return Err(MediaError::Corrupt("the audio declares no duration".into()));
        };
        [duration, 0.0, sample_rate, 0.0, 0.0]
    };
    out[..PROBE_FIELDS].copy_from_slice(&values);
    Ok(())
}
