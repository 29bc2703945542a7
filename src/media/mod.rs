//! The native audio and video path: FFmpeg's demuxers and decoders (Debian's `libav*`, as
//! spdl.io and torchcodec use), reading each sample from memory, decoding only what its window or
//! clip needs, and writing the result once, into its slot of a batch buffer.
//!
//! - `input`: a container opened over a sample's bytes.
//! - `window`: where an audio window or a video clip falls (pure arithmetic, seeded).
//! - `audio`: decode, convert and down-mix (`swresample`), change the rate (`polyphase`, its
//!   filter in `polyphase_bank`, its inner loop in `polyphase_kernel`), window.
//! - `video`: keyframe seek, decode skipping unneeded frames, colour-convert and resize frames.
//! - `batch`: many samples into one buffer in parallel, with per-sample errors.

pub mod audio;
pub mod batch;
pub mod error;
pub mod frame_geometry;
pub mod input;
pub mod polyphase;
pub mod polyphase_bank;
pub mod polyphase_kernel;
pub mod resample;
pub mod resampler_pool;
pub mod scale;
pub mod video;
pub mod window;
