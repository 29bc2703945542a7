//! One image, bytes to output: read the header, plan the geometry, decode (shrunk in the DCT
//! domain when allowed), resize the planned region with an antialiasing filter, write.

use std::cell::RefCell;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

use super::decode::{self, Format};
use super::error::{ImageError, ImageResult};
use super::geometry::{self, Plan, TransformSpec};
use super::jpeg::{Region, CUT_EDGE};
use super::output::{self, OutputSpec, Placement, Slot};

thread_local! {
    // A resizer keeps its convolution buffers between calls; one per thread, never shared.
    static RESIZER: RefCell<Resizer> = RefCell::new(Resizer::new());
    // Decoded and resized pixels of the last image, kept for their allocations.
    static SCRATCH: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// The DCT shrink factor (1, 2, 4 or 8) that still leaves the source region at least as large
/// as its target, so the final resize only ever shrinks.
fn dct_shrink(plan: &Plan) -> usize {
    let downscale = plan.downscale();
    [8, 4, 2].into_iter().find(|&factor| downscale >= factor as f64).unwrap_or(1)
}

/// Size of the output for `data` under `spec`: (width, height, channels).
pub fn output_shape(data: &[u8], spec: &TransformSpec, seed: u64) -> ImageResult<(usize, usize, usize)> {
    let header = decode::read_header(data, spec.max_pixels)?;
    let plan = geometry::plan(spec, header.width, header.height, seed)?;
    Ok((plan.out_width, plan.out_height, if spec.gray { 1 } else { 3 }))
}

/// Decode and transform one image into `slot`, which must hold exactly the planned output.
///
/// Returns the output's (width, height).
pub fn transform_into(
    data: &[u8],
    spec: &TransformSpec,
    output_spec: &OutputSpec,
    seed: u64,
    expected_size: Option<(usize, usize)>,
    slot: &mut Slot<'_>,
) -> ImageResult<(usize, usize)> {
    let header = decode::read_header(data, spec.max_pixels)?;
    let plan = geometry::plan(spec, header.width, header.height, seed)?;
    let channels = if spec.gray { 1 } else { 3 };
    if let Some((width, height)) = expected_size {
        if (width, height) != (plan.out_width, plan.out_height) {
            return Err(ImageError::Transform(format!(
                "output would be {}x{}, the batch holds {width}x{height}",
                plan.out_width, plan.out_height
            )));
        }
    }
    if slot.len() != plan.out_width * plan.out_height * channels {
        return Err(ImageError::Transform(format!(
            "output slot holds {} values, the image needs {}",
            slot.len(),
            plan.out_width * plan.out_height * channels
        )));
    }
    let (target_left, target_top, target_width, target_height) = plan.target;
    if target_width == 0 || target_height == 0 {
        slot.fill_zero();
        return Ok((plan.out_width, plan.out_height));
    }
    let is_jpeg = header.format == Format::Jpeg;
    let shrink = if spec.dct_scaling && is_jpeg { dct_shrink(&plan) } else { 1 };
    // The decoded image may be smaller than the header's size (DCT scaling): scale the region.
    let scale_x = header.width.div_ceil(shrink) as f64 / header.width as f64;
    let scale_y = header.height.div_ceil(shrink) as f64 / header.height as f64;
    let (left, top, width, height) = plan.source;
    let scaled = (left * scale_x, top * scale_y, width * scale_x, height * scale_y);
    let wanted = is_jpeg.then(|| needed_pixels(scaled, (target_width, target_height), plan.crop_first));
    let (decode_buffer, mut resized) = SCRATCH.with(|scratch| std::mem::take(&mut *scratch.borrow_mut()));
    let part = decode::decode_with_header(data, &header, spec.gray, shrink, wanted, decode_buffer)?;
    // Where the region lies in the decoded part (the whole image, or the rows and iMCU columns
    // around the region).
    let region = (scaled.0 - part.left as f64, scaled.1 - part.top as f64, scaled.2, scaled.3);
    let image = part.image;
    let direct = matches!(slot, Slot::U8(_))
        && output_spec.layout == output::Layout::Hwc
        && !plan.flip
        && (target_width, target_height) == (plan.out_width, plan.out_height);
    if direct {
        // uint8 HWC covering the whole slot: resize straight into the caller's memory.
        if let Slot::U8(out) = slot {
            resize_region(&image, region, plan.crop_first, target_width, target_height, out)?;
        }
        SCRATCH.with(|scratch| *scratch.borrow_mut() = (image.pixels, resized));
        return Ok((plan.out_width, plan.out_height));
    }
    resized.resize(target_width * target_height * channels, 0);
    resize_region(&image, region, plan.crop_first, target_width, target_height, &mut resized)?;
    let placement = Placement {
        left: target_left,
        top: target_top,
        width: target_width,
        height: target_height,
        out_width: plan.out_width,
        out_height: plan.out_height,
        channels,
        flip: plan.flip,
    };
    output::write(&resized, &placement, output_spec, slot);
    SCRATCH.with(|scratch| *scratch.borrow_mut() = (image.pixels, resized));
    Ok((plan.out_width, plan.out_height))
}

/// The pixels a resize of `region` (in decoded-image pixels) to `target` size reads: the region
/// itself when it is cut out first, else widened by the filter's reach (its support, the
/// downscale factor, each side), plus a pixel for rounding and the cut edge, whose pixels a
/// partial decode may give differently (`jpeg::CUT_EDGE`).
fn needed_pixels(region: (f64, f64, f64, f64), target: (usize, usize), crop_first: bool) -> Region {
    let (left, top, width, height) = region;
    let edge = 1.0 + CUT_EDGE as f64;
    let reach = |size: f64, target: usize| if crop_first { edge } else { (size / target as f64).max(1.0).ceil() + edge };
    let (reach_x, reach_y) = (reach(width, target.0), reach(height, target.1));
    let region_left = (left - reach_x).floor().max(0.0);
    let region_top = (top - reach_y).floor().max(0.0);
    Region {
        left: region_left as usize,
        top: region_top as usize,
        width: ((left + width + reach_x).ceil() - region_left) as usize,
        height: ((top + height + reach_y).ceil() - region_top) as usize,
    }
}

thread_local! {
    // The cut-out region of a crop-first resize, kept for its allocation.
    static CUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Resample `region` (left, top, width, height in `image` pixels) to `width` x `height` pixels
/// in `target` (exactly that many bytes). With `crop_first`, the whole-pixel box around the
/// region is cut out first, so the filter's support stops at the box as torchvision's
/// `resized_crop` (crop, then resize) does, instead of reading the neighbouring pixels.
fn resize_region(
    image: &decode::Decoded,
    region: (f64, f64, f64, f64),
    crop_first: bool,
    width: usize,
    height: usize,
    target: &mut [u8],
) -> ImageResult<()> {
    let (left, top, region_width, region_height) = region;
    let box_left = left.floor().max(0.0) as usize;
    let box_top = top.floor().max(0.0) as usize;
    let box_right = ((left + region_width).ceil() as usize).min(image.width);
    let box_bottom = ((top + region_height).ceil() as usize).min(image.height);
    let is_whole_image = (box_left, box_top, box_right, box_bottom) == (0, 0, image.width, image.height);
    if !crop_first || is_whole_image || box_right <= box_left || box_bottom <= box_top {
        return resize_within(image, region, width, height, target);
    }
    CUT.with(|cut| {
        let mut pixels = std::mem::take(&mut *cut.borrow_mut());
        let channels = image.channels;
        let row_len = (box_right - box_left) * channels;
        pixels.clear();
        for row in box_top..box_bottom {
            let start = (row * image.width + box_left) * channels;
            pixels.extend_from_slice(&image.pixels[start..start + row_len]);
        }
        let boxed = decode::Decoded { width: box_right - box_left, height: box_bottom - box_top, channels, pixels };
        let shifted = (left - box_left as f64, top - box_top as f64, region_width, region_height);
        let result = resize_within(&boxed, shifted, width, height, target);
        *cut.borrow_mut() = boxed.pixels;
        result
    })
}

/// `start` and `length` along an axis of `size` pixels, with the rounding of the plan's arithmetic
/// (a region that ends at the image's edge computes as 509.00000000000006 of 509) taken off; None
/// when the region really leaves the image.
fn within_axis(start: f64, length: f64, size: usize) -> Option<(f64, f64)> {
    let size = size as f64;
    let slack = 1e-6 * size.max(1.0);
    if !(start >= -slack && length > 0.0 && start + length <= size + slack) {
        return None;
    }
    let start = start.clamp(0.0, size);
    Some((start, (start + length).min(size) - start))
}

/// Resample `region` of `image`, reading whatever pixels of `image` the filter reaches.
fn resize_within(image: &decode::Decoded, region: (f64, f64, f64, f64), width: usize, height: usize, target: &mut [u8]) -> ImageResult<()> {
    let channels = image.channels;
    let (horizontal, vertical) = (within_axis(region.0, region.2, image.width), within_axis(region.1, region.3, image.height));
    let (Some((left, region_width)), Some((top, region_height))) = (horizontal, vertical) else {
        return Err(ImageError::Transform(format!(
            "the region {region:?} to resize is not inside the decoded {}x{} pixels",
            image.width, image.height
        )));
    };
    let is_whole_pixels = left.fract() == 0.0 && top.fract() == 0.0;
    if is_whole_pixels && region_width == width as f64 && region_height == height as f64 {
        // No resampling: copy the rows of the region.
        let (left, top) = (left as usize, top as usize);
        let row_len = width * channels;
        for (row, target_row) in target.chunks_exact_mut(row_len).enumerate() {
            let start = ((top + row) * image.width + left) * channels;
            target_row.copy_from_slice(&image.pixels[start..start + row_len]);
        }
        return Ok(());
    }
    let pixel_type = if channels == 1 { PixelType::U8 } else { PixelType::U8x3 };
    let resize_error = |error: &dyn std::fmt::Display| ImageError::Transform(format!("resize failed: {error}"));
    let source = ImageRef::new(image.width as u32, image.height as u32, &image.pixels, pixel_type).map_err(|error| resize_error(&error))?;
    let mut target = Image::from_slice_u8(width as u32, height as u32, target, pixel_type).map_err(|error| resize_error(&error))?;
    // Bilinear convolution with the support widened by the scale factor: Pillow's (and so
    // torchvision's antialias=True) resize.
    let options =
        ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Bilinear)).crop(left, top, region_width, region_height);
    RESIZER.with(|resizer| resizer.borrow_mut().resize(&source, &mut target, &options)).map_err(|error| resize_error(&error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::error::DEFAULT_MAX_PIXELS;
    use crate::image::geometry::Crop;
    use crate::image::jpeg::tests::encode_test_jpeg;

    /// The output of `spec` computed from a whole-image decode: what `transform_into` must give
    /// when it decodes only the needed region.
    fn from_whole_image(data: &[u8], spec: &TransformSpec, seed: u64) -> Vec<u8> {
        let header = decode::read_header(data, DEFAULT_MAX_PIXELS).unwrap();
        let plan = geometry::plan(spec, header.width, header.height, seed).unwrap();
        let shrink = if spec.dct_scaling { dct_shrink(&plan) } else { 1 };
        let part = decode::decode_with_header(data, &header, false, shrink, None, Vec::new()).unwrap();
        let scale_x = part.image.width as f64 / header.width as f64;
        let scale_y = part.image.height as f64 / header.height as f64;
        let (left, top, width, height) = plan.source;
        let region = (left * scale_x, top * scale_y, width * scale_x, height * scale_y);
        let mut out = vec![0u8; plan.out_width * plan.out_height * 3];
        resize_region(&part.image, region, plan.crop_first, plan.out_width, plan.out_height, &mut out).unwrap();
        out
    }

    #[test]
    fn region_decoding_changes_no_output_pixel() {
        let data = encode_test_jpeg(517, 389);
        let output_spec = OutputSpec { layout: output::Layout::Hwc, mean: [0.0; 3], std: [1.0; 3] };
        let center = TransformSpec {
            resize_shorter: Some(256),
            resize: None,
            crop: Crop::Center { width: 224, height: 224 },
            flip_probability: 0.0,
            gray: false,
            dct_scaling: false,
            max_pixels: DEFAULT_MAX_PIXELS,
        };
        let random = TransformSpec {
            resize_shorter: None,
            crop: Crop::RandomResized { width: 64, height: 48, scale: (0.08, 1.0), ratio: (0.75, 4.0 / 3.0) },
            ..center
        };
        let small_center = TransformSpec { resize_shorter: Some(60), crop: Crop::Center { width: 48, height: 48 }, ..center };
        for spec in [center, random, small_center] {
            for dct_scaling in [false, true] {
                let spec = TransformSpec { dct_scaling, ..spec };
                for seed in 0..40 {
                    let (width, height) = spec.fixed_output_size().unwrap();
                    let mut out = vec![0u8; width * height * 3];
                    transform_into(&data, &spec, &output_spec, seed, None, &mut Slot::U8(&mut out)).unwrap();
                    assert!(out == from_whole_image(&data, &spec, seed), "{spec:?}, seed {seed}");
                }
            }
        }
    }
}
