//! Many images into one contiguous batch buffer, each in its own slot, with per-sample errors.
//!
//! The caller owns the buffer (a numpy array, possibly over page-locked memory) so each image is
//! written exactly once, where the training step will read it. Samples are split into contiguous
//! runs, one per thread, each thread holding a disjoint `&mut` piece of the buffer.

use half::f16;

use super::error::ImageError;
use super::geometry::TransformSpec;
use super::output::{OutputSpec, Slot};
use super::transform;

/// The whole batch buffer, typed.
pub enum BatchBuffer<'a> {
    U8(&'a mut [u8]),
    F32(&'a mut [f32]),
    F16(&'a mut [f16]),
}

/// What to do with a sample that fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Leave its slot zero; the caller masks it out.
    ZeroFill,
    /// Move later samples down so the successes are contiguous at the front.
    Compact,
}

/// Decode `inputs` into `buffer`, sample `i` into slot `i` of `sample_len` values.
///
/// Returns one entry per input: `None` on success, the error otherwise. With
/// `FailurePolicy::Compact` the successful samples then occupy the first slots, in input order.
pub fn decode_batch(
    inputs: &[&[u8]],
    seeds: &[u64],
    spec: &TransformSpec,
    output_spec: &OutputSpec,
    buffer: BatchBuffer<'_>,
    sample_len: usize,
    size: (usize, usize),
    policy: FailurePolicy,
    threads: usize,
) -> Vec<Option<ImageError>> {
    let threads = threads.clamp(1, inputs.len().max(1));
    let per_thread = inputs.len().div_ceil(threads).max(1);
    let mut errors: Vec<Option<ImageError>> = vec![None; inputs.len()];
    macro_rules! run {
        ($slice:expr, $variant:ident) => {{
            let slice = $slice;
            let work = |first: usize, chunk: &mut [_], errors: &mut [Option<ImageError>]| {
                for (offset, slot) in chunk.chunks_exact_mut(sample_len).enumerate() {
                    let index = first + offset;
                    let mut slot = Slot::$variant(slot);
                    if let Err(error) =
                        transform::transform_into(inputs[index], spec, output_spec, seeds[index], Some(size), &mut slot)
                    {
                        slot.fill_zero();
                        errors[offset] = Some(error);
                    }
                }
            };
            let used = &mut slice[..inputs.len() * sample_len];
            if threads == 1 {
                work(0, used, &mut errors);
            } else {
                std::thread::scope(|scope| {
                    for (part, (chunk, errors)) in
                        used.chunks_mut(per_thread * sample_len).zip(errors.chunks_mut(per_thread)).enumerate()
                    {
                        let work = &work;
                        scope.spawn(move || work(part * per_thread, chunk, errors));
                    }
                });
            }
            if policy == FailurePolicy::Compact {
                compact(slice, sample_len, &errors);
            }
        }};
    }
    match buffer {
        BatchBuffer::U8(slice) => run!(slice, U8),
        BatchBuffer::F32(slice) => run!(slice, F32),
        BatchBuffer::F16(slice) => run!(slice, F16),
    }
    errors
}

/// Move successful samples' slots down over failed ones, keeping order.
fn compact<T: Copy>(buffer: &mut [T], sample_len: usize, errors: &[Option<ImageError>]) {
    let mut next = 0;
    for (index, error) in errors.iter().enumerate() {
        if error.is_none() {
            if index != next {
                buffer.copy_within(index * sample_len..(index + 1) * sample_len, next * sample_len);
            }
            next += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_keeps_order() {
        let mut buffer = vec![1, 1, 2, 2, 3, 3, 4, 4];
        let errors = vec![None, Some(ImageError::Empty), None, Some(ImageError::Empty)];
        compact(&mut buffer, 2, &errors);
        assert_eq!(&buffer[..4], &[1, 1, 3, 3]);
    }
}
