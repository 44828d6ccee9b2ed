//! The benches' statistics (benches/support/stats.rs), which the benches cannot test themselves:
//! they run without a test harness.

#[path = "../benches/support/stats.rs"]
mod stats;

use stats::median;

/// An odd count: the middle value, whatever the order given.
#[test]
fn the_median_of_an_odd_count_is_the_middle_value() {
    assert_eq!(median(&[3.0]), 3.0);
    assert_eq!(median(&[9.0, 1.0, 5.0]), 5.0);
    assert_eq!(median(&[2.0, 8.0, 4.0, 6.0, 100.0]), 6.0);
}

/// An even count (two or four rounds): the mean of the two middle values, not the higher one,
/// as `values[len / 2]` gave.
#[test]
fn the_median_of_an_even_count_is_the_mean_of_the_two_middle_values() {
    assert_eq!(median(&[1.0, 3.0]), 2.0);
    assert_eq!(median(&[10.0, 40.0, 20.0, 30.0]), 25.0);
    assert_eq!(median(&[5.0, 5.0, 7.0, 100.0]), 6.0);
}

#[test]
#[should_panic(expected = "the median of no values")]
fn no_values_have_no_median() {
    median(&[]);
}
