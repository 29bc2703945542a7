//! What an audio or video transform asks for, without decoding anything: the transforms'
//! options, checked (`spec`), where a window or clip falls (`window`), and how each frame is
//! cropped and scaled (`frame_geometry`).
//!
//! This is all of media that the core holds, so `stoker._native` needs no FFmpeg. The decoding
//! itself is the media part (`src/media`, the `stoker-media` crate), built once per FFmpeg major
//! and loaded on first use; it reads these same specs.

pub mod frame_geometry;
pub mod spec;
pub mod window;
