//! What this build of the native core is: version and compile-time features, so a bug report
//! can say exactly which core produced a result.

/// The crate version, kept equal to the Python package version by `pyproject.toml`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Whether this binary was compiled with optimizations (a debug core is about 10x slower, and
/// `stoker bench` and `benchmarks/` refuse to report numbers from it: `stoker.bench.require_optimized_core`).
pub fn is_optimized() -> bool {
    !cfg!(debug_assertions)
}

/// The CPU features the compiler could use for this build, for benchmark reports.
pub fn target_features() -> Vec<&'static str> {
    let mut features = Vec::new();
    if cfg!(target_feature = "sse4.1") {
        features.push("sse4.1");
    }
    if cfg!(target_feature = "avx2") {
        features.push("avx2");
    }
    if cfg!(target_feature = "neon") {
        features.push("neon");
    }
    features
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_semver() {
        let parts: Vec<&str> = VERSION.split('.').collect();
        assert_eq!(parts.len(), 3, "version {VERSION} is not MAJOR.MINOR.PATCH");
        assert!(parts.iter().all(|p| p.parse::<u32>().is_ok()));
    }
}
