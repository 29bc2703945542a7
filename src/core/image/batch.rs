//! Many images into one contiguous batch buffer, each in its own slot, with per-sample errors.
//!
//! The caller owns the buffer (a numpy array, possibly over page-locked memory) so each image is
//! written exactly once, where the training step will read it. Each sample's task holds a
//! disjoint `&mut` slot of the buffer.
//!
//! Internal threads come from persistent rayon pools, one per thread count asked for: a thread
//! spawned per call would start with empty thread-local decode and resize buffers, and the page
//! faults of refilling them cost about 10% of the throughput we measured.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use half::f16;
use rayon::prelude::*;

use super::error::ImageError;
use super::geometry::TransformSpec;
use super::output::{OutputSpec, Slot};
use super::transform;
use crate::panic_guard::{catch_panic, Panicked};

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

/// The slots of a batch buffer and how to fill them.
#[derive(Debug, Clone, Copy)]
pub struct BatchLayout {
    /// Values per sample (height x width x channels).
    pub sample_len: usize,
    /// Every sample's output (width, height).
    pub size: (usize, usize),
    pub policy: FailurePolicy,
    /// Threads decoding this batch (1: the calling thread only).
    pub threads: usize,
}

/// Decode `inputs` into `buffer`, sample `i` into slot `i` of `layout.sample_len` values.
///
/// Returns one entry per input: `None` on success, the error otherwise. With
/// `FailurePolicy::Compact` the successful samples then occupy the first slots, in input order.
pub fn decode_batch(
    inputs: &[&[u8]],
    seeds: &[u64],
    spec: &TransformSpec,
    output_spec: &OutputSpec,
    buffer: BatchBuffer<'_>,
    layout: BatchLayout,
) -> Vec<Option<ImageError>> {
    let BatchLayout { sample_len, size, policy, threads } = layout;
    macro_rules! run {
        ($slice:expr, $variant:ident) => {
            each_slot($slice, sample_len, inputs.len(), threads, policy, |index, slot| {
                transform::transform_into(inputs[index], spec, output_spec, seeds[index], Some(size), &mut Slot::$variant(slot)).map(|_| ())
            })
        };
    }
    match buffer {
        BatchBuffer::U8(slice) => run!(slice, U8),
        BatchBuffer::F32(slice) => run!(slice, F32),
        BatchBuffer::F16(slice) => run!(slice, F16),
    }
}

/// Run `work` on the first `count` slots of `slot_len` values of `buffer` (slot `i` for input
/// `i`) on `threads` threads, zero-fill each slot whose work failed, and compact the successes
/// to the front under `FailurePolicy::Compact`. Returns each input's error, or None. Shared by
/// every batch decoder (images, audio, video).
///
/// A panic in one sample's work is that sample's error (`Panicked`), like any other: the rest
/// of the batch is decoded, and the call's own panic guard never sees it.
pub fn each_slot<T: Send + Copy + Default, E: Send + Clone + From<Panicked>>(
    buffer: &mut [T],
    slot_len: usize,
    count: usize,
    threads: usize,
    policy: FailurePolicy,
    work: impl Fn(usize, &mut [T]) -> Result<(), E> + Sync,
) -> Vec<Option<E>> {
    let mut errors: Vec<Option<E>> = vec![None; count];
    let run = |index: usize, slot: &mut [T], error: &mut Option<E>| {
        let failure = match catch_panic(|| work(index, &mut *slot)) {
            Ok(result) => result.err(),
            Err(message) => Some(E::from(Panicked(message))),
        };
        if let Some(failure) = failure {
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
        // One task per sample: samples differ in cost, and work stealing keeps every thread
        // busy until the batch is done.
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

/// The persistent pool of `threads` threads (created on first use, kept for the process).
pub(crate) fn pool(threads: usize) -> Arc<rayon::ThreadPool> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS.get_or_init(Default::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    pools
        .entry(threads)
        .or_insert_with(|| {
            Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|index| format!("stoker-decode-{index}"))
                    .build()
                    .expect("starting decode threads"),
            )
        })
        .clone()
}

/// Move successful samples' slots down over failed ones, keeping order.
pub(crate) fn compact<T: Copy, E>(buffer: &mut [T], sample_len: usize, errors: &[Option<E>]) {
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
