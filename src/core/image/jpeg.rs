//! JPEG through libjpeg-turbo's TurboJPEG 3 API (the decoder Pillow, simplejpeg and OpenCV use),
//! built from the source vendored in `turbojpeg-sys` with its SIMD kernels (NASM on x86-64).
//!
//! Two savings come from its API: DCT-domain scaling decodes at 1/2, 1/4 or 1/8 size, skipping
//! most of the inverse DCT and colour conversion; a cropping region decodes only the iMCU columns
//! (`jpeg_crop_scanline`) and rows (`jpeg_skip_scanlines`) a crop needs. A whole 500x375 photo
//! decodes about as fast as with zune-jpeg 0.4 (0.545 against 0.565 ms); decoding less is the
//! gain: 1.15x to 1.3x at ImageNet sizes, 1.4x to 1.9x at 2048x1536 (`benchmarks/images/image_decode.py`).

use std::cell::RefCell;
use std::ffi::{c_int, CStr};

use turbojpeg_sys as tj;

use super::color;
use super::error::{ImageError, ImageResult};

/// A JPEG's header, as stored (before any EXIF orientation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegInfo {
    pub width: usize,
    pub height: usize,
    /// Chrominance subsampling (`TJSAMP_*`); negative when libjpeg-turbo cannot name it.
    subsampling: c_int,
    colorspace: c_int,
    /// Lossless JPEGs (SOF3) cannot be scaled or cropped while decoding.
    lossless: bool,
}

impl JpegInfo {
    /// Whether a decode can be limited to a region (cropping needs a known iMCU size).
    pub fn can_crop(&self) -> bool {
        !self.lossless && (0..7).contains(&self.subsampling)
    }

    /// Whether DCT-domain scaling applies.
    pub fn can_scale(&self) -> bool {
        !self.lossless
    }

    /// Width in pixels of one iMCU column at `1 / shrink` scale: a cropping region must start on
    /// a multiple of it.
    pub fn column_width(&self, shrink: usize) -> usize {
        // turbojpeg.h's `tjMCUWidth`, indexed by `TJSAMP_*` (a `static` in the header, so not a
        // symbol we can link to): 4:4:4, 4:2:2, 4:2:0, gray, 4:4:0, 4:1:1, 4:4:1.
        const MCU_WIDTH: [usize; 7] = [8, 16, 16, 8, 8, 32, 8];
        MCU_WIDTH[self.subsampling.clamp(0, 6) as usize].div_ceil(shrink).max(1)
    }
}

/// A part of the image, in pixels of the (possibly shrunk) decoded image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub left: usize,
    pub top: usize,
    pub width: usize,
    pub height: usize,
}

/// Pixels along a cut edge of a region that may differ from a whole-image decode: libjpeg-turbo
/// upsamples chroma there without the neighbour beyond the cut.
pub const CUT_EDGE: usize = 1;

/// One TurboJPEG decompressor per thread: creating one allocates libjpeg's state.
struct Decompressor(tj::tjhandle);

impl Decompressor {
    fn new() -> Self {
        // SAFETY: tj3Init has no preconditions; a null result (out of memory) is checked by
        // every user through `handle()`.
        Decompressor(unsafe { tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as c_int) })
    }

    fn handle(&self) -> ImageResult<tj::tjhandle> {
        if self.0.is_null() {
            Err(jpeg_error("libjpeg-turbo could not allocate a decompressor"))
        } else {
            Ok(self.0)
        }
    }
}

impl Drop for Decompressor {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the handle came from tj3Init, is owned by this value alone and is
            // destroyed once, here.
            unsafe { tj::tj3Destroy(self.0) }
        }
    }
}

thread_local! {
    static DECOMPRESSOR: RefCell<Decompressor> = RefCell::new(Decompressor::new());
}

/// Run `work` with this thread's decompressor. A failed call can leave libjpeg inside a header
/// (a marker read but not consumed, e.g. after garbage), which would fail the next, good image
/// on this thread with the same error: after any error the decompressor is replaced.
fn with_decompressor<T>(work: impl FnOnce(tj::tjhandle) -> ImageResult<T>) -> ImageResult<T> {
    DECOMPRESSOR.with(|cell| {
        let result = work(cell.borrow().handle()?);
        if result.is_err() {
            *cell.borrow_mut() = Decompressor::new();
        }
        result
    })
}

pub fn jpeg_error(detail: impl ToString) -> ImageError {
    ImageError::Corrupt { format: "JPEG", detail: detail.to_string() }
}

/// The handle's last error or warning message.
fn last_message(handle: tj::tjhandle) -> String {
    // SAFETY: tj3GetErrorStr returns a pointer to a NUL-terminated string owned by the handle
    // (or a static one), valid until the next call on this handle; we copy it at once.
    unsafe { CStr::from_ptr(tj::tj3GetErrorStr(handle)) }.to_string_lossy().into_owned()
}

/// libjpeg warnings that lose no pixel data: stray bytes between markers, an unknown Adobe or
/// JFIF revision, a bad ICC marker, an odd progression (the coefficients are still all there).
/// Every other warning (a premature end, a bad Huffman code, a lost restart marker) means parts
/// of the image were filled with gray, which a loader must not deliver as data.
fn is_harmless_warning(message: &str) -> bool {
    ["extraneous bytes", "Adobe color transform", "JFIF revision", "ICC marker", "progression sequence"]
        .iter()
        .any(|harmless| message.contains(harmless))
}

/// Turn a TurboJPEG return code into a result, tolerating harmless warnings.
fn check(handle: tj::tjhandle, code: c_int) -> ImageResult<()> {
    if code == 0 {
        return Ok(());
    }
    let message = last_message(handle);
    // SAFETY: a live handle from tj3Init.
    let is_warning = unsafe { tj::tj3GetErrorCode(handle) } == tj::TJERR_TJERR_WARNING as c_int;
    if is_warning && is_harmless_warning(&message) {
        Ok(())
    } else {
        Err(jpeg_error(message.trim_start_matches("Corrupt JPEG data: ")))
    }
}

fn get(handle: tj::tjhandle, parameter: tj::TJPARAM) -> c_int {
    // SAFETY: a live handle from tj3Init; tj3Get only reads the handle's state.
    unsafe { tj::tj3Get(handle, parameter as c_int) }
}

/// Whether `data`'s markers reach a whole frame header (SOFn) before a scan, the end of the image
/// or the end of the data, walked as libjpeg walks them (bytes before a marker discarded, fill
/// bytes skipped, each segment skipped by its length).
///
/// TurboJPEG answers a datastream that ends before its frame header (3 bytes `FF D8 FF`, or
/// tables only) as a success and leaves the handle's size from the image before, so the thread's
/// previous image's size came back for it: such data never reaches the handle.
fn has_frame_header(data: &[u8]) -> bool {
    if !data.starts_with(&[0xFF, 0xD8]) {
        return false;
    }
    let mut position = 2;
    loop {
        while data.get(position).is_some_and(|&byte| byte != 0xFF) {
            position += 1;
        }
        while data.get(position) == Some(&0xFF) {
            position += 1;
        }
        let Some(&marker) = data.get(position) else { return false };
        position += 1;
        let length = || data.get(position..position + 2).map(|bytes| u16::from_be_bytes([bytes[0], bytes[1]]) as usize);
        match marker {
            0x00 => {}               // a stuffed 0xFF: not a marker
            0x01 | 0xD0..=0xD7 => {} // markers without a length
            0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => {
                return length().is_some_and(|length| length >= 8 && position + length <= data.len());
            }
            0xD8..=0xDA => return false, // another start (D8), the end (D9) or a scan (DA): no frame before it
            _ => match length() {
                Some(length) => position += length.max(2),
                None => return false,
            },
        }
    }
}

/// Read the header of `data` (dimensions, subsampling, colourspace) without decoding pixels.
fn read_header(handle: tj::tjhandle, data: &[u8]) -> ImageResult<JpegInfo> {
    if !has_frame_header(data) {
        return Err(jpeg_error("no image in the data (it ends before its frame header, or holds tables only)"));
    }
    // SAFETY: the pointer and length describe `data`, which libjpeg-turbo only reads, during
    // this call only.
    check(handle, unsafe { tj::tj3DecompressHeader(handle, data.as_ptr(), data.len() as _) })?;
    let info = JpegInfo {
        width: get(handle, tj::TJPARAM_TJPARAM_JPEGWIDTH).max(0) as usize,
        height: get(handle, tj::TJPARAM_TJPARAM_JPEGHEIGHT).max(0) as usize,
        subsampling: get(handle, tj::TJPARAM_TJPARAM_SUBSAMP),
        colorspace: get(handle, tj::TJPARAM_TJPARAM_COLORSPACE),
        lossless: get(handle, tj::TJPARAM_TJPARAM_LOSSLESS) == 1,
    };
    if info.width == 0 || info.height == 0 {
        // A truncated file, or tables without an image (an "abbreviated" datastream).
        return Err(jpeg_error("no image in the data (truncated, or tables only)"));
    }
    if get(handle, tj::TJPARAM_TJPARAM_PRECISION) > 8 {
        return Err(jpeg_error(format!("{}-bit samples are not supported (8-bit only)", get(handle, tj::TJPARAM_TJPARAM_PRECISION))));
    }
    Ok(info)
}

/// The header of `data`.
pub fn info(data: &[u8]) -> ImageResult<JpegInfo> {
    with_decompressor(|handle| read_header(handle, data))
}

/// Size of the image decoded at `1 / shrink` scale: libjpeg's `TJSCALED`, rounding up.
pub fn scaled_size(info: &JpegInfo, shrink: usize) -> (usize, usize) {
    (info.width.div_ceil(shrink), info.height.div_ceil(shrink))
}

/// Decode `data` at `1 / shrink` scale (1, 2, 4 or 8), only `region` of it when given (its left
/// edge must be a multiple of `column_width(shrink)`), into `pixels`' allocation.
///
/// Returns the pixels (RGB or, with `gray`, one channel; CMYK converted to RGB), their width and
/// height, and their channel count.
pub fn decode(
    data: &[u8],
    gray: bool,
    shrink: usize,
    region: Option<Region>,
    mut pixels: Vec<u8>,
) -> ImageResult<(Vec<u8>, usize, usize, usize)> {
    with_decompressor(|handle| {
        let info = read_header(handle, data)?;
        let shrink = if info.can_scale() { shrink } else { 1 };
        let factor = tj::tjscalingfactor { num: 1, denom: shrink as c_int };
        // SAFETY: a live handle whose header was just read, as both calls require.
        check(handle, unsafe { tj::tj3SetScalingFactor(handle, factor) })?;
        let (full_width, full_height) = scaled_size(&info, shrink);
        let region = region.filter(|_| info.can_crop()).unwrap_or(Region { left: 0, top: 0, width: full_width, height: full_height });
        let whole = region == Region { left: 0, top: 0, width: full_width, height: full_height };
        let cropping = if whole {
            tj::tjregion { x: 0, y: 0, w: 0, h: 0 }
        } else {
            tj::tjregion { x: region.left as c_int, y: region.top as c_int, w: region.width as c_int, h: region.height as c_int }
        };
        // SAFETY: as above; libjpeg-turbo checks the region against the scaled image and its
        // iMCU alignment and refuses a bad one with an error.
        check(handle, unsafe { tj::tj3SetCroppingRegion(handle, cropping) })?;
        let is_cmyk = info.colorspace == tj::TJCS_TJCS_CMYK as c_int || info.colorspace == tj::TJCS_TJCS_YCCK as c_int;
        let (format, channels) = match (is_cmyk, gray) {
            (true, _) => (tj::TJPF_TJPF_CMYK, 4),
            (false, true) => (tj::TJPF_TJPF_GRAY, 1),
            (false, false) => (tj::TJPF_TJPF_RGB, 3),
        };
        let (width, height) = (region.width, region.height);
        pixels.resize(width * height * channels, 0);
        let pitch = c_int::try_from(width * channels).map_err(|_| jpeg_error("row too wide"))?;
        // SAFETY: `data` is read-only input of `data.len()` bytes; `pixels` holds exactly
        // `height` rows of `pitch` bytes, which is what libjpeg-turbo writes for this scaling
        // factor, cropping region and pixel format (all set on this handle above, for this
        // header). Both buffers outlive the call and do not overlap.
        let code = unsafe { tj::tj3Decompress8(handle, data.as_ptr(), data.len() as _, pixels.as_mut_ptr(), pitch, format as c_int) };
        check(handle, code)?;
        Ok(match (is_cmyk, gray) {
            (true, false) => (color::cmyk_to_rgb(&pixels), width, height, 3),
            (true, true) => (color::rgb_to_gray(&color::cmyk_to_rgb(&pixels)), width, height, 1),
            _ => (pixels, width, height, channels),
        })
    })
}

/// The TIFF data of the first EXIF APP1 segment, found by walking the markers before the scan.
pub fn exif_segment(data: &[u8]) -> Option<&[u8]> {
    let mut position = 2; // after SOI
    while position + 4 <= data.len() {
        if data[position] != 0xFF {
            return None;
        }
        let marker = data[position + 1];
        match marker {
            0xFF => {
                position += 1; // fill byte
                continue;
            }
            0xD8 | 0x01 | 0xD0..=0xD7 => {
                position += 2; // markers without a length
                continue;
            }
            0xDA | 0xD9 => return None, // start of scan or end of image: no EXIF before it
            _ => {}
        }
        let length = u16::from_be_bytes([data[position + 2], data[position + 3]]) as usize;
        let body = data.get(position + 4..position + 2 + length)?;
        if marker == 0xE1 && body.starts_with(b"Exif\0\0") {
            return Some(&body[6..]);
        }
        position += 2 + length;
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A `width` x `height` RGB photo-like test image (smooth gradients plus texture), encoded
    /// by libjpeg-turbo at quality 90 with 4:2:0 chroma subsampling.
    pub(crate) fn encode_test_jpeg(width: usize, height: usize) -> Vec<u8> {
        let pixels: Vec<u8> = (0..height)
            .flat_map(|y| (0..width).flat_map(move |x| [(x * 255 / width) as u8, (y * 255 / height) as u8, ((x * 7 + y * 13) % 256) as u8]))
            .collect();
        // SAFETY: a fresh compressor handle, used and destroyed here; `pixels` holds `height`
        // rows of `width * 3` bytes as the call is told; libjpeg-turbo allocates `output` (we
        // start it null) and we free it with tj3Free after copying it.
        unsafe {
            let handle = tj::tj3Init(tj::TJINIT_TJINIT_COMPRESS as c_int);
            assert!(!handle.is_null());
            tj::tj3Set(handle, tj::TJPARAM_TJPARAM_QUALITY as c_int, 90);
            tj::tj3Set(handle, tj::TJPARAM_TJPARAM_SUBSAMP as c_int, tj::TJSAMP_TJSAMP_420 as c_int);
            let mut output: *mut u8 = std::ptr::null_mut();
            let mut size = 0;
            let code = tj::tj3Compress8(
                handle,
                pixels.as_ptr(),
                width as c_int,
                (width * 3) as c_int,
                height as c_int,
                tj::TJPF_TJPF_RGB as c_int,
                &mut output,
                &mut size,
            );
            assert_eq!(code, 0, "{}", last_message(handle));
            let encoded = std::slice::from_raw_parts(output, size as usize).to_vec();
            tj::tj3Free(output.cast());
            tj::tj3Destroy(handle);
            encoded
        }
    }

    #[test]
    fn a_region_decodes_to_the_same_pixels_as_the_whole_image() {
        let data = encode_test_jpeg(333, 251);
        let info = info(&data).unwrap();
        for shrink in [1, 2, 4, 8] {
            let (full, full_width, full_height, channels) = decode(&data, false, shrink, None, Vec::new()).unwrap();
            assert_eq!((full_width, full_height), scaled_size(&info, shrink));
            let column = info.column_width(shrink);
            for (left, top, width, height) in [
                (column, 3, full_width / 2, full_height / 2),
                (0, 0, full_width / 3, 5),
                (column * 2, full_height / 2, full_width - column * 2, full_height / 2),
            ] {
                let region = Region { left, top, width, height };
                let (part, part_width, part_height, _) = decode(&data, false, shrink, Some(region), Vec::new()).unwrap();
                assert_eq!((part_width, part_height), (width, height));
                // Chroma upsampling at a cut edge lacks the neighbour beyond it, so the pixel on
                // a cut edge may differ by a level or two; every pixel inside is exact (callers
                // ask for `CUT_EDGE` more pixels than they use).
                let inset = |start: usize, end: usize, limit: usize| {
                    (if start == 0 { 0 } else { start + CUT_EDGE }, if end == limit { end } else { end - CUT_EDGE })
                };
                let (column_start, column_end) = inset(left, left + width, full_width);
                let (row_start, row_end) = inset(top, top + height, full_height);
                for row in row_start..row_end {
                    let part_row =
                        &part[((row - top) * width + column_start - left) * channels..((row - top) * width + column_end - left) * channels];
                    let full_row = &full[(row * full_width + column_start) * channels..(row * full_width + column_end) * channels];
                    assert_eq!(part_row, full_row, "shrink {shrink}, region {region:?}, row {row}");
                }
            }
        }
    }

    #[test]
    fn a_failed_image_does_not_fail_the_next_one_on_its_thread() {
        let good = encode_test_jpeg(40, 30);
        for bad in [&b"\xff\xd8\xff broken"[..], &good[..good.len() / 3]] {
            let _ = info(bad); // fails for garbage; a truncated file's header reads fine
            assert!(decode(bad, false, 1, None, Vec::new()).is_err());
            assert_eq!(info(&good).unwrap().width, 40);
            assert_eq!(decode(&good, false, 1, None, Vec::new()).unwrap().1, 40);
        }
    }

    #[test]
    fn a_header_cut_before_its_frame_is_an_error_not_the_last_images_size() {
        let good = encode_test_jpeg(32, 24);
        let frame = good.windows(2).position(|pair| pair == [0xFF, 0xC0]).unwrap();
        let tables_only = [&good[..frame], &[0xFF, 0xD9][..]].concat();
        for bad in [&b"\xff\xd8\xff"[..], &good[..frame], &good[..frame + 6], &tables_only[..]] {
            assert_eq!(info(&good).unwrap().width, 32); // the thread's handle has read a 32 x 24 header
            let error = info(bad).unwrap_err().to_string();
            assert!(error.contains("no image in the data"), "{} bytes: {error}", bad.len());
            assert!(decode(bad, false, 1, None, Vec::new()).is_err());
        }
        // Garbage before a marker, fill bytes and restart markers are walked over as libjpeg does.
        let padded = [&good[..2], &b"junk\xff\xff\xd0"[..], &good[2..]].concat();
        assert!(has_frame_header(&padded));
        assert_eq!(info(&padded).unwrap().height, 24);
    }

    #[test]
    fn exif_is_found_after_other_segments() {
        let mut data = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00];
        data.extend_from_slice(&[0xFF, 0xE1, 0x00, 0x0C]);
        data.extend_from_slice(b"Exif\0\0II*\0");
        data.extend_from_slice(&[0xFF, 0xDA, 0x00, 0x02]);
        assert_eq!(exif_segment(&data), Some(&b"II*\0"[..]));
        assert_eq!(exif_segment(&[0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02]), None);
        assert_eq!(exif_segment(&[0xFF, 0xD8, 0xFF, 0xE1, 0x40, 0x00]), None); // length past the end
    }

    #[test]
    fn harmless_warnings_are_told_apart() {
        assert!(is_harmless_warning("Corrupt JPEG data: 3 extraneous bytes before marker 0xd9"));
        assert!(!is_harmless_warning("Corrupt JPEG data: premature end of data segment"));
        assert!(!is_harmless_warning("Premature end of JPEG file"));
    }
}
