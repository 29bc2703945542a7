//! Rate conversion by a polyphase, Kaiser-windowed sinc filter: the same kind of filter as
//! swresample's default (Kaiser, beta 9, 16 zero crossings a side at the lower rate's Nyquist,
//! cutoff at 97% of it; see `polyphase_bank`), computed with independent accumulators, phase by
//! phase (see `polyphase_kernel`).
//!
//! Why not swresample's own: its inner loop keeps one accumulator, so every multiply-add waits
//! for the one before; at 44.1 to 16 kHz (about 90 taps an output sample) that was a fifth of
//! all the CPU of loading a FLAC window. The same arithmetic in independent lanes runs several
//! times faster, for the same output (within float rounding).
//!
//! Output sample `n` sits at input position `n * input_rate / output_rate`; input before the
//! first sample is taken as silence, and `finish` pads the end with silence. Outputs are made
//! only once the filter's whole span of input has arrived, so a caller that stops early has
//! exact samples only.

use std::sync::Arc;

use super::polyphase_bank::{bank, Bank};
use super::polyphase_kernel::{kernel_for_this_cpu, Kernel};

/// Input samples no output needs any more that `run` lets pile up before it drops them (each
/// drop moves what is left to the front).
const DROP_AT: usize = 4096;
/// Outputs of each phase that `push` waits for before it makes them (see `Polyphase::batch`).
const OUTPUTS_PER_PHASE: usize = 8;
/// The most outputs `push` lets wait, for rate pairs with thousands of phases.
const MAX_BATCH: usize = 16_384;
/// The most input samples a batch of outputs may span (a high decimation ratio would otherwise
/// hold MAX_BATCH times the ratio samples per channel).
const MAX_BATCH_INPUT: usize = 65_536;
/// Samples in a large decoded frame (FLAC's and AAC's are 4096 or fewer, MP3's 1152).
const TYPICAL_FRAME: usize = 8192;

/// A streaming converter of interleaved f32 samples with `channels` channels.
pub struct Polyphase {
    bank: Arc<Bank>,
    channels: usize,
    /// Per channel, the input not yet behind every future output; `planes[c][0]` is input sample
    /// `base` (which may be negative: the silence before the first sample).
    planes: Vec<Vec<f32>>,
    base: i64,
    /// Input samples received.
    received: i64,
    /// Output samples made.
    made: i64,
    /// One past the last output there is: set by `finish`, at the end of the input.
    end: i64,
    /// The loop over outputs for this CPU.
    kernel: Kernel,
    /// Outputs `push` lets wait before it makes them: the kernel goes phase by phase, loading
    /// a row of taps once for every output of that phase in the batch, so a batch of a few per
    /// phase (not one MP3 frame's few hundred outputs) keeps that load rare.
    batch: usize,
}

impl Polyphase {
    /// A converter, or why these rates cannot be converted (`polyphase_bank::check_rates`).
    pub fn new(input_rate: u32, output_rate: u32, channels: usize) -> Result<Polyphase, String> {
        let bank = bank(input_rate, output_rate)?;
        let batch = (OUTPUTS_PER_PHASE * bank.phases).min(MAX_BATCH).min((MAX_BATCH_INPUT * bank.phases / bank.step).max(1));
        let silence = bank.before;
        // Input held: the silence, what `run` keeps until it drops it, the filter's span, a
        // batch of outputs' input and a frame.
        let room = silence + DROP_AT + bank.width + batch * bank.step / bank.phases + TYPICAL_FRAME;
        Ok(Polyphase {
            planes: (0..channels).map(|_| plane_with_silence(silence, room)).collect(),
            bank,
            channels,
            base: -(silence as i64),
            received: 0,
            made: 0,
            end: i64::MAX,
            kernel: kernel_for_this_cpu(),
            batch,
        })
    }

    /// (input samples, output samples) after which the grid of outputs on inputs repeats: the
    /// rates in lowest terms, or the approximate ratio's terms.
    pub fn period(&self) -> (usize, usize) {
        (self.bank.step, self.bank.phases)
    }

    /// Take interleaved `input` and append every output sample it completes to `out`.
    pub fn push(&mut self, input: &[f32], out: &mut Vec<f32>) {
        if let [plane] = self.planes.as_mut_slice() {
            plane.extend_from_slice(input);
        } else {
            for (channel, plane) in self.planes.iter_mut().enumerate() {
                plane.extend(input.iter().skip(channel).step_by(self.channels));
            }
        }
        self.received += (input.len() / self.channels) as i64;
        if self.pending() >= self.batch {
            self.run(out);
        }
    }

    /// Outputs the input so far allows that have not been made yet (`push` makes them in
    /// batches; `flush` makes them now).
    pub fn pending(&self) -> usize {
        (self.reachable() - self.made).max(0) as usize
    }

    /// Append every output the input so far allows.
    pub fn flush(&mut self, out: &mut Vec<f32>) {
        self.run(out);
    }

    /// Outputs whose filter span the input received covers (those n with
    /// floor(n * step / phases) <= last, the last row start the input allows), and none past
    /// the end of the input once `finish` padded it.
    fn reachable(&self) -> i64 {
        let bank = &*self.bank;
        let (phases, step) = (bank.phases as i64, bank.step as i64);
        let last = self.base + self.planes[0].len() as i64 - bank.width as i64 + bank.before as i64;
        let reachable = if last < 0 { 0 } else { ((last + 1) * phases - 1) / step + 1 };
        reachable.min(self.end)
    }

    /// Pad the end with silence and append the remaining outputs: those at positions before the
    /// end of the input.
    pub fn finish(&mut self, out: &mut Vec<f32>) {
        let pad = self.bank.width;
        self.planes.iter_mut().for_each(|plane| plane.extend(std::iter::repeat_n(0.0, pad)));
        let bank = &self.bank;
        // Outputs whose position n * step / phases is below `received`.
        self.end = (self.received * bank.phases as i64 + bank.step as i64 - 1) / bank.step as i64;
        self.run(out);
    }

    fn run(&mut self, out: &mut Vec<f32>) {
        let count = self.pending();
        let bank = &*self.bank;
        let (phases, step) = (bank.phases as i64, bank.step as i64);
        if count > 0 {
            let position = self.made * step;
            let from = (position / phases - bank.before as i64 - self.base) as usize;
            let phase = (position % phases) as usize;
            let filled = out.len();
            let channels = self.planes.len();
            out.resize(filled + count * channels, 0.0);
            for (channel, plane) in self.planes.iter().enumerate() {
                (self.kernel)(bank, plane, (from, phase), &mut out[filled + channel..], channels);
            }
            self.made += count as i64;
        }
        // Drop what no later output reads.
        let next = self.made * step / phases - bank.before as i64;
        let drop = (next - self.base).clamp(0, self.planes[0].len() as i64) as usize;
        if drop > DROP_AT {
            self.planes.iter_mut().for_each(|plane| {
                plane.drain(..drop);
            });
            self.base += drop as i64;
        }
    }
}

/// A channel's input buffer: `silence` zeros, with room for `room` samples, what it holds at
/// most between two drops in `run` (growing it by doubling would copy it into fresh memory a
/// few times for every sample).
fn plane_with_silence(silence: usize, room: usize) -> Vec<f32> {
    let mut plane = Vec::with_capacity(room);
    plane.resize(silence, 0.0);
    plane
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(input: &[f32], from: u32, to: u32) -> Vec<f32> {
        let mut converter = Polyphase::new(from, to, 1).unwrap();
        let mut out = Vec::new();
        for chunk in input.chunks(1000) {
            converter.push(chunk, &mut out);
        }
        converter.finish(&mut out);
        out
    }

    fn tone(frequency: f64, rate: u32, count: usize) -> Vec<f32> {
        (0..count).map(|n| (2.0 * std::f64::consts::PI * frequency * n as f64 / f64::from(rate)).sin() as f32).collect()
    }

    #[test]
    fn one_output_per_position_before_the_end() {
        assert_eq!(convert(&vec![0.5; 44_100], 44_100, 16_000).len(), 16_000);
        assert_eq!(convert(&vec![0.5; 44_101], 44_100, 16_000).len(), 16_001);
        assert_eq!(convert(&vec![0.5; 8_000], 8_000, 48_000).len(), 48_000);
    }

    #[test]
    fn a_constant_stays_constant_away_from_the_edges() {
        let out = convert(&vec![0.5; 44_100], 44_100, 16_000);
        assert!(out[100..15_900].iter().all(|sample| (sample - 0.5).abs() < 1e-5));
    }

    #[test]
    fn passband_tones_keep_their_amplitude_and_phase() {
        for (from, to) in [(44_100, 16_000), (16_000, 44_100), (48_000, 16_000)] {
            let out = convert(&tone(1000.0, from, from as usize), from, to);
            let expected = tone(1000.0, to, to as usize);
            let error = out[200..out.len() - 200].iter().zip(&expected[200..]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(error < 2e-3, "{from} -> {to}: off by {error}");
        }
    }

    #[test]
    fn tones_above_the_new_nyquist_are_removed() {
        let out = convert(&tone(10_000.0, 44_100, 44_100), 44_100, 16_000);
        let peak = out[200..15_800].iter().map(|sample| sample.abs()).fold(0f32, f32::max);
        assert!(peak < 1e-4, "10 kHz left at {peak} after going to 16 kHz");
    }

    #[test]
    fn the_portable_kernel_gives_the_cpu_kernels_output() {
        // Rows of 8, 12 and 16 registers (taken by phase), and of 28 (in output order).
        for (from, to) in [(16_000, 44_100), (22_050, 16_000), (44_100, 16_000), (48_000, 16_000), (96_000, 16_000)] {
            let input = tone(3000.0, from, 20_000);
            let mut fast = Polyphase::new(from, to, 1).unwrap();
            let mut portable = Polyphase::new(from, to, 1).unwrap();
            portable.kernel = crate::polyphase_kernel::portable;
            let (mut fast_out, mut portable_out) = (Vec::new(), Vec::new());
            for chunk in input.chunks(777) {
                fast.push(chunk, &mut fast_out);
                portable.push(chunk, &mut portable_out);
            }
            fast.finish(&mut fast_out);
            portable.finish(&mut portable_out);
            assert_eq!(fast_out.len(), portable_out.len());
            let error = fast_out.iter().zip(&portable_out).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(error < 1e-5, "{from} -> {to} (rows of {} taps): off by {error}", fast.bank.width);
        }
    }

    #[test]
    fn channels_are_converted_apart() {
        let mut converter = Polyphase::new(44_100, 16_000, 2).unwrap();
        let input: Vec<f32> = (0..44_100).flat_map(|_| [0.25, -0.75]).collect();
        let mut out = Vec::new();
        converter.push(&input, &mut out);
        converter.finish(&mut out);
        assert_eq!(out.len(), 32_000);
        assert!(out[400..31_600].chunks_exact(2).all(|pair| (pair[0] - 0.25).abs() < 1e-5 && (pair[1] + 0.75).abs() < 1e-5));
    }
}
