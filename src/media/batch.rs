//! Many audio or video samples into one batch buffer, each in its own slot, in parallel on the
//! image path's persistent decode threads, with per-sample errors (failed slots zero-filled, or
//! compacted away).

use rayon::prelude::*;

use super::audio::{self, AudioSlot, AudioSpec};
use super::error::MediaError;
use super::video::{self, VideoSpec};
use crate::image::batch::{compact, pool, FailurePolicy};

/// The batch buffer of an audio batch, typed.
pub enum AudioBuffer<'a> {
    F32(&'a mut [f32]),
    I16(&'a mut [i16]),
}

/// Run `work` on every (input, slot) pair, on `threads` threads, and zero-fill failed slots.
fn each_slot<T: Send + Copy + Default>(
    buffer: &mut [T],
    slot_len: usize,
    count: usize,
    threads: usize,
    policy: FailurePolicy,
    work: impl Fn(usize, &mut [T]) -> Result<(), MediaError> + Sync,
) -> Vec<Option<MediaError>> {
    let mut errors: Vec<Option<MediaError>> = vec![None; count];
    let run = |index: usize, slot: &mut [T], error: &mut Option<MediaError>| {
        if let Err(failure) = work(index, slot) {
            slot.fill(T::default());
            *error = Some(failure);
        }
    };
    let used = &mut buffer[..count * slot_len];
    let threads = threads.clamp(1, count.max(1));
    if threads == 1 {
        for (index, (slot, error)) in used.chunks_exact_mut(slot_len).zip(errors.iter_mut()).enumerate() {
            run(index, slot, error);
        }
    } else {
        pool(threads).install(|| {
            used.par_chunks_exact_mut(slot_len)
                .zip(errors.par_iter_mut())
                .enumerate()
                .for_each(|(index, (slot, error))| run(index, slot, error));
        });
    }
    if policy == FailurePolicy::Compact {
        compact(buffer, slot_len, &errors);
    }
    errors
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
