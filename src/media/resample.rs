//! Any decoded format, rate and channel count in, packed f32 at the target rate out, appended to a
//! growing buffer.
//!
//! FFmpeg's `swresample` converts the sample format and mixes the channels, at the input's rate;
//! `Polyphase` then changes the rate with a band-limited windowed sinc (Kaiser, the kind of
//! filter swresample uses by default, not linear interpolation), several times faster than
//! swresample's own filter loop. Called through the C API: the Rust wrapper's frame-to-frame
//! conversion sizes its output by the input.

use std::ptr;

use ffmpeg_next::ffi;
use ffmpeg_next::frame;

use super::error::{MediaError, MediaResult};
use super::polyphase::Polyphase;
use super::polyphase_bank::gcd;
use super::resampler_pool::{self, Shape};
use stoker_native::media::spec::Channels;

/// What `push` keeps of the channels swresample produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pick {
    All,
    One(usize),
}

/// One stream's resampler, made for the first frame's format, rate and channel count.
pub struct Resampler {
    context: *mut ffi::SwrContext,
    input: (i32, i32, i32),
    /// Channels the resampler writes (the input's, when selecting one).
    produced_channels: usize,
    pick: Pick,
    /// Input samples still to drop before the first converted one (see `align`).
    skip: usize,
    /// Where swresample writes, reused frame after frame.
    scratch: Vec<f32>,
    /// The rate change (None when the rates are equal), and where its input is gathered.
    polyphase: Option<Polyphase>,
    picked: Vec<f32>,
    /// What the context was made for, to hand it back to the pool.
    shape: Shape,
    /// Whether the context initialized, and so may be reused.
    ready: bool,
}

impl Resampler {
    /// A resampler from `frame`'s format to f32 at `rate` with `channels`.
    pub fn new(frame: &frame::Audio, rate: u32, channels: Channels) -> MediaResult<Self> {
        // SAFETY: `frame` wraps a valid AVFrame the decoder filled; we only read plain fields.
        let (format, input_rate, input_channels) = unsafe {
            let raw = &*frame.as_ptr();
            (raw.format, raw.sample_rate, raw.ch_layout.nb_channels)
        };
        if input_channels < 1 || input_rate < 1 {
            return Err(MediaError::Corrupt(format!("decoded audio with {input_channels} channels at {input_rate} Hz")));
        }
        let (produced, pick) = match channels {
            Channels::Mix(count) => (count, Pick::All),
            Channels::Select(channel) if channel < input_channels as usize => (input_channels as usize, Pick::One(channel)),
            Channels::Select(channel) => {
                return Err(MediaError::Transform(format!("channel {channel} asked; the audio has {input_channels} channel(s)")))
            }
        };
        // The context converts at the input's rate (`Polyphase` changes it), so one context
        // serves every output rate.
        let shape: Shape = (format, input_rate, input_channels, produced);
        let output_channels = if matches!(pick, Pick::One(_)) { 1 } else { produced };
        // Rates from the file's header are checked (and the filter's size bounded) here, before
        // anything is allocated for them.
        let polyphase = match input_rate as u32 != rate {
            true => Some(Polyphase::new(input_rate as u32, rate, output_channels).map_err(MediaError::Corrupt)?),
            false => None,
        };
        let resampler = |context, ready| Resampler {
            context,
            input: (format, input_rate, input_channels),
            produced_channels: produced,
            pick,
            skip: 0,
            scratch: Vec::new(),
            polyphase,
            picked: Vec::new(),
            shape,
            ready,
        };
        if let Some(context) = resampler_pool::take(shape) {
            return Ok(resampler(context, true));
        }
        let mut context: *mut ffi::SwrContext = ptr::null_mut();
        // SAFETY: the layouts are zeroed structs that av_channel_layout_default fills (a native
        // order needs no allocation, so no uninit is owed); swr_alloc_set_opts2 copies them. The
        // sample format value comes from the decoder, so it is a valid AVSampleFormat.
        // swr_set_matrix reads one row of `input_channels` weights (stride `input_channels`).
        let status = unsafe {
            let mut input_layout: ffi::AVChannelLayout = std::mem::zeroed();
            let mut output_layout: ffi::AVChannelLayout = std::mem::zeroed();
            ffi::av_channel_layout_default(&mut input_layout, input_channels);
            ffi::av_channel_layout_default(&mut output_layout, produced as i32);
            // At the input's rate: the rate is changed by `Polyphase`.
            let status = ffi::swr_alloc_set_opts2(
                &mut context,
                &mut output_layout,
                ffi::AVSampleFormat::AV_SAMPLE_FMT_FLT,
                input_rate,
                &mut input_layout,
                std::mem::transmute::<i32, ffi::AVSampleFormat>(format),
                input_rate,
                0,
                ptr::null_mut(),
            );
            // Mono is the channels' mean, as torchaudio and librosa make it (swresample's own
            // weights give each side -3 dB: louder than the mean, clipping on correlated
            // channels). Mixed before resampling: one channel to filter instead of several.
            let status = if status >= 0 && produced == 1 && input_channels > 1 {
                let weights = vec![1.0 / f64::from(input_channels); input_channels as usize];
                ffi::swr_set_matrix(context, weights.as_ptr(), input_channels)
            } else {
                status
            };
            if status < 0 {
                status
            } else {
                ffi::swr_init(context)
            }
        };
        let resampler = resampler(context, status >= 0);
        if status < 0 {
            return Err(MediaError::Corrupt(format!(
                "cannot resample {input_channels} channel(s) at {input_rate} Hz: {}",
                ffmpeg_next::Error::from(status)
            )));
        }
        Ok(resampler)
    }

    /// Start on the output grid: given the first input sample's number `first` (at the input
    /// rate), drop the few input samples before the next one that falls exactly on an output
    /// sample, and return that output sample's number. Without this a window read after a seek
    /// would be shifted by up to half an output sample against one read from the start.
    pub fn align(&mut self, first: i64, output_rate: u32) -> i64 {
        // The grid repeats every `period` inputs, which make `outputs` outputs (the rates in
        // lowest terms, or the converter's approximate ratio).
        let (period, outputs) = match &self.polyphase {
            Some(polyphase) => {
                let (inputs, outputs) = polyphase.period();
                (inputs as i64, outputs as i64)
            }
            None => {
                let divisor = i64::from(gcd(self.input.1 as u32, output_rate));
                (i64::from(self.input.1) / divisor, i64::from(output_rate) / divisor)
            }
        };
        let skip = (period - first.rem_euclid(period)) % period;
        self.skip = skip as usize;
        (first + skip) * outputs / period
    }

    /// Convert `frame` (None: flush what the filter holds) and append interleaved samples to `out`.
    pub fn push(&mut self, frame: Option<&frame::Audio>, out: &mut Vec<f32>) -> MediaResult<()> {
        let mut planes: Vec<*const u8> = Vec::new();
        let count = match frame {
            Some(frame) => {
                // SAFETY: reading plain fields of a valid decoded AVFrame, whose extended_data
                // holds one pointer per channel when planar (one when packed), each to
                // nb_samples samples; skipping moves each pointer forward by at most nb_samples
                // samples, so it stays inside (or one past) its plane.
                unsafe {
                    let raw = &*frame.as_ptr();
                    let shape = (raw.format, raw.sample_rate, raw.ch_layout.nb_channels);
                    if shape != self.input {
                        return Err(MediaError::Corrupt(format!("the audio's format changes mid-stream ({:?} to {shape:?})", self.input)));
                    }
                    let format = std::mem::transmute::<i32, ffi::AVSampleFormat>(raw.format);
                    let planar = ffi::av_sample_fmt_is_planar(format) != 0;
                    let skip = self.skip.min(raw.nb_samples.max(0) as usize);
                    self.skip -= skip;
                    let step = ffi::av_get_bytes_per_sample(format) as usize * if planar { 1 } else { raw.ch_layout.nb_channels as usize };
                    let plane_count = if planar { raw.ch_layout.nb_channels as usize } else { 1 };
                    planes.extend((0..plane_count).map(|plane| (*raw.extended_data.add(plane) as *const u8).add(skip * step)));
                    raw.nb_samples - skip as i32
                }
            }
            None => 0,
        };
        let data = if planes.is_empty() { ptr::null_mut() } else { planes.as_mut_ptr() };
        // SAFETY: `context` is initialized; swr_get_out_samples bounds what swr_convert writes
        // for `count` more input samples, and we reserve that much room (times channels) past
        // the end of `scratch` before handing swr its pointer. `data` holds one plane pointer
        // per channel (or one, packed) of `count` samples, owned by the live frame.
        unsafe {
            let room = ffi::swr_get_out_samples(self.context, count).max(0) as usize + 16;
            let scratch = &mut self.scratch;
            scratch.clear();
            scratch.reserve(room * self.produced_channels);
            let mut planes = [scratch.as_mut_ptr() as *mut u8];
            let written = ffi::swr_convert(self.context, planes.as_mut_ptr(), room as i32, data, count);
            if written < 0 {
                return Err(MediaError::Corrupt(format!("resampling: {}", ffmpeg_next::Error::from(written))));
            }
            scratch.set_len(written as usize * self.produced_channels);
        }
        let channels = self.produced_channels;
        let Some(polyphase) = self.polyphase.as_mut() else {
            match self.pick {
                Pick::All => out.extend_from_slice(&self.scratch),
                Pick::One(channel) => out.extend(self.scratch.chunks_exact(channels).map(|samples| samples[channel])),
            }
            return Ok(());
        };
        let picked = match self.pick {
            Pick::All => &self.scratch,
            Pick::One(channel) => {
                self.picked.clear();
                self.picked.extend(self.scratch.chunks_exact(channels).map(|samples| samples[channel]));
                &self.picked
            }
        };
        polyphase.push(picked, out);
        if frame.is_none() {
            polyphase.finish(out);
        }
        Ok(())
    }

    /// Output samples (per channel) the input so far allows that `push` has not appended yet.
    pub fn pending(&self) -> usize {
        self.polyphase.as_ref().map_or(0, Polyphase::pending)
    }

    /// Append those pending output samples to `out` (interleaved).
    pub fn flush(&mut self, out: &mut Vec<f32>) {
        if let Some(polyphase) = self.polyphase.as_mut() {
            polyphase.flush(out);
        }
    }
}

impl Drop for Resampler {
    fn drop(&mut self) {
        if self.ready {
            resampler_pool::give_back(self.shape, std::mem::replace(&mut self.context, ptr::null_mut()));
            return;
        }
        // SAFETY: `context` came from swr_alloc_set_opts2 (or is null, which swr_free accepts)
        // and is freed once, here.
        unsafe { ffi::swr_free(&mut self.context) }
    }
}
