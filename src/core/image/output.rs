//! Writing resized pixels into their place in the output: layout (HWC or CHW), dtype (uint8,
//! float32, float16), normalization with mean/std, horizontal flip and zero padding, in one pass.

use half::f16;

/// Memory layout of one image in the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Height, width, channels (numpy/PIL order).
    Hwc,
    /// Channels, height, width (PyTorch order).
    Chw,
}

/// How pixels are stored: layout, and for float outputs `(value / 255 - mean) / std` per channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutputSpec {
    pub layout: Layout,
    pub mean: [f32; 3],
    pub std: [f32; 3],
}

/// One image's place in the output, typed by dtype.
pub enum Slot<'a> {
    U8(&'a mut [u8]),
    F32(&'a mut [f32]),
    F16(&'a mut [f16]),
}

impl Slot<'_> {
    pub fn len(&self) -> usize {
        match self {
            Slot::U8(slice) => slice.len(),
            Slot::F32(slice) => slice.len(),
            Slot::F16(slice) => slice.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn fill_zero(&mut self) {
        match self {
            Slot::U8(slice) => slice.fill(0),
            Slot::F32(slice) => slice.fill(0.0),
            Slot::F16(slice) => slice.fill(f16::ZERO),
        }
    }
}

/// Where a `pixels` block (`width` x `height`, `channels` interleaved) goes in an output image of
/// `out_width` x `out_height`.
pub struct Placement {
    pub left: usize,
    pub top: usize,
    pub width: usize,
    pub height: usize,
    pub out_width: usize,
    pub out_height: usize,
    pub channels: usize,
    pub flip: bool,
}

/// Copy `pixels` into `slot` at `placement`, converting as `spec` says; the rest of the slot is
/// zero. `slot` must hold exactly out_width * out_height * channels values (checked by callers).
pub fn write(pixels: &[u8], placement: &Placement, spec: &OutputSpec, slot: &mut Slot<'_>) {
    let covers_all = placement.width == placement.out_width && placement.height == placement.out_height;
    if !covers_all {
        slot.fill_zero();
    }
    match slot {
        Slot::U8(out) if spec.layout == Layout::Hwc && !placement.flip => copy_rows(pixels, placement, out),
        Slot::U8(out) => place(pixels, placement, spec.layout, out, |_, value| value),
        Slot::F32(out) => {
            let (scale, offset) = affine(spec);
            place(pixels, placement, spec.layout, out, |channel, value| value as f32 * scale[channel] + offset[channel])
        }
        Slot::F16(out) => {
            let (scale, offset) = affine(spec);
            place(pixels, placement, spec.layout, out, |channel, value| f16::from_f32(value as f32 * scale[channel] + offset[channel]))
        }
    }
}

fn copy_rows(pixels: &[u8], at: &Placement, out: &mut [u8]) {
    let row_len = at.width * at.channels;
    for (row, source_row) in pixels.chunks_exact(row_len).take(at.height).enumerate() {
        let start = ((at.top + row) * at.out_width + at.left) * at.channels;
        out[start..start + row_len].copy_from_slice(source_row);
    }
}

/// `(v / 255 - mean) / std` as `v * scale + offset`.
fn affine(spec: &OutputSpec) -> ([f32; 3], [f32; 3]) {
    let mut scale = [0.0; 3];
    let mut offset = [0.0; 3];
    for channel in 0..3 {
        scale[channel] = 1.0 / (255.0 * spec.std[channel]);
        offset[channel] = -spec.mean[channel] / spec.std[channel];
    }
    (scale, offset)
}

fn place<T: Copy>(pixels: &[u8], at: &Placement, layout: Layout, out: &mut [T], convert: impl Fn(usize, u8) -> T) {
    let channels = at.channels;
    let row_len = at.width * channels;
    let plane = at.out_width * at.out_height;
    for (row, source_row) in pixels.chunks_exact(row_len).take(at.height).enumerate() {
        let out_row = at.top + row;
        match layout {
            Layout::Hwc => {
                let start = (out_row * at.out_width + at.left) * channels;
                let target = &mut out[start..start + row_len];
                if at.flip {
                    // The placed block mirrors inside its own span of the row.
                    let mirrored = (at.out_width - at.left - at.width) * channels;
                    let start = out_row * at.out_width * channels + mirrored;
                    let target = &mut out[start..start + row_len];
                    for (pixel, slot) in source_row.chunks_exact(channels).zip(target.chunks_exact_mut(channels).rev()) {
                        for channel in 0..channels {
                            slot[channel] = convert(channel, pixel[channel]);
                        }
                    }
                } else {
                    for (channel_index, (value, slot)) in source_row.iter().zip(target.iter_mut()).enumerate() {
                        *slot = convert(channel_index % channels, *value);
                    }
                }
            }
            Layout::Chw => {
                // Columns this row's pixels land in, in source order.
                let first = if at.flip { at.out_width - at.left - at.width } else { at.left };
                for channel in 0..channels {
                    let start = channel * plane + out_row * at.out_width + first;
                    let target = &mut out[start..start + at.width];
                    let pixels = source_row.chunks_exact(channels);
                    if at.flip {
                        for (pixel, slot) in pixels.zip(target.iter_mut().rev()) {
                            *slot = convert(channel, pixel[channel]);
                        }
                    } else {
                        for (pixel, slot) in pixels.zip(target.iter_mut()) {
                            *slot = convert(channel, pixel[channel]);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(width: usize, height: usize, flip: bool) -> Placement {
        Placement { left: 0, top: 0, width, height, out_width: width, out_height: height, channels: 3, flip }
    }

    #[test]
    fn chw_float_is_normalized_per_channel() {
        let pixels = [255u8, 0, 51, 0, 255, 102];
        let spec = OutputSpec { layout: Layout::Chw, mean: [0.5, 0.5, 0.0], std: [0.5, 0.5, 1.0] };
        let mut out = vec![0f32; 6];
        write(&pixels, &placement(2, 1, false), &spec, &mut Slot::F32(&mut out));
        let expected = [1.0, -1.0, -1.0, 1.0, 0.2, 0.4];
        for (got, want) in out.iter().zip(expected) {
            assert!((got - want).abs() < 1e-6, "{out:?}");
        }
    }

    #[test]
    fn flip_mirrors_columns() {
        let pixels = [1u8, 1, 1, 2, 2, 2, 3, 3, 3];
        let spec = OutputSpec { layout: Layout::Hwc, mean: [0.0; 3], std: [1.0; 3] };
        let mut out = vec![0u8; 9];
        write(&pixels, &placement(3, 1, true), &spec, &mut Slot::U8(&mut out));
        assert_eq!(out, vec![3, 3, 3, 2, 2, 2, 1, 1, 1]);
    }

    #[test]
    fn padding_is_zero() {
        let pixels = [9u8; 3];
        let at = Placement { left: 1, top: 1, width: 1, height: 1, out_width: 3, out_height: 3, channels: 3, flip: false };
        let spec = OutputSpec { layout: Layout::Hwc, mean: [0.0; 3], std: [1.0; 3] };
        let mut out = vec![7u8; 27];
        write(&pixels, &at, &spec, &mut Slot::U8(&mut out));
        assert_eq!(out.iter().filter(|&&v| v == 9).count(), 3);
        assert_eq!(out.iter().filter(|&&v| v == 0).count(), 24);
    }
}
