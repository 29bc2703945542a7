//! The filter bank of `Polyphase`: for one pair of rates, a row of Kaiser-windowed sinc taps for
//! each phase (each place an output can fall between two inputs), made once per process and
//! shared by every converter of those rates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::polyphase_kernel::LANES;

/// Zero crossings of the sinc on each side of the centre, at the lower rate.
const ZERO_CROSSINGS: f64 = 16.0;
/// Passband edge as a share of the lower rate's Nyquist frequency.
const CUTOFF: f64 = 0.97;
/// Kaiser window shape: about 90 dB of stopband attenuation.
const KAISER_BETA: f64 = 9.0;

/// The filter bank for one pair of rates: `phases` rows of `width` taps.
pub struct Bank {
    pub phases: usize,
    /// Input samples the position advances per output sample, as `step / phases`.
    pub step: usize,
    /// Taps a row, padded with zeros to a multiple of `LANES`.
    pub width: usize,
    /// Input samples before the output's position that a row starts at.
    pub before: usize,
    pub taps: Vec<f32>,
}

/// Banks made so far, by (input rate, output rate): making one takes a fraction of a millisecond.
type Banks = HashMap<(u32, u32), Arc<Bank>>;

/// The bank for these rates, made on first use.
pub fn bank(input_rate: u32, output_rate: u32) -> Arc<Bank> {
    static BANKS: OnceLock<Mutex<Banks>> = OnceLock::new();
    let banks = BANKS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut banks = banks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    banks.entry((input_rate, output_rate)).or_insert_with(|| Arc::new(Bank::new(input_rate, output_rate))).clone()
}

impl Bank {
    fn new(input_rate: u32, output_rate: u32) -> Bank {
        let divisor = gcd(input_rate, output_rate);
        let phases = (output_rate / divisor) as usize;
        let step = (input_rate / divisor) as usize;
        // The cutoff in cycles per input sample: below the lower of the two Nyquist frequencies.
        let cutoff = 0.5 * CUTOFF * (f64::from(output_rate) / f64::from(input_rate)).min(1.0);
        let half_span = ZERO_CROSSINGS / (2.0 * cutoff); // input samples either side
        let before = half_span.floor() as usize;
        let used = before + half_span.ceil() as usize + 1;
        let width = used.div_ceil(LANES) * LANES;
        let mut taps = vec![0f32; phases * width];
        for (phase, row) in taps.chunks_exact_mut(width).enumerate() {
            let offset = phase as f64 / phases as f64; // the output's place between two inputs
            let mut weights: Vec<f64> = (0..used)
                .map(|tap| {
                    let distance = tap as f64 - before as f64 - offset;
                    let window = 1.0 - (distance / half_span).powi(2);
                    if window <= 0.0 {
                        return 0.0;
                    }
                    2.0 * cutoff * sinc(2.0 * cutoff * distance) * bessel_i0(KAISER_BETA * window.sqrt()) / bessel_i0(KAISER_BETA)
                })
                .collect();
            // Unit gain at DC for every phase, so a constant stays constant.
            let sum: f64 = weights.iter().sum();
            weights.iter_mut().for_each(|weight| *weight /= sum);
            row.iter_mut().zip(&weights).for_each(|(tap, weight)| *tap = *weight as f32);
        }
        Bank { phases, step, width, before, taps }
    }
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        (std::f64::consts::PI * x).sin() / (std::f64::consts::PI * x)
    }
}

/// The modified Bessel function of the first kind, order 0, by its power series.
fn bessel_i0(x: f64) -> f64 {
    let (mut sum, mut term, quarter) = (1.0, 1.0, x * x / 4.0);
    for k in 1..64 {
        term *= quarter / (k * k) as f64;
        sum += term;
        if term < sum * 1e-17 {
            break;
        }
    }
    sum
}

/// The greatest common divisor (1 for 0 and 0): rates in lowest terms.
pub fn gcd(mut left: u32, mut right: u32) -> u32 {
    while right != 0 {
        (left, right) = (right, left % right);
    }
    left.max(1)
}
