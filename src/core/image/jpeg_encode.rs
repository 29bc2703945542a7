//! JPEG encoding through libjpeg-turbo's TurboJPEG 3 API, with the settings Pillow uses by default
//! (4:2:0 chroma, the accurate integer DCT, standard Huffman tables). stoker reads images rather
//! than writes them; this exists so `stoker bench` can make its test images on a machine with
//! nothing but stoker installed (no Pillow).

use std::ffi::{c_int, CStr};

use turbojpeg_sys as tj;

/// Encode `pixels` (`height` rows of `width` RGB triplets, packed) at `quality` (1..=100).
pub fn encode_rgb(pixels: &[u8], width: usize, height: usize, quality: u8) -> Result<Vec<u8>, String> {
    if width == 0 || height == 0 || pixels.len() != width * height * 3 {
        return Err(format!("{} bytes are not {width}x{height} RGB pixels", pixels.len()));
    }
    if !(1..=100).contains(&quality) {
        return Err(format!("quality must be 1..100, got {quality}"));
    }
    let (Ok(width), Ok(height)) = (c_int::try_from(width), c_int::try_from(height)) else {
        return Err(format!("{width}x{height} is too large for JPEG"));
    };
    // SAFETY: tj3Init has no preconditions; a null result (out of memory) is checked next.
    let handle = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_COMPRESS as c_int) };
    if handle.is_null() {
        return Err("libjpeg-turbo could not allocate a compressor".into());
    }
    let mut output: *mut u8 = std::ptr::null_mut();
    let mut size: tj::size_t = 0;
    // SAFETY: `handle` is live until tj3Destroy below. `pixels` holds exactly width x height x 3
    // bytes (checked above) and is only read. With `output` null and TJPARAM_NOREALLOC unset,
    // tj3Compress8 allocates the output with tj3Alloc and stores its pointer and size, which we
    // copy out and release with tj3Free, once, whatever the result.
    unsafe {
        let mut code = tj::tj3Set(handle, tj::TJPARAM_TJPARAM_QUALITY as c_int, c_int::from(quality));
        code |= tj::tj3Set(handle, tj::TJPARAM_TJPARAM_SUBSAMP as c_int, tj::TJSAMP_TJSAMP_420 as c_int);
        if code == 0 {
            code = tj::tj3Compress8(handle, pixels.as_ptr(), width, 0, height, tj::TJPF_TJPF_RGB as c_int, &mut output, &mut size);
        }
        let result = if code == 0 && !output.is_null() {
            Ok(std::slice::from_raw_parts(output, size as usize).to_vec())
        } else {
            Err(CStr::from_ptr(tj::tj3GetErrorStr(handle)).to_string_lossy().into_owned())
        };
        tj::tj3Free(output.cast());
        tj::tj3Destroy(handle);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::jpeg::info;

    #[test]
    fn an_encoded_image_reads_back_at_its_size() {
        let pixels: Vec<u8> = (0..40 * 30 * 3).map(|index| (index % 251) as u8).collect();
        let encoded = encode_rgb(&pixels, 40, 30, 90).unwrap();
        assert_eq!(&encoded[..2], &[0xFF, 0xD8]);
        let info = info(&encoded).unwrap();
        assert_eq!((info.width, info.height), (40, 30));
    }

    #[test]
    fn wrong_sizes_and_qualities_are_errors() {
        assert!(encode_rgb(&[0; 10], 2, 2, 90).is_err());
        assert!(encode_rgb(&[0; 12], 2, 2, 0).is_err());
        assert!(encode_rgb(&[], 0, 0, 90).is_err());
    }
}
