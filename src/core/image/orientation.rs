//! EXIF orientation: read the tag, and turn decoded pixels upright the way viewers (and Pillow's
//! `ImageOps.exif_transpose`) do.

/// Orientation tag value 1..=8 from raw EXIF data (starting at the TIFF header); 1 when absent
/// or unreadable, since a broken EXIF block must not fail an otherwise good image.
pub fn read_orientation(exif_tiff: &[u8]) -> u8 {
    let reader = exif::Reader::new();
    let Ok(data) = reader.read_raw(exif_tiff.to_vec()) else {
        return 1;
    };
    data.get_field(exif::Tag::Orientation, exif::In::PRIMARY)
        .and_then(|field| field.value.get_uint(0))
        .filter(|value| (1..=8).contains(value))
        .map_or(1, |value| value as u8)
}

/// Whether an orientation swaps width and height (the transposing ones, 5 to 8).
pub fn swaps_axes(orientation: u8) -> bool {
    orientation >= 5
}

/// Apply an orientation to a `width` x `height` image with `channels` interleaved channels.
/// Returns the upright pixels and their width and height.
pub fn apply(pixels: Vec<u8>, width: usize, height: usize, channels: usize, orientation: u8) -> (Vec<u8>, usize, usize) {
    if orientation <= 1 || orientation > 8 {
        return (pixels, width, height);
    }
    let (out_width, out_height) = if swaps_axes(orientation) { (height, width) } else { (width, height) };
    let mut out = vec![0u8; pixels.len()];
    for y in 0..height {
        for x in 0..width {
            // Where source pixel (x, y) lands in the upright image.
            let (ox, oy) = match orientation {
                2 => (width - 1 - x, y),
                3 => (width - 1 - x, height - 1 - y),
                4 => (x, height - 1 - y),
                5 => (y, x),
                6 => (height - 1 - y, x),
                7 => (height - 1 - y, width - 1 - x),
                8 => (y, width - 1 - x),
                _ => unreachable!(),
            };
            let source = (y * width + x) * channels;
            let target = (oy * out_width + ox) * channels;
            out[target..target + channels].copy_from_slice(&pixels[source..source + channels]);
        }
    }
    (out, out_width, out_height)
}

#[cfg(test)]
mod tests {
    use super::*;

    // A 3x2 image whose pixels are numbered 0..6 row by row.
    fn numbered() -> Vec<u8> {
        (0..6).collect()
    }

    #[test]
    fn identity_and_mirror() {
        assert_eq!(apply(numbered(), 3, 2, 1, 1), (numbered(), 3, 2));
        assert_eq!(apply(numbered(), 3, 2, 1, 2).0, vec![2, 1, 0, 5, 4, 3]);
        assert_eq!(apply(numbered(), 3, 2, 1, 3).0, vec![5, 4, 3, 2, 1, 0]);
        assert_eq!(apply(numbered(), 3, 2, 1, 4).0, vec![3, 4, 5, 0, 1, 2]);
    }

    #[test]
    fn transposing_orientations_swap_axes() {
        // 6 = rotate 90 degrees clockwise to view upright.
        let (pixels, width, height) = apply(numbered(), 3, 2, 1, 6);
        assert_eq!((width, height), (2, 3));
        assert_eq!(pixels, vec![3, 0, 4, 1, 5, 2]);
        // 8 = rotate 90 degrees counter-clockwise.
        assert_eq!(apply(numbered(), 3, 2, 1, 8).0, vec![2, 5, 1, 4, 0, 3]);
        assert_eq!(apply(numbered(), 3, 2, 1, 5).0, vec![0, 3, 1, 4, 2, 5]);
        assert_eq!(apply(numbered(), 3, 2, 1, 7).0, vec![5, 2, 4, 1, 3, 0]);
    }

    #[test]
    fn garbage_exif_means_upright() {
        assert_eq!(read_orientation(b"not a tiff header"), 1);
        assert_eq!(read_orientation(&[]), 1);
    }
}
