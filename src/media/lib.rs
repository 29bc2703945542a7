//! stoker's media part: audio and video decoding with FFmpeg's demuxers and decoders (the user's
//! own `libav*`, as spdl.io and torchcodec use), reading each sample from memory, decoding only
//! what its window or clip needs, and writing the result once, into its slot of a batch buffer.
//!
//! It is a native module of its own (`stoker._media.ffmpegN._media`), built once per FFmpeg major
//! against that major's headers, so that the core (`stoker._native`) needs no FFmpeg at all. What
//! a transform asks for (`stoker_native::media::spec`) lives in the core; this crate decodes it.
//!
//! - `input`: a container opened over a sample's bytes (`riff`: RIFF chunk sizes checked first).
//! - `audio`: decode, convert and down-mix (`swresample`), change the rate (`polyphase`, its
//!   filter in `polyphase_bank`, its inner loop in `polyphase_kernel`), window.
//! - `video`: keyframe seek, decode skipping unneeded frames, colour-convert and resize frames.
//! - `probe`: a file's length (duration, frames, rate, size) from its headers, nothing decoded.
//! - `batch`: many samples into one buffer in parallel, with per-sample errors.
//! - `python` (feature `python`): the module's functions.

pub mod audio;
pub mod batch;
pub mod error;
pub mod input;
pub mod polyphase;
pub mod polyphase_bank;
pub mod polyphase_kernel;
pub mod probe;
pub mod resample;
pub mod resampler_pool;
pub mod riff;
pub mod scale;
pub mod video;

#[cfg(feature = "python")]
mod python;
