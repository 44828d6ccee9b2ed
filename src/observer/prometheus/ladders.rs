//! The bucket ladders of the histograms (MET-01..03), as Python 0.17's `flechtwerk.metrics`
//! declares them.

/// MET-01: every duration histogram (seconds). Past prometheus_client's default 10 s top, up to
/// the 10-minute transaction timeout, so a slow source does not pin every quantile at 10 s.
pub const DURATION_BUCKETS: [f64; 19] =
    [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0];

/// MET-02: every byte histogram (messages in and out, state records). Dense from 256 KiB up to
/// the 1 MiB default record ceiling, with a bound exactly on 1 048 576, and two beyond it.
pub const BYTE_BUCKETS: [f64; 15] = [
    256.0,
    1_024.0,
    4_096.0,
    16_384.0,
    65_536.0,
    131_072.0,
    262_144.0,
    393_216.0,
    524_288.0,
    655_360.0,
    786_432.0,
    917_504.0,
    1_048_576.0,
    2_097_152.0,
    4_194_304.0,
];

/// The largest batch cap a ladder can end in: an `f64` bound still tells the cap from the
/// cap − 1 below it.
pub const BATCH_CAP_MAX: usize = 1 << 53;

/// MET-03: the `batch_size` ladder for a cap of `batch_cap` records (an application's
/// `max_poll_records`, as in Python, where every poll is a batch): 1, 2, 5, 10,
/// 25, 50, 100, 250, ... (1-2.5-5 per decade, floored) while strictly below the cap − 1, then the
/// cap − 1 and the cap. The top bound is the cap itself (a quantile never exceeds the top bound),
/// and everything above the cap − 1 bound is a full poll or, here, a batch that gathered several
/// polls while a commit waited (TRX-45, in +Inf): the falling-behind signal of both fleets.
///
/// `batch_cap` must be in `1..=BATCH_CAP_MAX`.
///
/// ```
/// use flechtwerk::observer::prometheus::batch_size_buckets;
/// assert_eq!(batch_size_buckets(100), [1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 99.0, 100.0]);
/// assert_eq!(batch_size_buckets(500), [1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 499.0, 500.0]);
/// assert_eq!(batch_size_buckets(1), [0.0, 1.0]);
/// ```
pub fn batch_size_buckets(batch_cap: usize) -> Vec<f64> {
    assert!((1..=BATCH_CAP_MAX).contains(&batch_cap), "batch cap {batch_cap} is outside 1..=2^53");
    let cap = batch_cap as u128;
    let mut ladder = Vec::new();
    // Python: (m * 10**e // 10 for e in count() for m in (10, 25, 50)), taken while < cap - 1.
    'decades: for e in 0u32.. {
        for m in [10u128, 25, 50] {
            let step = m * 10u128.pow(e) / 10;
            if step >= cap - 1 {
                break 'decades;
            }
            ladder.push(step as f64);
        }
    }
    ladder.push((cap - 1) as f64);
    ladder.push(cap as f64);
    ladder
}
