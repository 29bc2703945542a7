//! Colour conversions shared by the decoders: RGB to gray (PNG, WebP, JPEG) and Adobe CMYK to RGB
//! (JPEG), kept apart so each decoder depends on them and not on the other.

/// ITU-R 601-2 luma, as Pillow's `convert("L")`.
pub fn rgb_to_gray(rgb: &[u8]) -> Vec<u8> {
    rgb.chunks_exact(3).map(|p| ((p[0] as u32 * 19595 + p[1] as u32 * 38470 + p[2] as u32 * 7471 + 0x8000) >> 16) as u8).collect()
}

/// Adobe CMYK JPEGs store inverted ink values (as libjpeg hands them back); R = C * K / 255 on
/// those, as Pillow's CMYK to RGB conversion.
pub fn cmyk_to_rgb(cmyk: &[u8]) -> Vec<u8> {
    let mut rgb = Vec::with_capacity(cmyk.len() / 4 * 3);
    for pixel in cmyk.chunks_exact(4) {
        let k = pixel[3] as u32;
        for &ink in &pixel[..3] {
            rgb.push(((ink as u32 * k + 127) / 255) as u8);
        }
    }
    rgb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luma_weights_match_pillow() {
        assert_eq!(rgb_to_gray(&[255, 255, 255, 0, 0, 0, 255, 0, 0]), vec![255, 0, 76]);
    }

    #[test]
    fn adobe_cmyk_is_inverted_ink_times_black() {
        assert_eq!(cmyk_to_rgb(&[255, 0, 128, 255, 255, 255, 255, 0]), vec![255, 0, 128, 0, 0, 0]);
    }
}
