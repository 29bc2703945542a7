//! Where an audio window or a video clip falls in its file: pure arithmetic, seeded per sample so
//! a sample's window does not depend on the batch or thread that decoded it.

use crate::image::geometry::SampleRng;

/// Where a window (or a clip) is placed in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Uniformly at random among the positions where it fits, from the sample's seed.
    Random,
    /// In the middle.
    Center,
    /// At the start.
    Start,
}

/// The first position of a window of `length` in a file of `total` (0 when it does not fit:
/// the caller pads).
pub fn window_start(total: u64, length: u64, placement: Placement, seed: u64) -> u64 {
    if total <= length {
        return 0;
    }
    let room = total - length;
    match placement {
        Placement::Start => 0,
        Placement::Center => room / 2,
        Placement::Random => SampleRng::new(seed).next_u64() % (room + 1),
    }
}

/// How far apart a clip's frames are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClipStep {
    /// Every `n`th source frame.
    Stride(usize),
    /// Frames at this rate (frames per second), whatever the source's rate.
    Rate(f64),
    /// Spread evenly over the whole video: the middle frame of each of `frames` equal segments
    /// (as TSN samples), for clip-level classification.
    Spread,
}

/// The source frame indices (ascending) of a clip of `frames` frames from a video of `total`
/// frames at `fps`.
///
/// Errors: a clip that spans more frames than the video has (the message says both).
pub fn clip_frames(total: usize, fps: f64, frames: usize, step: ClipStep, placement: Placement, seed: u64) -> Result<Vec<usize>, String> {
    if total == 0 {
        return Err("the video has no frames".into());
    }
    let offsets: Vec<usize> = match step {
        ClipStep::Spread => return Ok((0..frames).map(|index| ((index as f64 + 0.5) * total as f64 / frames as f64) as usize).collect()),
        ClipStep::Stride(stride) => (0..frames).map(|index| index * stride).collect(),
        // A small epsilon: 30 fps to 10 fps is a stride of exactly 3, whatever the rounding.
        ClipStep::Rate(rate) => (0..frames).map(|index| (index as f64 * fps / rate + 1e-6) as usize).collect(),
    };
    let span = offsets.last().map_or(0, |last| last + 1);
    if span > total {
        let how = match step {
            ClipStep::Stride(stride) => format!("at stride {stride}"),
            ClipStep::Rate(rate) => format!("at {rate} fps from {fps:.3} fps"),
            ClipStep::Spread => unreachable!(),
        };
        return Err(format!("a clip of {frames} frames {how} spans {span} frames; the video has {total}"));
    }
    let start = window_start(total as u64, span as u64, placement, seed) as usize;
    Ok(offsets.into_iter().map(|offset| start + offset).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_fit_and_are_seeded() {
        assert_eq!(window_start(100, 10, Placement::Center, 0), 45);
        assert_eq!(window_start(100, 10, Placement::Start, 7), 0);
        assert_eq!(window_start(5, 10, Placement::Random, 7), 0);
        let starts: Vec<u64> = (0..200).map(|seed| window_start(100, 10, Placement::Random, seed)).collect();
        assert!(starts.iter().all(|&start| start <= 90));
        assert!(starts.iter().any(|&start| start == 0 || start > 80));
        assert_eq!(window_start(100, 10, Placement::Random, 3), window_start(100, 10, Placement::Random, 3));
    }

    #[test]
    fn clips_stride_rate_and_spread() {
        assert_eq!(clip_frames(100, 30.0, 4, ClipStep::Stride(3), Placement::Start, 0).unwrap(), vec![0, 3, 6, 9]);
        assert_eq!(clip_frames(100, 30.0, 4, ClipStep::Rate(10.0), Placement::Start, 0).unwrap(), vec![0, 3, 6, 9]);
        assert_eq!(clip_frames(10, 30.0, 4, ClipStep::Stride(3), Placement::Center, 0).unwrap(), vec![0, 3, 6, 9]);
        assert_eq!(clip_frames(100, 25.0, 4, ClipStep::Spread, Placement::Random, 9).unwrap(), vec![12, 37, 62, 87]);
        let error = clip_frames(9, 30.0, 4, ClipStep::Stride(3), Placement::Start, 0).unwrap_err();
        assert!(error.contains("spans 10 frames; the video has 9"), "{error}");
    }
}
