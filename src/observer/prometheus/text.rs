//! The Prometheus text exposition format 0.0.4, written the way Python's prometheus_client
//! writes it (`generate_latest`), so that both implementations' scrapes read alike: labels
//! sorted by name with `le` among them, Go-style floats (`4.0`, `0.005`, `1.048576e+06`,
//! `5e+06`), each histogram's buckets, then `_count`, then `_sum`.

use std::fmt::Write as _;

use prometheus::proto::{LabelPair, MetricFamily, MetricType};

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Writes `families` (as [`prometheus::Registry::gather`] returns them: sorted by name, empty
/// families left out) in the text format.
///
/// ```
/// use flechtwerk::observer::prometheus::{text, PrometheusObserver};
/// use flechtwerk::observer::Observer;
/// let observer = PrometheusObserver::new(&[], 500)?;
/// observer.tasks_assigned(2);
/// let exposition = text::encode(&observer.registry().gather());
/// assert_eq!(exposition, observer.render());
/// # Ok::<(), String>(())
/// ```
pub fn encode(families: &[MetricFamily]) -> String {
    let mut out = String::with_capacity(4096);
    for family in families {
        let name = family.name();
        let kind = match family.get_field_type() {
            MetricType::COUNTER => "counter",
            MetricType::GAUGE => "gauge",
            MetricType::HISTOGRAM => "histogram",
            MetricType::SUMMARY => "summary",
            MetricType::UNTYPED => "untyped",
        };
        let _ = writeln!(out, "# HELP {name} {}", escape_help(family.help()));
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for metric in family.get_metric() {
            let labels = metric.get_label();
            match family.get_field_type() {
                MetricType::COUNTER => sample(&mut out, name, "", labels, None, metric.get_counter().get_value()),
                MetricType::GAUGE => sample(&mut out, name, "", labels, None, metric.get_gauge().get_value()),
                MetricType::HISTOGRAM => {
                    let histogram = metric.get_histogram();
                    for bucket in histogram.get_bucket() {
                        let bound = go_float(bucket.upper_bound());
                        sample(&mut out, name, "_bucket", labels, Some(&bound), bucket.cumulative_count() as f64);
                    }
                    let count = histogram.get_sample_count() as f64;
                    sample(&mut out, name, "_bucket", labels, Some("+Inf"), count);
                    sample(&mut out, name, "_count", labels, None, count);
                    sample(&mut out, name, "_sum", labels, None, histogram.get_sample_sum());
                }
                // This registry holds no summaries or untyped metrics.
                MetricType::SUMMARY | MetricType::UNTYPED => {}
            }
        }
    }
    out
}

/// One sample line; `le` goes among the labels in name order, as prometheus_client sorts them.
fn sample(out: &mut String, name: &str, suffix: &str, labels: &[LabelPair], le: Option<&str>, value: f64) {
    out.push_str(name);
    out.push_str(suffix);
    let mut le = le;
    if !labels.is_empty() || le.is_some() {
        out.push('{');
        let mut first = true;
        let mut pair = |out: &mut String, name: &str, value: &str| {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(name);
            out.push_str("=\"");
            escape_label_value(out, value);
            out.push('"');
        };
        for label in labels {
            if let Some(bound) = le.filter(|_| label.name() > "le") {
                pair(out, "le", bound);
                le = None;
            }
            pair(out, label.name(), label.value());
        }
        if let Some(bound) = le {
            pair(out, "le", bound);
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(&go_float(value));
    out.push('\n');
}

fn escape_help(help: &str) -> String {
    help.replace('\\', r"\\").replace('\n', r"\n")
}

fn escape_label_value(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str(r"\n"),
            c => out.push(c),
        }
    }
}

/// A float as prometheus_client's `floatToGoString` writes it: Python's `repr`, except that a
/// positive value with more than six integer digits switches to an exponent (`1.048576e+06`,
/// `5e+06`), as Go's formatting does. Kept quirk for quirk (from 1e10 on it writes `1e+010`,
/// which every Prometheus parser reads as 1e10).
///
/// ```
/// use flechtwerk::observer::prometheus::text::go_float;
/// assert_eq!(go_float(4.0), "4.0");
/// assert_eq!(go_float(1_048_576.0), "1.048576e+06"); // more than six integer digits
/// ```
pub fn go_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let repr = python_repr(value);
    match repr.find('.') {
        Some(dot) if value > 0.0 && dot > 6 => {
            let digits = format!("{}.{}{}", &repr[..1], &repr[1..dot], &repr[dot + 1..]);
            let mantissa = digits.trim_end_matches(['0', '.']);
            format!("{mantissa}e+0{}", dot - 1)
        }
        _ => repr,
    }
}

/// Python's `repr(float)`: the shortest digits that read back as the same value, in fixed
/// notation (with at least one decimal, `4.0`) for decimal exponents −4..=15, else as
/// `d.ddde±XX`.
///
/// ```
/// use flechtwerk::observer::prometheus::text::python_repr;
/// assert_eq!(python_repr(4.0), "4.0");
/// assert_eq!(python_repr(0.1), "0.1");
/// assert_eq!(python_repr(1e16), "1e+16");
/// ```
pub fn python_repr(value: f64) -> String {
    if value == 0.0 {
        return if value.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // Rust's `{:e}` is the shortest round-trip form too: `1.014623e6`, `4e-3`.
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific.split_once('e').expect("LowerExp writes an exponent");
    let exponent: i32 = exponent.parse().expect("LowerExp writes a decimal exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::new();
    if value < 0.0 {
        out.push('-');
    }
    if (-4..16).contains(&exponent) {
        if exponent >= 0 {
            let integer = exponent as usize + 1;
            if digits.len() <= integer {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', integer - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..integer]);
                out.push('.');
                out.push_str(&digits[integer..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exponent - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_read_as_prometheus_client_writes_them() {
        // Every value of tests/golden/python_metrics_exposition.txt, and the edges.
        let cases = [
            (4.0, "4.0"),
            (0.0, "0.0"),
            (0.005, "0.005"),
            (0.01, "0.01"),
            (600.0, "600.0"),
            (256.0, "256.0"),
            (917_504.0, "917504.0"),
            (1_048_576.0, "1.048576e+06"),
            (2_097_152.0, "2.097152e+06"),
            (4_194_304.0, "4.194304e+06"),
            (1_015_356.0, "1.015356e+06"),
            (1_014_623.0, "1.014623e+06"),
            (5_000_000.0, "5e+06"),
            (2_000_300.0, "2.0003e+06"),
            (2e6, "2e+06"),
            (1_767_225_600.0, "1.7672256e+09"),
            (12.304, "12.304"),
            (700.0699999999999, "700.0699999999999"),
            (45.6, "45.6"),
            (4246.0, "4246.0"),
            (999_999.0, "999999.0"),
            (1e10, "1e+010"),
            (1e16, "1e+16"),
            (1.5e300, "1.5e+300"),
            (0.0001, "0.0001"),
            (1e-5, "1e-05"),
            (-1_234_567.0, "-1234567.0"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
        ];
        for (value, text) in cases {
            assert_eq!(go_float(value), text, "{value:?}");
        }
    }

    #[test]
    fn reprs_read_back_as_the_same_value() {
        for value in [0.1, 1.0 / 3.0, 123_456.789, 1e-4, 9.999e15, 1e15, 2.5e-7, f64::MAX, f64::MIN_POSITIVE] {
            let repr = python_repr(value);
            assert_eq!(repr.parse::<f64>().unwrap(), value, "{repr}");
        }
        assert_eq!(python_repr(1e15), "1000000000000000.0");
        assert_eq!(python_repr(9.999e15), "9999000000000000.0");
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = String::new();
        escape_label_value(&mut out, "a\"b\\c\nd");
        assert_eq!(out, r#"a\"b\\c\nd"#);
        assert_eq!(escape_help("x\\y\nz"), r"x\\y\nz");
    }
}
