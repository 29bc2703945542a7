//! One audio sample: decode what its window needs, resample, mix or select channels, and write
//! the window, cropped or zero-padded, into its slot as (channels, samples).
//!
//! The window's place comes from the declared duration, so decoding starts with a seek to a
//! little before it (MP3's bit reservoir and AAC's overlap need a few frames of run-in, which are
//! decoded and dropped) and stops once it is covered. A file whose data ends before what its
//! header declares is an error, never a silently zero-padded window.

use std::cell::Cell;

use ffmpeg_next::codec::Id;
use ffmpeg_next::media::Type;
use ffmpeg_next::{frame, Packet};

use super::error::{MediaError, MediaResult};
use super::input::{self, seconds};
use super::probe::declared_span;
use super::resample::Resampler;
pub use stoker_native::media::spec::{AudioSpec, Channels};
use stoker_native::media::window::window_start;

/// Seconds decoded before the window and thrown away, for codecs whose frames depend on the ones
/// before (MP3's bit reservoir, AAC's and Vorbis's overlapped transforms, Opus's 80 ms pre-roll).
const RUN_IN_SECONDS: f64 = 0.1;

/// The run-in for codecs whose frames decode on their own: the resampler's filter still wants
/// about a millisecond of input before the window's first sample.
const FILTER_HISTORY_SECONDS: f64 = 0.01;

/// Codecs whose every frame decodes on its own: only the filter's history as run-in.
fn needs_run_in(codec: Id) -> bool {
    !matches!(
        codec,
        Id::FLAC
            | Id::ALAC
            | Id::WAVPACK
            | Id::PCM_S16LE
            | Id::PCM_S16BE
            | Id::PCM_S24LE
            | Id::PCM_S32LE
            | Id::PCM_U8
            | Id::PCM_F32LE
            | Id::PCM_F64LE
            | Id::PCM_ALAW
            | Id::PCM_MULAW
    )
}
/// How much shorter than declared the decoded audio may be before we call the file truncated:
/// headers round, and MP3 encoder delay and padding shift the end by a few milliseconds.
const DURATION_TOLERANCE_SECONDS: f64 = 0.2;

/// A batch slot of the output dtype.
pub enum AudioSlot<'a> {
    F32(&'a mut [f32]),
    I16(&'a mut [i16]),
}

thread_local! {
    /// The decoded samples of this thread's last window, kept for its next: a window's worth of
    /// fresh memory a sample would otherwise be paged in (and grown by copying) every time.
    static DECODED: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Decode `bytes` and write its window into `slot` (channels x length values, planar).
pub fn decode_window_into(bytes: &[u8], spec: &AudioSpec, seed: u64, slot: AudioSlot<'_>) -> MediaResult<()> {
    let (samples, offset) = decode_window(bytes, spec, seed, DECODED.take())?;
    write_window(&samples, offset, spec, slot);
    DECODED.set(samples);
    Ok(())
}

/// Write the window of `interleaved` that starts at `offset` into `slot`, zero outside it.
fn write_window(interleaved: &[f32], offset: i64, spec: &AudioSpec, slot: AudioSlot<'_>) {
    let channels = spec.output_channels();
    let available = (interleaved.len() / channels) as i64;
    let value = |channel: usize, index: usize| -> f32 {
        let source = offset + index as i64;
        if (0..available).contains(&source) {
            interleaved[source as usize * channels + channel]
        } else {
            0.0
        }
    };
    match slot {
        AudioSlot::F32(slot) => {
            for (channel, plane) in slot.chunks_exact_mut(spec.length).enumerate() {
                plane.iter_mut().enumerate().for_each(|(index, out)| *out = value(channel, index));
            }
        }
        AudioSlot::I16(slot) => {
            for (channel, plane) in slot.chunks_exact_mut(spec.length).enumerate() {
                plane
                    .iter_mut()
                    .enumerate()
                    .for_each(|(index, out)| *out = (value(channel, index) * 32767.0).round().clamp(-32768.0, 32767.0) as i16);
            }
        }
    }
}

/// The decoded, resampled audio around the window (interleaved) and where the window starts in it
/// (may be negative or run past the end: those samples are zero padding).
///
/// `samples` is the buffer to decode into (emptied first), returned as the decoded samples.
fn decode_window(bytes: &[u8], spec: &AudioSpec, seed: u64, mut samples: Vec<f32>) -> MediaResult<(Vec<f32>, i64)> {
    super::riff::check_wav_length(bytes)?;
    super::riff::check(bytes)?;
    let mut container = input::open(bytes)?;
    let stream = input::best_stream(&container, Type::Audio)?;
    let (index, time_base) = (stream.index, stream.time_base);
    let run_in = if needs_run_in(stream.codec) { RUN_IN_SECONDS } else { FILTER_HISTORY_SECONDS };
    let mut decoder = stream.decoder().audio().map_err(|error| MediaError::UnsupportedCodec(error.to_string()))?;
    let rate = f64::from(spec.sample_rate);
    let (stream_start, declared) = declared_span(&container, index);
    let length = spec.length as u64;
    let planned = declared.map(|duration| window_start((duration * rate) as u64, length, spec.placement, seed));
    if let Some(start) = planned {
        input::seek_before(&mut container, stream_start + start as f64 / rate - run_in);
    }
    let goal = planned.map(|start| (start + length) as i64);

    samples.clear();
    let mut decoded = Decoded { resampler: None, samples, first: None, channels: spec.output_channels() };
    let mut frame = frame::Audio::empty();
    let mut packet = Packet::empty();
    let mut problem: Option<String> = None;
    let covered = |decoded: &Decoded| goal.is_some_and(|goal| decoded.end() >= goal);
    loop {
        match input::next_packet(&mut container, &mut packet) {
            Ok(()) => {}
            Err(ffmpeg_next::Error::Eof) => break,
            Err(error) => {
                problem = Some(format!("reading the file: {error}"));
                break;
            }
        }
        if packet.stream() != index {
            continue;
        }
        // A packet the decoder rejects before the window (run-in after a seek) costs nothing;
        // one inside it is the sample's error.
        if let Err(error) = decoder.send_packet(&packet) {
            if decoded.first.is_some() && planned.is_none_or(|start| decoded.end() > start as i64) {
                return Err(MediaError::Corrupt(format!("decoding at {:.2} s: {error}", decoded.end() as f64 / rate)));
            }
            problem = Some(format!("decoding: {error}"));
            continue;
        }
        while decoder.receive_frame(&mut frame).is_ok() {
            decoded.push(&frame, spec, stream_start, time_base)?;
        }
        if covered(&decoded) {
            break;
        }
    }
    if covered(&decoded) {
        if let Some(resampler) = decoded.resampler.as_mut() {
            resampler.flush(&mut decoded.samples);
        }
    } else {
        let _ = decoder.send_eof();
        while decoder.receive_frame(&mut frame).is_ok() {
            decoded.push(&frame, spec, stream_start, time_base)?;
        }
        if let Some(resampler) = decoded.resampler.as_mut() {
            resampler.push(None, &mut decoded.samples)?;
        }
    }
    let Some(first) = decoded.first else {
        return Err(MediaError::Corrupt(problem.unwrap_or_else(|| "no audio could be decoded".into())));
    };
    let start = match planned {
        Some(start) => start as i64,
        None => first + window_start((decoded.end() - first).max(0) as u64, length, spec.placement, seed) as i64,
    };
    if let Some(duration) = declared {
        let declared_end = ((duration - DURATION_TOLERANCE_SECONDS) * rate) as i64;
        let needed = (start + length as i64).min(declared_end);
        if decoded.end() < needed {
            let reason = problem.map(|problem| format!(" ({problem})")).unwrap_or_default();
            return Err(MediaError::Corrupt(format!(
                "the audio ends at {:.2} s; the file declares {duration:.2} s{reason}",
                decoded.end() as f64 / rate
            )));
        }
    }
    Ok((decoded.samples, start - first))
}

/// What has been decoded so far: resampled, interleaved, starting at output sample `first`.
struct Decoded {
    resampler: Option<Resampler>,
    samples: Vec<f32>,
    first: Option<i64>,
    channels: usize,
}

impl Decoded {
    /// One past the last output sample decoded.
    fn end(&self) -> i64 {
        let pending = self.resampler.as_ref().map_or(0, Resampler::pending);
        self.first.unwrap_or(0) + (self.samples.len() / self.channels + pending) as i64
    }

    fn push(&mut self, frame: &frame::Audio, spec: &AudioSpec, stream_start: f64, time_base: ffmpeg_next::Rational) -> MediaResult<()> {
        if self.resampler.is_none() {
            let mut resampler = Resampler::new(frame, spec.sample_rate, spec.channels)?;
            let timestamp = frame.pts().or(frame.timestamp()).map_or(stream_start, |timestamp| seconds(timestamp, time_base));
            let first_input = ((timestamp - stream_start) * f64::from(frame.rate())).round() as i64;
            self.first = Some(resampler.align(first_input, spec.sample_rate));
            self.resampler = Some(resampler);
        }
        let resampler = self.resampler.as_mut().expect("made above");
        resampler.push(Some(frame), &mut self.samples)
    }
}
