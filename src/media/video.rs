//! One video sample: pick its clip's frames, seek to the keyframe before the first, decode
//! forward while discarding the frames nobody needs, and write each clip frame, cropped and
//! scaled to RGB, into its slot.
//!
//! A frame that is neither in the clip nor a reference for later frames is dropped by the decoder
//! before it is reconstructed (`skip_frame = NONREF`): at stride 4 in a stream with B-frames most
//! of the frames between clip frames cost only their parsing.

use ffmpeg_next::media::Type;
use ffmpeg_next::{frame, Discard, Packet};

use stoker_native::media::frame_geometry::FramePlan;
pub use stoker_native::media::spec::{VideoLayout, VideoSpec};
use stoker_native::media::window::clip_frames;

use super::error::{MediaError, MediaResult};
use super::input::{self, seconds};
use super::probe::video_facts;
use super::scale::{FrameTarget, Scaler};

/// The most source pixels one clip may decode (frames asked x the video's frame size): 59 frames of
/// 8K, over a thousand of 1080p. Past it a clip is a named error, not minutes of decoding.
const MAX_CLIP_PIXELS: i64 = 1 << 31;

/// Where clip frame `index` of `spec` goes in its slot.
fn frame_target(spec: &VideoSpec, index: usize, plan: &FramePlan) -> FrameTarget {
    let plane = plan.output.0 * plan.output.1;
    match spec.layout {
        VideoLayout::Thwc => FrameTarget::Packed { offset: index * 3 * plane },
        VideoLayout::Tchw => FrameTarget::Planar { red: 3 * index * plane, green: (3 * index + 1) * plane, blue: (3 * index + 2) * plane },
        VideoLayout::Cthw => {
            let frames = spec.frames;
            FrameTarget::Planar { red: index * plane, green: (frames + index) * plane, blue: (2 * frames + index) * plane }
        }
    }
}

/// Decode `bytes` and write its clip into `slot` (`spec.slot_len()` values).
pub fn decode_clip_into(bytes: &[u8], spec: &VideoSpec, seed: u64, slot: &mut [u8]) -> MediaResult<()> {
    super::riff::check(bytes)?;
    let mut container = input::open(bytes)?;
    let stream = input::best_stream(&container, Type::Video)?;
    let facts = video_facts(&container, stream.index)?;
    let (index, time_base) = (stream.index, stream.time_base);
    let mut decoder = stream.decoder().video().map_err(|error| MediaError::UnsupportedCodec(error.to_string()))?;
    let clip_pixels = i64::from(decoder.width()) * i64::from(decoder.height()) * spec.frames as i64;
    if clip_pixels > MAX_CLIP_PIXELS {
        return Err(MediaError::Transform(format!(
            "{} frames of {}x{} are {clip_pixels} pixels to decode, past the {MAX_CLIP_PIXELS}-pixel budget of a clip",
            spec.frames,
            decoder.width(),
            decoder.height()
        )));
    }
    let targets = clip_frames(facts.frames, facts.rate, spec.frames, spec.step, spec.placement, seed).map_err(MediaError::TooShort)?;
    let index_of = |timestamp: i64| ((seconds(timestamp, time_base) - facts.start) * facts.rate).round() as i64;
    let mut writer = ClipWriter { spec, targets: &targets, next: 0, scaler: Scaler::default(), plan: None, seed, slot };
    let mut current = frame::Video::empty();
    let mut previous: Option<frame::Video>;
    let mut last_index: Option<i64>;
    let mut packet = Packet::empty();
    let mut problem: Option<String>;
    let mut first_attempt = true;
    // Half a frame past the first clip frame: the keyframe at or before it, whatever the rounding.
    // Containers index keyframes by decode time, so with B-frames (or HEVC's open GOPs, whose
    // leading frames need the GOP before) that keyframe can come after the frame we need: then
    // the first frame decoded is past the clip's start, and we seek again, further back.
    let mut seek_to = targets[0] as f64 + 0.5;
    let mut back = facts.rate;
    'attempts: loop {
        if seek_to > 1.0 {
            input::seek_before(&mut container, facts.start + seek_to / facts.rate);
        } else if !first_attempt {
            input::seek_to_start(&mut container);
        }
        first_attempt = false;
        decoder.flush();
        (writer.next, previous, last_index, problem) = (0, None, None, None);
        let mut ended = false;
        while !writer.done() {
            if !ended {
                match input::next_packet(&mut container, &mut packet) {
                    Ok(()) => {}
                    Err(ffmpeg_next::Error::Eof) => ended = true,
                    Err(error) => {
                        problem = Some(format!("reading the file: {error}"));
                        ended = true;
                    }
                }
                if ended {
                    let _ = decoder.send_eof();
                } else if packet.stream() != index {
                    continue;
                } else {
                    let needed = packet.pts().is_none_or(|pts| writer.wants(index_of(pts)));
                    decoder.skip_frame(if needed { Discard::Default } else { Discard::NonReference });
                    if let Err(error) = decoder.send_packet(&packet) {
                        if writer.next > 0 {
                            return Err(MediaError::Corrupt(format!("decoding near frame {}: {error}", last_index.unwrap_or(0))));
                        }
                        problem = Some(format!("decoding: {error}"));
                        continue;
                    }
                }
            }
            let mut received = false;
            while decoder.receive_frame(&mut current).is_ok() {
                received = true;
                let index = current.pts().or(current.timestamp()).map_or(last_index.map_or(0, |last| last + 1), index_of);
                if last_index.is_none() && seek_to > 1.0 && index > targets[0] as i64 {
                    seek_to -= back;
                    back *= 2.0;
                    continue 'attempts;
                }
                writer.frame(index, &current, previous.as_ref())?;
                last_index = Some(index);
                // Keep this frame (a reference, no copy) for a clip frame the stream skips over.
                let spare = previous.take().unwrap_or_else(frame::Video::empty);
                previous = Some(std::mem::replace(&mut current, spare));
                if writer.done() {
                    break;
                }
            }
            if ended && !received {
                break;
            }
        }
        break;
    }
    if !writer.done() {
        let wanted = targets[writer.next];
        let reason = problem.map(|problem| format!(" ({problem})")).unwrap_or_default();
        return Err(match last_index {
            None => MediaError::Corrupt(format!("no frame could be decoded{reason}")),
            Some(last) => MediaError::Corrupt(format!(
                "the video ends at frame {last}; the file declares {} frames and the clip needs frame {wanted}{reason}",
                facts.frames
            )),
        });
    }
    Ok(())
}

/// Writes decoded frames into the clip frames they stand for.
struct ClipWriter<'a> {
    spec: &'a VideoSpec,
    targets: &'a [usize],
    /// The next clip frame to fill.
    next: usize,
    scaler: Scaler,
    /// The plan for the current frame size.
    plan: Option<((u32, u32), FramePlan)>,
    /// The clip's seed: its crop's place and whether it flips.
    seed: u64,
    slot: &'a mut [u8],
}

impl ClipWriter<'_> {
    fn done(&self) -> bool {
        self.next == self.targets.len()
    }

    /// Whether the frame at `index` fills a clip frame still to come.
    fn wants(&self, index: i64) -> bool {
        index >= 0 && self.targets[self.next.min(self.targets.len() - 1)..].binary_search(&(index as usize)).is_ok()
    }

    /// The decoded frame at `index`: clip frames before it that no frame filled take `previous`
    /// (the frame on screen at their time); those at `index` take this one.
    fn frame(&mut self, index: i64, current: &frame::Video, previous: Option<&frame::Video>) -> MediaResult<()> {
        while !self.done() && (self.targets[self.next] as i64) < index {
            self.write(previous.unwrap_or(current))?;
        }
        while !self.done() && self.targets[self.next] as i64 == index {
            self.write(current)?;
        }
        Ok(())
    }

    fn write(&mut self, frame: &frame::Video) -> MediaResult<()> {
        let size = (frame.width(), frame.height());
        let plan = match self.plan {
            Some((planned, plan)) if planned == size => plan,
            _ => {
                let plan = self.spec.geometry.plan(size.0 as usize, size.1 as usize, self.seed).map_err(MediaError::Transform)?;
                self.plan = Some((size, plan));
                plan
            }
        };
        let target = frame_target(self.spec, self.next, &plan);
        self.scaler.write(frame, &plan, target, self.slot)?;
        if self.spec.geometry.flips(self.seed) {
            mirror(self.slot, target, plan.output);
        }
        self.next += 1;
        Ok(())
    }
}

/// Mirror one written frame left to right, in place.
fn mirror(slot: &mut [u8], target: FrameTarget, (width, height): (usize, usize)) {
    let plane = width * height;
    match target {
        FrameTarget::Packed { offset } => {
            for row in slot[offset..offset + 3 * plane].chunks_exact_mut(3 * width) {
                for column in 0..width / 2 {
                    let (left, right) = (3 * column, 3 * (width - 1 - column));
                    for channel in 0..3 {
                        row.swap(left + channel, right + channel);
                    }
                }
            }
        }
        FrameTarget::Planar { red, green, blue } => {
            for start in [red, green, blue] {
                slot[start..start + plane].chunks_exact_mut(width).for_each(|row| row.reverse());
            }
        }
    }
}
