//! Many audio or video samples into one batch buffer, each in its own slot, in parallel on the
//! image path's persistent decode threads, with per-sample errors (failed slots zero-filled, or
//! compacted away).

use super::audio::{self, AudioSlot, AudioSpec};
use ffmpeg_next::media::Type;

use super::error::MediaError;
use super::probe::{probe, PROBE_FIELDS};
use super::video::{self, VideoSpec};
use stoker_native::image::batch::{each_slot, FailurePolicy};

/// The batch buffer of an audio batch, typed.
pub enum AudioBuffer<'a> {
    F32(&'a mut [f32]),
    I16(&'a mut [i16]),
}

/// Decode audio `inputs` into `buffer`, sample `i` into slot `i` of `spec.slot_len()` values.
pub fn decode_audio_batch(
    inputs: &[&[u8]],
    seeds: &[u64],
    spec: &AudioSpec,
    buffer: AudioBuffer<'_>,
    threads: usize,
    policy: FailurePolicy,
) -> Vec<Option<MediaError>> {
    let slot_len = spec.slot_len();
    match buffer {
        AudioBuffer::F32(buffer) => each_slot(buffer, slot_len, inputs.len(), threads, policy, |index, slot| {
            audio::decode_window_into(inputs[index], spec, seeds[index], AudioSlot::F32(slot))
        }),
        AudioBuffer::I16(buffer) => each_slot(buffer, slot_len, inputs.len(), threads, policy, |index, slot| {
            audio::decode_window_into(inputs[index], spec, seeds[index], AudioSlot::I16(slot))
        }),
    }
}

/// Decode video `inputs` into `buffer`, clip `i` into slot `i` of `slot_len` values.
pub fn decode_video_batch(
    inputs: &[&[u8]],
    seeds: &[u64],
    spec: &VideoSpec,
    buffer: &mut [u8],
    slot_len: usize,
    threads: usize,
    policy: FailurePolicy,
) -> Vec<Option<MediaError>> {
    each_slot(buffer, slot_len, inputs.len(), threads, policy, |index, slot| {
        video::decode_clip_into(inputs[index], spec, seeds[index], slot)
    })
}

/// Probe `inputs` (their best stream of `kind`) into `buffer`, `PROBE_FIELDS` values per input
/// (`probe::probe`'s); a file that cannot say its length leaves zeros and its error.
pub fn probe_batch(inputs: &[&[u8]], kind: Type, buffer: &mut [f64], threads: usize) -> Vec<Option<MediaError>> {
    each_slot(buffer, PROBE_FIELDS, inputs.len(), threads, FailurePolicy::ZeroFill, |index, slot| probe(inputs[index], kind, slot))
}
