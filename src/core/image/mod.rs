//! The native image path: decode, orient, crop, resize, normalize, straight into batch memory.

pub mod batch;
pub mod color;
pub mod decode;
pub mod error;
pub mod geometry;
pub mod jpeg;
pub mod jpeg_encode;
pub mod orientation;
pub mod output;
pub mod transform;
