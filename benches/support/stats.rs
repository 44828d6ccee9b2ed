//! Statistics over a bench's rounds. Plain functions without dependencies, so that
//! `tests/bench_stats.rs` can check them (the benches themselves run without a test harness).

/// The median of `values`: the middle value of an odd count, the mean of the two middle values
/// of an even count (not the higher of the two). Panics on an empty slice.
pub fn median(values: &[f64]) -> f64 {
    assert!(!values.is_empty(), "the median of no values");
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    }
}
