//! Where each video frame is cropped and to what size it is scaled, as the image path does it:
//! resize the shorter side (torchvision's `Resize(int)`) or to an exact size, then crop (centred,
//! or at a random place drawn once per clip from its seed), then maybe flip (once per clip).
//! Computed in source pixels, so one scaling pass both crops and resizes.

use crate::image::geometry::{shorter_side_size, SampleRng};

/// How frames are resized before the crop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resize {
    None,
    /// The shorter side to this many pixels, keeping the aspect ratio.
    Shorter(usize),
    /// Exactly (width, height).
    Exact(usize, usize),
    /// Just large enough to cover (width, height), keeping the aspect ratio (the crop then
    /// takes the overhang): a video into an aspect-ratio bucket, as `ImageTransform(cover=)`.
    Cover(usize, usize),
}

/// A frame's resize, crop and flip.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameGeometry {
    pub resize: Resize,
    /// (width, height) of the crop, after the resize.
    pub crop: Option<(usize, usize)>,
    /// Place the crop at random (torchvision's `RandomCrop`) instead of in the centre.
    pub random_crop: bool,
    /// Chance that a clip is mirrored left to right.
    pub flip_probability: f64,
}

/// The source rectangle (left, top, width, height) to scale, and the output (width, height).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FramePlan {
    pub source: (usize, usize, usize, usize),
    pub output: (usize, usize),
}

impl FrameGeometry {
    /// The (width, height) of every output frame, or None when it depends on the video.
    pub fn output_size(&self) -> Option<(usize, usize)> {
        match (self.crop, self.resize) {
            (Some(crop), _) => Some(crop),
            (None, Resize::Exact(width, height)) => Some((width, height)),
            _ => None,
        }
    }

    /// Whether the clip with `seed` is mirrored (drawn after the crop's place).
    pub fn flips(&self, seed: u64) -> bool {
        let mut rng = SampleRng::new(seed);
        rng.next_u64();
        rng.next_u64();
        self.flip_probability > 0.0 && rng.uniform(0.0, 1.0) < self.flip_probability
    }

    /// The plan for frames of `width` x `height` of the clip with `seed`.
    pub fn plan(&self, width: usize, height: usize, seed: u64) -> Result<FramePlan, String> {
        if width == 0 || height == 0 {
            return Err(format!("frames of {width}x{height}"));
        }
        let (resized_width, resized_height) = match self.resize {
            Resize::None => (width, height),
            Resize::Shorter(side) => shorter_side_size(width, height, side),
            Resize::Exact(width, height) => (width, height),
            Resize::Cover(target_width, target_height) => {
                let scale = (target_width as f64 / width as f64).max(target_height as f64 / height as f64);
                let covered = |side: usize, target: usize| ((side as f64 * scale).round() as usize).max(target);
                (covered(width, target_width), covered(height, target_height))
            }
        };
        let Some((crop_width, crop_height)) = self.crop else {
            return Ok(FramePlan { source: (0, 0, width, height), output: (resized_width, resized_height) });
        };
        if crop_width > resized_width || crop_height > resized_height {
            return Err(format!(
                "a {crop_width}x{crop_height} crop does not fit frames of {width}x{height} resized to {resized_width}x{resized_height}"
            ));
        }
        if let Resize::Cover(target_width, target_height) = self.resize {
            // The target's shape in source pixels (one scale both ways), placed in the source.
            let scale = (width as f64 / target_width as f64).min(height as f64 / target_height as f64);
            let source_width = ((target_width as f64 * scale).round() as usize).clamp(1, width);
            let source_height = ((target_height as f64 * scale).round() as usize).clamp(1, height);
            let (left, top) = if self.random_crop {
                let mut rng = SampleRng::new(seed);
                (rng.up_to(width - source_width), rng.up_to(height - source_height))
            } else {
                ((width - source_width) / 2, (height - source_height) / 2)
            };
            return Ok(FramePlan { source: (left, top, source_width, source_height), output: (target_width, target_height) });
        }
        let scale_x = width as f64 / resized_width as f64;
        let scale_y = height as f64 / resized_height as f64;
        let (left, top) = if self.random_crop {
            let mut rng = SampleRng::new(seed);
            (rng.up_to(resized_width - crop_width) as f64 * scale_x, rng.up_to(resized_height - crop_height) as f64 * scale_y)
        } else {
            // torchvision's CenterCrop rounds the offset of the resized image.
            (((resized_width - crop_width) as f64 / 2.0).round() * scale_x, ((resized_height - crop_height) as f64 / 2.0).round() * scale_y)
        };
        let source_width = ((crop_width as f64 * scale_x).round() as usize).clamp(1, width);
        let source_height = ((crop_height as f64 * scale_y).round() as usize).clamp(1, height);
        let left = (left.round() as usize).min(width - source_width);
        let top = (top.round() as usize).min(height - source_height);
        Ok(FramePlan { source: (left, top, source_width, source_height), output: (crop_width, crop_height) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorter_side_then_centre_crop_in_source_pixels() {
        let geometry = FrameGeometry { resize: Resize::Shorter(224), crop: Some((224, 224)), random_crop: false, flip_probability: 0.0 };
        let plan = geometry.plan(640, 360, 0).unwrap();
        assert_eq!(plan.output, (224, 224));
        assert_eq!(plan.source, (140, 0, 360, 360));
    }

    #[test]
    fn exact_resize_and_crop_only() {
        let geometry = |resize, crop| FrameGeometry { resize, crop, random_crop: false, flip_probability: 0.0 };
        let exact = geometry(Resize::Exact(112, 64), None);
        assert_eq!(exact.plan(640, 360, 0).unwrap(), FramePlan { source: (0, 0, 640, 360), output: (112, 64) });
        let crop = geometry(Resize::None, Some((100, 50)));
        assert_eq!(crop.plan(640, 360, 0).unwrap().source, (270, 155, 100, 50));
        assert!(crop.plan(64, 36, 0).is_err());
        assert_eq!(geometry(Resize::Shorter(8), None).output_size(), None);
    }

    #[test]
    fn cover_resizes_to_just_cover_and_crops_the_overhang() {
        let geometry = FrameGeometry { resize: Resize::Cover(128, 128), crop: Some((128, 128)), random_crop: false, flip_probability: 0.0 };
        // 640x360 scaled by 128/360 is 228x128: 50 px of overhang each side, 140 source pixels.
        let plan = geometry.plan(640, 360, 0).unwrap();
        assert_eq!(plan, FramePlan { source: (140, 0, 360, 360), output: (128, 128) });
        let tall = FrameGeometry { resize: Resize::Cover(96, 160), crop: Some((96, 160)), ..geometry };
        let plan = tall.plan(360, 640, 0).unwrap();
        assert_eq!(plan.output, (96, 160));
        assert_eq!(plan.source.2, 360, "the whole width is kept");
    }

    #[test]
    fn random_crops_stay_inside_and_follow_the_seed() {
        let geometry = FrameGeometry { resize: Resize::None, crop: Some((100, 50)), random_crop: true, flip_probability: 0.5 };
        let places: Vec<(usize, usize)> =
            (0..50).map(|seed| geometry.plan(640, 360, seed).unwrap().source).map(|(left, top, _, _)| (left, top)).collect();
        assert!(places.iter().all(|&(left, top)| left <= 540 && top <= 310));
        assert!(places.windows(2).any(|pair| pair[0] != pair[1]));
        assert_eq!(geometry.plan(640, 360, 7).unwrap(), geometry.plan(640, 360, 7).unwrap());
        let flips = (0..200).filter(|&seed| geometry.flips(seed)).count();
        assert!((60..140).contains(&flips), "{flips} of 200 flipped");
    }
}
