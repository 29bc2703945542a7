//! The inner loop of `Polyphase`: each output sample is one row of filter taps times the input
//! under it. Written for independent accumulators, and compiled a second time for AVX2 and FMA,
//! chosen at run time: the loop costs more than the decoding around it when left to one chain
//! of dependent additions.

use super::polyphase_bank::{Bank, LANES};

/// Writes one plane's outputs into every `stride`-th slot of `out`, the first at `start` (the
/// row's first input sample in `plane`, and the phase).
pub type Kernel = fn(&Bank, &[f32], (usize, usize), &mut [f32], usize);

/// The fastest kernel this CPU runs: fused multiply-adds in AVX registers where it has them
/// (nearly every x86-64 made since 2013), else the portable one (SSE2 on x86-64).
pub fn kernel_for_this_cpu() -> Kernel {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        return produce_checked_fma;
    }
    portable
}

/// The kernel for any CPU (SSE2 on x86-64).
pub fn portable(bank: &Bank, plane: &[f32], start: (usize, usize), out: &mut [f32], stride: usize) {
    produce(bank, plane, start, out, stride, dot)
}

#[inline(always)]
fn produce(bank: &Bank, plane: &[f32], start: (usize, usize), out: &mut [f32], stride: usize, dot: impl Fn(&[f32], &[f32]) -> f32) {
    let (mut from, mut phase) = start;
    let (step_whole, step_phase) = (bank.step / bank.phases, bank.step % bank.phases);
    for slot in out.iter_mut().step_by(stride) {
        *slot = dot(&bank.taps[phase * bank.width..(phase + 1) * bank.width], &plane[from..from + bank.width]);
        from += step_whole;
        phase += step_phase;
        if phase >= bank.phases {
            phase -= bank.phases;
            from += 1;
        }
    }
}

/// The AVX2 and FMA kernels, only ever chosen by `kernel_for_this_cpu` after it found both:
/// by phase where a row of taps fits in registers, else in output order.
#[cfg(target_arch = "x86_64")]
fn produce_checked_fma(bank: &Bank, plane: &[f32], start: (usize, usize), out: &mut [f32], stride: usize) {
    // SAFETY: `kernel_for_this_cpu` returns this function only when the CPU reports AVX2 and
    // FMA, the features these kernels are compiled for; they have no other requirement.
    unsafe {
        match bank.width / 8 {
            8 => produce_by_phase_fma::<8>(bank, plane, start, out, stride),
            12 => produce_by_phase_fma::<12>(bank, plane, start, out, stride),
            16 => produce_by_phase_fma::<16>(bank, plane, start, out, stride),
            _ => produce_fma(bank, plane, start, out, stride),
        }
    }
}

/// `produce` taken phase by phase: the outputs `phases` apart share a row of taps (and sit
/// `step` input samples apart), so the row is loaded into registers once for all of them, and
/// each output reads only its input from memory: half the loads of `produce_fma`, which are
/// what bounds it. `CHUNKS` is the row's width in AVX registers (8 floats each).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn produce_by_phase_fma<const CHUNKS: usize>(bank: &Bank, plane: &[f32], start: (usize, usize), out: &mut [f32], stride: usize) {
    use std::arch::x86_64::{_mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps};
    debug_assert_eq!(bank.width, CHUNKS * 8);
    let count = out.len().div_ceil(stride);
    let (mut from, mut phase) = start;
    let (step_whole, step_phase) = (bank.step / bank.phases, bank.step % bank.phases);
    for first in 0..count.min(bank.phases) {
        let row = &bank.taps[phase * bank.width..(phase + 1) * bank.width];
        let mut taps = [_mm256_setzero_ps(); CHUNKS];
        for (chunk, tap) in taps.iter_mut().enumerate() {
            // SAFETY: the row holds CHUNKS * 8 floats; unaligned loads need no alignment.
            *tap = unsafe { _mm256_loadu_ps(row.as_ptr().add(8 * chunk)) };
        }
        let mut at = from;
        for slot in (first..count).step_by(bank.phases) {
            let samples = &plane[at..at + CHUNKS * 8];
            let mut sums = [_mm256_setzero_ps(); 4];
            for (chunk, tap) in taps.iter().enumerate() {
                // SAFETY: `samples` holds CHUNKS * 8 floats, so the 8 at 8 * chunk are inside.
                let sample = unsafe { _mm256_loadu_ps(samples.as_ptr().add(8 * chunk)) };
                sums[chunk % 4] = _mm256_fmadd_ps(*tap, sample, sums[chunk % 4]);
            }
            out[slot * stride] = horizontal_sum(sums);
            at += bank.step;
        }
        from += step_whole;
        phase += step_phase;
        if phase >= bank.phases {
            phase -= bank.phases;
            from += 1;
        }
    }
}

/// `produce` with `dot_fma` inlined, compiled for AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn produce_fma(bank: &Bank, plane: &[f32], start: (usize, usize), out: &mut [f32], stride: usize) {
    // SAFETY: this function runs only on a CPU with AVX2 and FMA (see `produce_checked_fma`).
    produce(bank, plane, start, out, stride, |taps, samples| unsafe { dot_fma(taps, samples) })
}

/// Sum of products in `LANES` independent accumulators (vectorized by the compiler).
fn dot(taps: &[f32], samples: &[f32]) -> f32 {
    let mut lanes = [0f32; LANES];
    for (tap, sample) in taps.chunks_exact(LANES).zip(samples.chunks_exact(LANES)) {
        for lane in 0..LANES {
            lanes[lane] += tap[lane] * sample[lane];
        }
    }
    reduce(lanes)
}

/// The lanes' sum, halving the width each step: a sum left to right would chain 32 dependent
/// additions, which cost more than the products.
#[inline(always)]
fn reduce(mut lanes: [f32; LANES]) -> f32 {
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for lane in 0..width {
            lanes[lane] += lanes[lane + width];
        }
    }
    lanes[0]
}

/// The dot product in AVX registers: four independent chains of fused multiply-adds, then one
/// pairwise sum (an automatically vectorized loop left a chain of dependent scalar additions).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_fma(taps: &[f32], samples: &[f32]) -> f32 {
    use std::arch::x86_64::{_mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps};
    let mut sums = [_mm256_setzero_ps(); 4];
    for (tap, sample) in taps.chunks_exact(LANES).zip(samples.chunks_exact(LANES)) {
        for (register, sum) in sums.iter_mut().enumerate() {
            // SAFETY: both chunks hold LANES (32) floats, so the 8 read from 8 * register
            // (register < 4) are inside them; unaligned loads have no alignment requirement.
            let (tap, sample) =
                unsafe { (_mm256_loadu_ps(tap.as_ptr().add(8 * register)), _mm256_loadu_ps(sample.as_ptr().add(8 * register))) };
            *sum = _mm256_fmadd_ps(tap, sample, *sum);
        }
    }
    horizontal_sum(sums)
}

/// The sum of every lane of four AVX registers, added pairwise.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn horizontal_sum(sums: [std::arch::x86_64::__m256; 4]) -> f32 {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_castps256_ps128, _mm256_extractf128_ps, _mm_add_ps, _mm_add_ss, _mm_cvtss_f32, _mm_movehl_ps, _mm_shuffle_ps,
    };
    let total = _mm256_add_ps(_mm256_add_ps(sums[0], sums[1]), _mm256_add_ps(sums[2], sums[3]));
    let half = _mm_add_ps(_mm256_castps256_ps128(total), _mm256_extractf128_ps::<1>(total));
    let quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
    _mm_cvtss_f32(_mm_add_ss(quarter, _mm_shuffle_ps::<1>(quarter, quarter)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_avx_dot_product_equals_the_portable_one() {
        let taps: Vec<f32> = (0..96).map(|index| (index as f32 * 0.37).sin()).collect();
        let samples: Vec<f32> = (0..96).map(|index| (index as f32 * 1.91).cos()).collect();
        let exact: f64 = taps.iter().zip(&samples).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
        assert!((f64::from(dot(&taps, &samples)) - exact).abs() < 1e-5);
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has the features dot_fma is compiled for (checked just above).
            assert!((f64::from(unsafe { dot_fma(&taps, &samples) }) - exact).abs() < 1e-5);
        }
    }
}
