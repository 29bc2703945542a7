//! The filter bank of `Polyphase`: for one pair of rates, a row of Kaiser-windowed sinc taps for
//! each phase (each place an output can fall between two inputs), made once per process and
//! shared by every converter of those rates.
//!
//! Its cost is bounded for any pair of rates a file can declare. The rates themselves are checked
//! (`INPUT_RATES`, and at most `MAX_RATIO` between them). A pair in lowest terms can need up to
//! 768,000 phases (768 kHz from 767,999 Hz); where the exact bank would pass `MAX_BANK_TAPS`, the
//! ratio is replaced by the closest one with few enough phases (a continued-fraction convergent):
//! the output rate is then off by at most `MAX_RATE_ERROR` (10 ppm; a 4 s window drifts by under
//! a 25th of a sample). Banks are kept in a cache bounded in bytes (least recently used out),
//! and built outside its lock, so a rare rate never holds up the other decoding threads.

use std::sync::{Arc, Mutex, OnceLock};

/// Taps are padded to a multiple of this, the width of the kernel's dot-product accumulators (four AVX
/// registers: four independent chains of fused multiply-adds).
pub const LANES: usize = 32;

/// Zero crossings of the sinc on each side of the centre, at the lower rate.
const ZERO_CROSSINGS: f64 = 16.0;
/// Passband edge as a share of the lower rate's Nyquist frequency.
const CUTOFF: f64 = 0.97;
/// Kaiser window shape: about 90 dB of stopband attenuation.
const KAISER_BETA: f64 = 9.0;
/// The sample rates a file may declare, in Hz (the output's range too).
pub const INPUT_RATES: std::ops::RangeInclusive<u32> = 1..=768_000;
/// The most either rate may be a multiple of the other: the filter's span grows with it.
pub const MAX_RATIO: u32 = 1024;
/// The most taps one bank holds (16 MiB of f32): more phases than this allows take the
/// approximate ratio.
pub const MAX_BANK_TAPS: usize = 4 << 20;
/// The most the approximate ratio moves the output rate, relative.
pub const MAX_RATE_ERROR: f64 = 1e-5;
/// The most the cache of banks holds, in bytes.
const CACHE_BYTES: usize = 64 << 20;

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

/// Banks made so far, most recently used last, and their bytes.
#[derive(Default)]
struct Cache {
    banks: Vec<((u32, u32), Arc<Bank>)>,
    bytes: usize,
}

impl Cache {
    fn get(&mut self, rates: (u32, u32)) -> Option<Arc<Bank>> {
        let index = self.banks.iter().position(|(key, _)| *key == rates)?;
        let entry = self.banks.remove(index);
        let bank = entry.1.clone();
        self.banks.push(entry);
        Some(bank)
    }

    /// Keep `bank` (or the one another thread kept meanwhile), dropping the least recently used
    /// banks past `CACHE_BYTES`; converters still using a dropped bank keep it alive.
    fn insert(&mut self, rates: (u32, u32), bank: Arc<Bank>) -> Arc<Bank> {
        if let Some(kept) = self.get(rates) {
            return kept;
        }
        self.bytes += bank.bytes();
        self.banks.push((rates, bank.clone()));
        while self.bytes > CACHE_BYTES && self.banks.len() > 1 {
            let (_, dropped) = self.banks.remove(0);
            self.bytes -= dropped.bytes();
        }
        bank
    }
}

/// Why these rates cannot be converted, or None.
pub fn check_rates(input_rate: u32, output_rate: u32) -> Result<(), String> {
    if !INPUT_RATES.contains(&input_rate) {
        return Err(format!("the audio declares a sample rate of {input_rate} Hz, outside the 1..768000 Hz stoker converts"));
    }
    let (low, high) = (input_rate.min(output_rate), input_rate.max(output_rate));
    if u64::from(high) > u64::from(low) * u64::from(MAX_RATIO) {
        return Err(format!("{input_rate} Hz to {output_rate} Hz is a ratio past {MAX_RATIO}, more than a resampler should bridge"));
    }
    Ok(())
}

/// The bank for these rates, made on first use.
pub fn bank(input_rate: u32, output_rate: u32) -> Result<Arc<Bank>, String> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    check_rates(input_rate, output_rate)?;
    let cache = CACHE.get_or_init(Mutex::default);
    let lock = || cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(bank) = lock().get((input_rate, output_rate)) {
        return Ok(bank);
    }
    // Built without the lock: another thread may build the same bank meanwhile; one is kept.
    let built = Arc::new(Bank::new(input_rate, output_rate));
    Ok(lock().insert((input_rate, output_rate), built))
}

/// (phases, step) with `step / phases` as close to `input_rate / output_rate` as a bank of
/// `width`-tap rows within `MAX_BANK_TAPS` allows: exact when it fits, else the last
/// continued-fraction convergent with few enough phases.
fn grid(input_rate: u32, output_rate: u32, width: usize) -> (usize, usize) {
    let divisor = gcd(input_rate, output_rate);
    let (phases, step) = ((output_rate / divisor) as usize, (input_rate / divisor) as usize);
    let max_phases = (MAX_BANK_TAPS / width).max(1);
    if phases <= max_phases {
        return (phases, step);
    }
    // Convergents p/q of step/phases: (p, q) = (a p1 + p0, a q1 + q0).
    let (mut numerator, mut denominator) = (step, phases);
    let (mut p0, mut q0, mut p1, mut q1) = (0usize, 1usize, 1usize, 0usize);
    while denominator != 0 {
        let whole = numerator / denominator;
        let (p2, q2) = (whole * p1 + p0, whole * q1 + q0);
        if q2 > max_phases {
            break;
        }
        (p0, q0, p1, q1) = (p1, q1, p2, q2);
        (numerator, denominator) = (denominator, numerator - whole * denominator);
    }
    (q1.max(1), p1.max(1))
}

impl Bank {
    /// Bytes of its taps.
    pub fn bytes(&self) -> usize {
        self.taps.len() * std::mem::size_of::<f32>()
    }

    /// How far the output rate this bank makes is from the one asked, relative.
    pub fn rate_error(&self, input_rate: u32, output_rate: u32) -> f64 {
        let made = f64::from(input_rate) * self.phases as f64 / self.step as f64;
        (made - f64::from(output_rate)).abs() / f64::from(output_rate)
    }

    fn new(input_rate: u32, output_rate: u32) -> Bank {
        // The cutoff in cycles per input sample: below the lower of the two Nyquist frequencies.
        let cutoff = 0.5 * CUTOFF * (f64::from(output_rate) / f64::from(input_rate)).min(1.0);
        let half_span = ZERO_CROSSINGS / (2.0 * cutoff); // input samples either side
        let before = half_span.floor() as usize;
        let used = before + half_span.ceil() as usize + 1;
        let width = used.div_ceil(LANES) * LANES;
        let (phases, step) = grid(input_rate, output_rate, width);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_rates_are_exact() {
        for (from, to) in [(44_100, 16_000), (48_000, 16_000), (8_000, 48_000), (22_050, 44_100)] {
            let bank = bank(from, to).unwrap();
            assert_eq!(bank.rate_error(from, to), 0.0, "{from} -> {to}");
        }
    }

    #[test]
    fn any_declared_rate_gives_a_small_bank_close_to_the_asked_rate() {
        // Primes and near-primes at the ends of the range: exact banks of up to 768,000 phases.
        for from in [16, 997, 7_919, 44_101, 99_991, 767_999] {
            for to in [16_000, 44_100] {
                if check_rates(from, to).is_err() {
                    continue;
                }
                let bank = Bank::new(from, to);
                assert!(bank.taps.len() <= MAX_BANK_TAPS, "{from} -> {to}: {} taps", bank.taps.len());
                assert!(bank.phases >= 1 && bank.step >= 1);
                assert!(bank.rate_error(from, to) <= MAX_RATE_ERROR, "{from} -> {to}: off by {}", bank.rate_error(from, to));
            }
        }
    }

    #[test]
    fn absurd_rates_are_refused_by_name() {
        assert!(check_rates(1_000_000_007, 16_000).unwrap_err().contains("1000000007 Hz"));
        assert!(check_rates(0, 16_000).is_err());
        assert!(check_rates(8, 16_000).unwrap_err().contains("ratio"));
        assert!(check_rates(16_000, 8).is_err());
        assert!(check_rates(44_100, 16_000).is_ok());
    }

    #[test]
    fn the_cache_stays_within_its_bytes_and_keeps_recent_banks() {
        let mut cache = Cache::default();
        let mut kept = Vec::new();
        for from in (20_001..20_081).step_by(2) {
            kept.push(cache.insert((from, 16_000), Arc::new(Bank::new(from, 16_000))));
            assert!(cache.bytes <= CACHE_BYTES || cache.banks.len() == 1);
        }
        assert!(cache.get((20_079, 16_000)).is_some());
        assert!(cache.get((20_001, 16_000)).is_none(), "the oldest bank stayed past the budget");
    }
}
