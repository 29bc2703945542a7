//! Where the output comes from: resize, crop and flip decisions made from the image size, the
//! transform spec and a seeded random generator, before any pixel is touched. Semantics follow
//! torchvision (Resize of the shorter side, CenterCrop, RandomResizedCrop, RandomHorizontalFlip)
//! so a model trained with those transforms sees the same geometry.

use super::error::{ImageError, ImageResult, MAX_PIXELS};

/// How to crop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Crop {
    None,
    /// torchvision CenterCrop: taken after the resize; zero padding where it exceeds the image.
    Center {
        width: usize,
        height: usize,
    },
    /// torchvision RandomResizedCrop: a random area fraction in `scale` and aspect ratio in
    /// `ratio` of the decoded image, resized to `width` x `height`.
    RandomResized {
        width: usize,
        height: usize,
        scale: (f64, f64),
        ratio: (f64, f64),
    },
    /// A bucket's shape: the image resized (keeping its aspect ratio) to just cover `width` x
    /// `height`, and the overhang cropped away, centred or at a seeded random place along the
    /// longer axis. Nothing is padded; the least of the image is lost for that shape.
    Cover {
        width: usize,
        height: usize,
        random: bool,
    },
}

/// What to do to every image.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransformSpec {
    /// Resize so the shorter side has this length, keeping the aspect ratio.
    pub resize_shorter: Option<usize>,
    /// Resize to exactly (width, height). Exclusive with `resize_shorter`.
    pub resize: Option<(usize, usize)>,
    pub crop: Crop,
    /// Probability of a horizontal flip, decided per image by its seed.
    pub flip_probability: f64,
    /// Decode to one gray channel instead of RGB.
    pub gray: bool,
    /// Let JPEG decode at 1/2, 1/4 or 1/8 size when the output is at least that much smaller
    /// (libjpeg-turbo's scaled IDCT). On by default from Python: on photos it stays within a
    /// mean of 0.5 levels (max 5) of torchvision's pixels, inside our JPEG tolerance.
    pub dct_scaling: bool,
    /// Largest image (width x height, as its header declares) we decode; larger ones are
    /// refused before any pixel memory is allocated (decompression bombs).
    pub max_pixels: u64,
}

impl TransformSpec {
    /// Check the spec once, before any image, so a bad spec is one clear error.
    pub fn validate(&self) -> ImageResult<()> {
        let bad = |detail: String| Err(ImageError::Transform(detail));
        if self.resize_shorter.is_some() && self.resize.is_some() {
            return bad("resize_shorter and resize are exclusive".into());
        }
        if self.resize_shorter == Some(0) || matches!(self.resize, Some((0, _)) | Some((_, 0))) {
            return bad("resize sizes must be positive".into());
        }
        if self.max_pixels == 0 || self.max_pixels > MAX_PIXELS {
            return bad(format!("max_pixels must be in 1..={MAX_PIXELS}, got {}", self.max_pixels));
        }
        if !(0.0..=1.0).contains(&self.flip_probability) {
            return bad(format!("flip probability {} is not in [0, 1]", self.flip_probability));
        }
        match self.crop {
            Crop::Center { width, height } | Crop::RandomResized { width, height, .. } | Crop::Cover { width, height, .. }
                if width == 0 || height == 0 =>
            {
                bad("crop sizes must be positive".into())
            }
            Crop::Cover { .. } if self.resize_shorter.is_some() || self.resize.is_some() => {
                bad("cover resizes itself; drop resize_shorter/resize".into())
            }
            Crop::RandomResized { scale, ratio, .. } => {
                if !(scale.0 > 0.0 && scale.0 <= scale.1 && scale.1 <= 1.0) {
                    return bad(format!("random crop scale {scale:?} must satisfy 0 < min <= max <= 1"));
                }
                if !(ratio.0 > 0.0 && ratio.0 <= ratio.1) {
                    return bad(format!("random crop ratio {ratio:?} must satisfy 0 < min <= max"));
                }
                if self.resize_shorter.is_some() || self.resize.is_some() {
                    return bad("random_resized_crop resizes itself; drop resize_shorter/resize".into());
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The output (width, height) when every image gives the same size, as a batch needs.
    pub fn fixed_output_size(&self) -> Option<(usize, usize)> {
        match self.crop {
            Crop::Center { width, height } | Crop::RandomResized { width, height, .. } | Crop::Cover { width, height, .. } => {
                Some((width, height))
            }
            Crop::None => self.resize,
        }
    }
}

/// The decided geometry for one image.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// Source region (in upright, full-resolution pixels) that maps onto the output's valid part.
    pub source: (f64, f64, f64, f64),
    /// Where that region lands in the output: (left, top, width, height); the rest is zero.
    pub target: (usize, usize, usize, usize),
    pub out_width: usize,
    pub out_height: usize,
    pub flip: bool,
    /// The source region is cut out before resizing (torchvision's `resized_crop`), so the
    /// filter never reaches pixels outside it; otherwise the region is a window on the resized
    /// whole image (Resize then CenterCrop), whose filter does.
    pub crop_first: bool,
}

impl Plan {
    /// How many times smaller per side the source region is than its target, the smaller axis.
    pub fn downscale(&self) -> f64 {
        let (_, _, width, height) = self.source;
        let (_, _, target_width, target_height) = self.target;
        (width / target_width as f64).min(height / target_height as f64)
    }
}

/// SplitMix64: a tiny, well-mixed generator, seeded per image so results do not depend on which
/// thread or batch decoded it.
#[derive(Debug, Clone)]
pub struct SampleRng(u64);

impl SampleRng {
    pub fn new(seed: u64) -> Self {
        SampleRng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [low, high).
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [0, high] (inclusive, as torch.randint(0, high + 1)).
    pub fn up_to(&mut self, high: usize) -> usize {
        (self.next_u64() % (high as u64 + 1)) as usize
    }
}

/// torchvision's size for Resize(int): the shorter side becomes `size`, the longer is truncated.
pub fn shorter_side_size(width: usize, height: usize, size: usize) -> (usize, usize) {
    if width <= height {
        (size, ((size * height) as f64 / width as f64) as usize)
    } else {
        (((size * width) as f64 / height as f64) as usize, size)
    }
}

/// Where torchvision's CenterCrop starts along an axis of `size` pixels: `int(round((size - crop)
/// / 2.0))` (Python's round, ties to even) inside the image; when the crop is larger, the image is
/// first padded by `(crop - size) // 2` before it (and the rest after), so the crop starts there.
fn center_crop_start(size: usize, crop: usize) -> i64 {
    if crop > size {
        -(((crop - size) / 2) as i64)
    } else {
        ((size as f64 - crop as f64) / 2.0).round_ties_even() as i64
    }
}

/// torchvision RandomResizedCrop.get_params: (left, top, width, height) in source pixels.
fn random_resized_box(
    width: usize,
    height: usize,
    scale: (f64, f64),
    ratio: (f64, f64),
    rng: &mut SampleRng,
) -> (usize, usize, usize, usize) {
    let area = (width * height) as f64;
    let log_ratio = (ratio.0.ln(), ratio.1.ln());
    for _ in 0..10 {
        let target_area = area * rng.uniform(scale.0, scale.1);
        let aspect = rng.uniform(log_ratio.0, log_ratio.1).exp();
        // Python's round (ties to even), as torchvision computes the box.
        let crop_width = (target_area * aspect).sqrt().round_ties_even() as usize;
        let crop_height = (target_area / aspect).sqrt().round_ties_even() as usize;
        if 0 < crop_width && crop_width <= width && 0 < crop_height && crop_height <= height {
            let top = rng.up_to(height - crop_height);
            let left = rng.up_to(width - crop_width);
            return (left, top, crop_width, crop_height);
        }
    }
    // Fallback to a central crop with the ratio clamped into range.
    let in_ratio = width as f64 / height as f64;
    let (crop_width, crop_height) = if in_ratio < ratio.0 {
        (width, ((width as f64 / ratio.0).round_ties_even() as usize).max(1))
    } else if in_ratio > ratio.1 {
        (((height as f64 * ratio.1).round_ties_even() as usize).max(1), height)
    } else {
        (width, height)
    };
    ((width - crop_width) / 2, (height - crop_height) / 2, crop_width, crop_height)
}

/// Decide the geometry for an upright `width` x `height` image.
pub fn plan(spec: &TransformSpec, width: usize, height: usize, seed: u64) -> ImageResult<Plan> {
    let mut rng = SampleRng::new(seed);
    if let Crop::RandomResized { width: out_width, height: out_height, scale, ratio } = spec.crop {
        let (left, top, crop_width, crop_height) = random_resized_box(width, height, scale, ratio, &mut rng);
        let flip = spec.flip_probability > 0.0 && rng.uniform(0.0, 1.0) < spec.flip_probability;
        return Ok(Plan {
            source: (left as f64, top as f64, crop_width as f64, crop_height as f64),
            target: (0, 0, out_width, out_height),
            out_width,
            out_height,
            flip,
            crop_first: true,
        });
    }
    if let Crop::Cover { width: out_width, height: out_height, random } = spec.crop {
        // The largest region of the output's aspect ratio that fits the image: resized, it
        // covers the output exactly.
        let scale = (out_width as f64 / width as f64).max(out_height as f64 / height as f64);
        let region_width = (out_width as f64 / scale).min(width as f64);
        let region_height = (out_height as f64 / scale).min(height as f64);
        let (spare_width, spare_height) = (width as f64 - region_width, height as f64 - region_height);
        let (left, top) =
            if random { (rng.uniform(0.0, spare_width), rng.uniform(0.0, spare_height)) } else { (spare_width / 2.0, spare_height / 2.0) };
        let flip = spec.flip_probability > 0.0 && rng.uniform(0.0, 1.0) < spec.flip_probability;
        return Ok(Plan {
            source: (left, top, region_width, region_height),
            target: (0, 0, out_width, out_height),
            out_width,
            out_height,
            flip,
            crop_first: true,
        });
    }
    // Size after the resize step (the image itself when there is none).
    let (resized_width, resized_height) = match (spec.resize_shorter, spec.resize) {
        (Some(size), _) => shorter_side_size(width, height, size),
        (None, Some(size)) => size,
        (None, None) => (width, height),
    };
    if resized_width == 0 || resized_height == 0 {
        return Err(ImageError::Transform(format!("{width}x{height} image resizes to zero pixels")));
    }
    let scale_x = width as f64 / resized_width as f64;
    let scale_y = height as f64 / resized_height as f64;
    let (out_width, out_height, crop_left, crop_top) = match spec.crop {
        Crop::Center { width: crop_width, height: crop_height } => {
            (crop_width, crop_height, center_crop_start(resized_width, crop_width), center_crop_start(resized_height, crop_height))
        }
        _ => (resized_width, resized_height, 0, 0),
    };
    // The part of the crop window that lies on the resized image; outside it is padding.
    let valid_left = crop_left.max(0);
    let valid_top = crop_top.max(0);
    let valid_right = (crop_left + out_width as i64).min(resized_width as i64);
    let valid_bottom = (crop_top + out_height as i64).min(resized_height as i64);
    let flip = spec.flip_probability > 0.0 && rng.uniform(0.0, 1.0) < spec.flip_probability;
    Ok(Plan {
        source: (
            valid_left as f64 * scale_x,
            valid_top as f64 * scale_y,
            (valid_right - valid_left) as f64 * scale_x,
            (valid_bottom - valid_top) as f64 * scale_y,
        ),
        target: (
            (valid_left - crop_left) as usize,
            (valid_top - crop_top) as usize,
            (valid_right - valid_left) as usize,
            (valid_bottom - valid_top) as usize,
        ),
        out_width,
        out_height,
        flip,
        crop_first: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(crop: Crop) -> TransformSpec {
        TransformSpec {
            resize_shorter: Some(256),
            resize: None,
            crop,
            flip_probability: 0.0,
            gray: false,
            dct_scaling: false,
            max_pixels: crate::image::error::DEFAULT_MAX_PIXELS,
        }
    }

    #[test]
    fn shorter_side_matches_torchvision() {
        assert_eq!(shorter_side_size(500, 375, 256), (341, 256));
        assert_eq!(shorter_side_size(375, 500, 256), (256, 341));
        assert_eq!(shorter_side_size(1, 1, 256), (256, 256));
    }

    #[test]
    fn center_crop_after_resize() {
        let plan = plan(&spec(Crop::Center { width: 224, height: 224 }), 500, 375, 0).unwrap();
        // Resized to 341x256: left = round(58.5) = 58 (ties to even), top = 16.
        assert_eq!(plan.target, (0, 0, 224, 224));
        let (left, top, width, height) = plan.source;
        assert!((left - 58.0 * 500.0 / 341.0).abs() < 1e-9 && (top - 16.0 * 375.0 / 256.0).abs() < 1e-9);
        assert!((width - 224.0 * 500.0 / 341.0).abs() < 1e-9 && (height - 224.0 * 375.0 / 256.0).abs() < 1e-9);
    }

    #[test]
    fn cover_keeps_the_largest_region_of_the_output_shape() {
        let mut cover = spec(Crop::Cover { width: 1344, height: 768, random: false });
        cover.resize_shorter = None;
        // A 4:3 photo into a 7:4 bucket: its full width, the middle 1000 / 1.75 rows.
        let centred = plan(&cover, 1000, 750, 0).unwrap();
        assert_eq!(centred.target, (0, 0, 1344, 768));
        let (left, top, width, height) = centred.source;
        assert!((width - 1000.0).abs() < 1e-9 && (height - 1000.0 * 768.0 / 1344.0).abs() < 1e-9);
        assert!(left.abs() < 1e-9 && (top - (750.0 - height) / 2.0).abs() < 1e-9);
        // Random placement stays inside the image, and moves only along the overhanging axis.
        for seed in 0..50 {
            let random = TransformSpec { crop: Crop::Cover { width: 1344, height: 768, random: true }, ..cover };
            let (left, top, width, height) = plan(&random, 1000, 750, seed).unwrap().source;
            assert!(left.abs() < 1e-9 && top >= 0.0 && top + height <= 750.0 + 1e-9 && (width - 1000.0).abs() < 1e-9);
        }
    }

    #[test]
    fn center_crop_larger_than_the_image_pads() {
        let mut padded = spec(Crop::Center { width: 8, height: 4 });
        padded.resize_shorter = None;
        let plan = plan(&padded, 4, 2, 0).unwrap();
        assert_eq!(plan.target, (2, 1, 4, 2));
        assert_eq!(plan.source, (0.0, 0.0, 4.0, 2.0));
    }

    #[test]
    fn a_center_crop_larger_than_the_image_pads_as_torchvision_does() {
        // torchvision pads (crop - size) // 2 before: 1 of 3 extra pixels, not round(1.5) = 2.
        assert_eq!(center_crop_start(5, 8), -1);
        assert_eq!(center_crop_start(3, 8), -2);
        assert_eq!(center_crop_start(7, 8), 0);
        // Inside the image: round half to even, (341 - 224) / 2 = 58.5 -> 58.
        assert_eq!(center_crop_start(341, 224), 58);
    }

    #[test]
    fn random_resized_crop_stays_inside_and_is_seeded() {
        let crop = Crop::RandomResized { width: 224, height: 224, scale: (0.08, 1.0), ratio: (3.0 / 4.0, 4.0 / 3.0) };
        let random = TransformSpec { resize_shorter: None, ..spec(crop) };
        for seed in 0..500 {
            let plan = plan(&random, 500, 375, seed).unwrap();
            let (left, top, width, height) = plan.source;
            assert!(left >= 0.0 && top >= 0.0 && left + width <= 500.0 && top + height <= 375.0);
            let area = width * height / (500.0 * 375.0);
            assert!(area <= 1.0 + 1e-9);
            assert_eq!(plan, super::plan(&random, 500, 375, seed).unwrap());
        }
        assert_ne!(plan(&random, 500, 375, 1).unwrap(), plan(&random, 500, 375, 2).unwrap());
    }

    #[test]
    fn the_fallback_box_rounds_half_to_even_as_torchvision_does() {
        // 70x417 with ratios from 0.224: no draw fits, so the box is the whole width and
        // 70 / 0.224 = 312.5 rows, which Python's round (and so torchvision) makes 312.
        let crop = Crop::RandomResized { width: 10, height: 9, scale: (1.0, 1.0), ratio: (0.224, 1.0) };
        let plan = plan(&TransformSpec { resize_shorter: None, ..spec(crop) }, 70, 417, 0).unwrap();
        assert_eq!((plan.source.2, plan.source.3), (70.0, 312.0));
    }

    #[test]
    fn flip_probability_is_respected() {
        let mut flipping = spec(Crop::None);
        flipping.flip_probability = 0.5;
        let flips = (0..2000).filter(|&seed| plan(&flipping, 10, 10, seed).unwrap().flip).count();
        assert!((850..1150).contains(&flips), "{flips} flips of 2000");
    }

    #[test]
    fn bad_specs_are_refused() {
        let mut bad = spec(Crop::None);
        bad.resize = Some((3, 3));
        assert!(bad.validate().is_err());
        assert!(spec(Crop::RandomResized { width: 2, height: 2, scale: (0.5, 0.1), ratio: (1.0, 1.0) }).validate().is_err());
        assert!(spec(Crop::Center { width: 0, height: 3 }).validate().is_err());
    }
}
