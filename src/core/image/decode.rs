//! Decoding JPEG, PNG and WebP bytes into upright 8-bit RGB or grayscale pixels.
//!
//! JPEG goes through libjpeg-turbo (`jpeg.rs`), which can also shrink in the DCT domain and decode
//! only a region; PNG through the `png` crate, expanded to 8 bits per channel; WebP through
//! libwebp.

use std::io::Cursor;

use super::color::rgb_to_gray;
use super::error::{ImageError, ImageResult, MAX_PIXELS};
use super::jpeg::{self, Region};
use super::orientation;

/// An 8-bit image, channels interleaved (1: gray, 3: RGB), rows top to bottom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub pixels: Vec<u8>,
}

/// The encoded formats we read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jpeg,
    Png,
    WebP,
}

/// Identify the format from the signature bytes.
pub fn sniff(data: &[u8]) -> ImageResult<Format> {
    if data.is_empty() {
        return Err(ImageError::Empty);
    }
    if data.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Ok(Format::Jpeg);
    }
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Ok(Format::Png);
    }
    if data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WEBP" {
        return Ok(Format::WebP);
    }
    Err(ImageError::UnknownFormat)
}

/// What a header says, in upright coordinates (orientation applied).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub format: Format,
    pub width: usize,
    pub height: usize,
    pub orientation: u8,
    /// A JPEG's header as stored, for decoding it.
    pub jpeg: Option<jpeg::JpegInfo>,
}

fn check_size(width: usize, height: usize, limit: u64) -> ImageResult<()> {
    if width == 0 || height == 0 {
        return Err(ImageError::Transform(format!("image has zero size {width}x{height}")));
    }
    if (width as u64) * (height as u64) > limit {
        return Err(ImageError::TooLarge { width: width as u64, height: height as u64, limit });
    }
    Ok(())
}

fn png_error(detail: impl ToString) -> ImageError {
    ImageError::Corrupt { format: "PNG", detail: detail.to_string() }
}

fn webp_error(detail: impl ToString) -> ImageError {
    ImageError::Corrupt { format: "WebP", detail: detail.to_string() }
}

/// Read the header: format, upright size and EXIF orientation, without decoding pixels.
pub fn read_header(data: &[u8], max_pixels: u64) -> ImageResult<Header> {
    let format = sniff(data)?;
    let mut jpeg_info = None;
    let (width, height, orientation) = match format {
        Format::Jpeg => {
            let info = jpeg::info(data)?;
            jpeg_info = Some(info);
            let orientation = jpeg::exif_segment(data).map_or(1, orientation::read_orientation);
            (info.width, info.height, orientation)
        }
        Format::Png => {
            let reader = png::Decoder::new(Cursor::new(data)).read_info().map_err(png_error)?;
            let info = reader.info();
            (info.width as usize, info.height as usize, 1)
        }
        Format::WebP => {
            let (width, height) = webp_size(data)?;
            (width, height, 1)
        }
    };
    check_size(width, height, max_pixels)?;
    let (width, height) = if orientation::swaps_axes(orientation) { (height, width) } else { (width, height) };
    Ok(Header { format, width, height, orientation, jpeg: jpeg_info })
}

/// Decode to upright pixels. `shrink` (1, 2, 4 or 8) asks the JPEG decoder for an image that
/// many times smaller per side through DCT scaling; other formats ignore it (check the returned
/// size).
pub fn decode(data: &[u8], gray: bool, shrink: usize) -> ImageResult<Decoded> {
    let header = read_header(data, MAX_PIXELS)?;
    Ok(decode_with_header(data, &header, gray, shrink, None, Vec::new())?.image)
}

/// Decoded pixels that may be a part of the (shrunk) image: `image` starts at (`left`, `top`)
/// of an upright image of `full_width` x `full_height`.
#[derive(Debug)]
pub struct DecodedPart {
    pub image: Decoded,
    pub left: usize,
    pub top: usize,
    pub full_width: usize,
    pub full_height: usize,
}

/// `decode` for a caller that already read the header, reusing `buffer`'s allocation for the
/// pixels when the codec allows (a hot loop then allocates nothing per image). `wanted`, in
/// pixels of the upright image shrunk by `shrink`, limits a JPEG decode to the iMCU columns and
/// the rows around it; the part returned contains it (other formats and rotated JPEGs decode
/// whole).
pub fn decode_with_header(
    data: &[u8],
    header: &Header,
    gray: bool,
    shrink: usize,
    wanted: Option<Region>,
    buffer: Vec<u8>,
) -> ImageResult<DecodedPart> {
    let mut origin = (0, 0);
    let (pixels, width, height, channels) = match header.format {
        Format::Jpeg => {
            check_complete_jpeg(data)?;
            let info = match header.jpeg {
                Some(info) => info,
                None => jpeg::info(data)?,
            };
            let shrink = if info.can_scale() { shrink } else { 1 };
            let (scaled_width, scaled_height) = jpeg::scaled_size(&info, shrink);
            // A region is given in upright pixels; only an unrotated image maps it as it is.
            let region = wanted.filter(|_| header.orientation <= 1 && info.can_crop()).map(|wanted| {
                let column = info.column_width(shrink);
                let left = (wanted.left.min(scaled_width.saturating_sub(1)) / column) * column;
                let top = wanted.top.min(scaled_height.saturating_sub(1));
                let right = (wanted.left + wanted.width).clamp(left + 1, scaled_width);
                let bottom = (wanted.top + wanted.height).clamp(top + 1, scaled_height);
                Region { left, top, width: right - left, height: bottom - top }
            });
            if let Some(region) = region {
                origin = (region.left, region.top);
            }
            let pixels = jpeg::decode(data, gray, shrink, region, buffer)?;
            let (full_width, full_height) =
                if orientation::swaps_axes(header.orientation) { (scaled_height, scaled_width) } else { (scaled_width, scaled_height) };
            return Ok(finish(pixels, header.orientation, origin, (full_width, full_height)));
        }
        Format::Png => decode_png(data, gray)?,
        Format::WebP => decode_webp(data, gray)?,
    };
    let full_size = if orientation::swaps_axes(header.orientation) { (height, width) } else { (width, height) };
    Ok(finish((pixels, width, height, channels), header.orientation, origin, full_size))
}

fn finish(raw: Raw, orientation: u8, origin: (usize, usize), full_size: (usize, usize)) -> DecodedPart {
    let (pixels, width, height, channels) = raw;
    let (pixels, width, height) = orientation::apply(pixels, width, height, channels, orientation);
    DecodedPart {
        image: Decoded { width, height, channels, pixels },
        left: origin.0,
        top: origin.1,
        full_width: full_size.0,
        full_height: full_size.1,
    }
}

type Raw = (Vec<u8>, usize, usize, usize);

/// A JPEG must end with its end-of-image marker (trailing bytes after it are tolerated): a cheap
/// check that refuses a truncated file before any pixel is decoded (libjpeg would fill the rest
/// of the scan with gray and warn; a loader must not train on that).
/// The marker cannot occur inside entropy-coded data (0xFF is stuffed there as 0xFF 0x00).
fn check_complete_jpeg(data: &[u8]) -> ImageResult<()> {
    if data.windows(2).rev().any(|pair| pair == [0xFF, 0xD9]) {
        Ok(())
    } else {
        Err(jpeg::jpeg_error("truncated: no end-of-image marker"))
    }
}

fn decode_png(data: &[u8], gray: bool) -> ImageResult<Raw> {
    let mut decoder = png::Decoder::new(Cursor::new(data));
    // Palette and low bit depths to 8 bits; 16-bit samples keep their high byte (as Pillow).
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().map_err(png_error)?;
    let (width, height) = (reader.info().width as usize, reader.info().height as usize);
    check_size(width, height, MAX_PIXELS)?;
    let size = reader.output_buffer_size().ok_or_else(|| png_error("image too large for memory"))?;
    let mut buffer = vec![0u8; size];
    let frame = reader.next_frame(&mut buffer).map_err(png_error)?;
    buffer.truncate(frame.buffer_size());
    let source_channels = frame.color_type.samples();
    let stride = frame.line_size;
    let mut pixels = Vec::with_capacity(width * height * if gray { 1 } else { 3 });
    for row in buffer.chunks_exact(stride).take(height) {
        for pixel in row[..width * source_channels].chunks_exact(source_channels) {
            // Alpha is dropped, as Pillow's convert("RGB") does.
            match (source_channels, gray) {
                (1 | 2, true) => pixels.push(pixel[0]),
                (1 | 2, false) => pixels.extend_from_slice(&[pixel[0], pixel[0], pixel[0]]),
                (_, false) => pixels.extend_from_slice(&pixel[..3]),
                (_, true) => pixels.extend(rgb_to_gray(&pixel[..3])),
            }
        }
    }
    if pixels.len() != width * height * if gray { 1 } else { 3 } {
        return Err(png_error("short image data"));
    }
    Ok((pixels, width, height, if gray { 1 } else { 3 }))
}

/// Width and height from a WebP's headers.
fn webp_size(data: &[u8]) -> ImageResult<(usize, usize)> {
    let (mut width, mut height): (std::ffi::c_int, std::ffi::c_int) = (0, 0);
    // SAFETY: the pointer and length describe `data`, a live slice libwebp only reads; `width`
    // and `height` are valid, writable ints for the call's duration.
    let valid = unsafe { libwebp_sys::WebPGetInfo(data.as_ptr(), data.len(), &mut width, &mut height) };
    if valid == 0 || width <= 0 || height <= 0 {
        return Err(webp_error("invalid or truncated headers"));
    }
    Ok((width as usize, height as usize))
}

/// libwebp (Google's reference codec, the one Pillow uses), so pixels match Pillow's exactly;
/// on a 500x375 lossy photo it took 2.7 ms against 7.7 ms for the pure-Rust image-webp 0.2
/// (`benchmarks/images/image_decode.py` compares it with Pillow).
fn decode_webp(data: &[u8], gray: bool) -> ImageResult<Raw> {
    let (width, height) = webp_size(data)?;
    check_size(width, height, MAX_PIXELS)?;
    let stride = width * 3;
    let mut pixels = vec![0u8; stride * height];
    let stride_int = std::ffi::c_int::try_from(stride).map_err(|_| webp_error("row too wide"))?;
    // SAFETY: libwebp reads `data.len()` bytes from `data` and writes at most
    // `pixels.len()` bytes to `pixels` (it checks that `height` rows of `stride` bytes fit before
    // writing); both buffers outlive the call and do not overlap. Alpha, if any, is dropped, as
    // Pillow's convert("RGB") does. An animated file is refused (null).
    let written = unsafe { libwebp_sys::WebPDecodeRGBInto(data.as_ptr(), data.len(), pixels.as_mut_ptr(), pixels.len(), stride_int) };
    if written.is_null() {
        return Err(webp_error("libwebp could not decode it (truncated or corrupt data, or an animation)"));
    }
    let pixels = if gray { rgb_to_gray(&pixels) } else { pixels };
    Ok((pixels, width, height, if gray { 1 } else { 3 }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing() {
        assert_eq!(sniff(&[]), Err(ImageError::Empty));
        assert_eq!(sniff(b"GIF89a"), Err(ImageError::UnknownFormat));
        assert_eq!(sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Ok(Format::Jpeg));
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n...."), Ok(Format::Png));
        assert_eq!(sniff(b"RIFF\x10\x00\x00\x00WEBPVP8 "), Ok(Format::WebP));
    }

    #[test]
    fn truncated_data_is_an_error_not_a_panic() {
        let jpeg_start = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F'];
        assert!(matches!(decode(&jpeg_start, false, 1), Err(ImageError::Corrupt { format: "JPEG", .. })));
        assert!(matches!(decode(b"\x89PNG\r\n\x1a\n\x00\x00", false, 1), Err(ImageError::Corrupt { format: "PNG", .. })));
    }
}
