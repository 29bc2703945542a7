//! One decoded frame, cropped, colour-converted to RGB and scaled by `swscale` in a single pass,
//! into three planes (R, G, B, each wherever the layout puts it) for channels-first layouts, or
//! into scratch planes interleaved into place for channels-last. swscale's planar RGB output is
//! the accurate one (within 0.1 levels on average of the source here; its packed RGB24 output
//! reads half a level dark), and one conversion path gives every layout the same pixels.

use std::ptr;

use ffmpeg_next::ffi;
use ffmpeg_next::frame;

use super::error::{MediaError, MediaResult};
use stoker_native::media::frame_geometry::FramePlan;

/// Where one output frame goes: packed RGB rows, or the R, G and B planes (offsets into the
/// clip's slot).
#[derive(Debug, Clone, Copy)]
pub enum FrameTarget {
    Packed { offset: usize },
    Planar { red: usize, green: usize, blue: usize },
}

/// A `swscale` context for one stream, rebuilt if the frames' size or format changes.
pub struct Scaler {
    context: *mut ffi::SwsContext,
    /// R, G and B planes of one frame, for channels-last layouts.
    scratch: Vec<u8>,
}

impl Default for Scaler {
    fn default() -> Self {
        Scaler { context: ptr::null_mut(), scratch: Vec::new() }
    }
}

impl Scaler {
    /// Crop `frame` to `plan.source`, scale it to `plan.output`, and write it into `slot`.
    pub fn write(&mut self, frame: &frame::Video, plan: &FramePlan, target: FrameTarget, slot: &mut [u8]) -> MediaResult<()> {
        let (left, top, width, height) = plan.source;
        let (out_width, out_height) = plan.output;
        let plane = out_width * out_height;
        if let FrameTarget::Packed { offset } = target {
            assert!(offset + 3 * plane <= slot.len(), "frame target past the end of its slot");
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.resize(3 * plane, 0);
            let result = self.write(frame, plan, FrameTarget::Planar { red: 0, green: plane, blue: 2 * plane }, &mut scratch);
            if result.is_ok() {
                let (red, rest) = scratch.split_at(plane);
                let (green, blue) = rest.split_at(plane);
                for (pixel, ((red, green), blue)) in
                    slot[offset..offset + 3 * plane].chunks_exact_mut(3).zip(red.iter().zip(green).zip(blue))
                {
                    pixel.copy_from_slice(&[*red, *green, *blue]);
                }
            }
            self.scratch = scratch;
            return result;
        }
        let FrameTarget::Planar { red, green, blue } = target else { unreachable!("packed targets returned above") };
        assert!(red.max(green).max(blue) + plane <= slot.len(), "frame target past the end of its slot");
        let format = ffi::AVPixelFormat::AV_PIX_FMT_GBRP;
        // SAFETY: `frame` is a valid decoded frame; av_frame_clone makes a new reference to its
        // buffers (no pixel copy) that we own, crop and free before returning. The crop fields
        // are within the frame (the plan clamps them), so av_frame_apply_cropping only moves the
        // clone's data pointers inside its buffers. swscale reads `height` rows of the cropped
        // planes and writes exactly `out_height` rows of `out_width` pixels to each destination
        // plane pointer, 1 byte a pixel, all inside `slot` (checked above).
        unsafe {
            let source = &*frame.as_ptr();
            self.context = ffi::sws_getCachedContext(
                self.context,
                width as i32,
                height as i32,
                std::mem::transmute::<i32, ffi::AVPixelFormat>(source.format),
                out_width as i32,
                out_height as i32,
                format,
                ffi::SWS_BILINEAR,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null(),
            );
            if self.context.is_null() {
                return Err(MediaError::UnsupportedCodec(format!("cannot convert frames of pixel format {} to RGB", source.format)));
            }
            let mut cropped = ffi::av_frame_clone(frame.as_ptr());
            if cropped.is_null() {
                return Err(MediaError::Transform("out of memory cloning a frame".into()));
            }
            (*cropped).crop_left = left;
            (*cropped).crop_top = top;
            (*cropped).crop_right = source.width as usize - left - width;
            (*cropped).crop_bottom = source.height as usize - top - height;
            let status = ffi::av_frame_apply_cropping(cropped, ffi::AV_FRAME_CROP_UNALIGNED as i32);
            let base = slot.as_mut_ptr();
            let (planes, strides): ([*mut u8; 4], [i32; 4]) = match target {
                FrameTarget::Packed { offset } => {
                    ([base.add(offset), ptr::null_mut(), ptr::null_mut(), ptr::null_mut()], [3 * out_width as i32, 0, 0, 0])
                }
                // GBRP's planes are in the order green, blue, red.
                FrameTarget::Planar { red, green, blue } => (
                    [base.add(green), base.add(blue), base.add(red), ptr::null_mut()],
                    [out_width as i32, out_width as i32, out_width as i32, 0],
                ),
            };
            let rows = if status < 0 {
                status
            } else {
                ffi::sws_scale(
                    self.context,
                    (*cropped).data.as_ptr() as *const *const u8,
                    (*cropped).linesize.as_ptr(),
                    0,
                    (*cropped).height,
                    planes.as_ptr(),
                    strides.as_ptr(),
                )
            };
            ffi::av_frame_free(&mut cropped);
            if rows != out_height as i32 {
                return Err(MediaError::Corrupt(format!("scaling a frame wrote {rows} of {out_height} rows")));
            }
        }
        Ok(())
    }
}

impl Drop for Scaler {
    fn drop(&mut self) {
        // SAFETY: the context came from sws_getCachedContext (or is null, which sws_freeContext
        // accepts) and is freed once, here.
        unsafe { ffi::sws_freeContext(self.context) }
    }
}
