//! DATETIME, DATE, TIME: the temporal codecs decode what CPython's `fromisoformat` decodes and
//! encode as Python's `isoformat` does (ATTR-12, ATTR-13).

use chrono::{NaiveDate, NaiveTime};
use flechtwerk::attribute::{Codec, CodecError, Date, DateTime, Time, UtcOffset, DATE, DATETIME, TIME};
use flechtwerk::json::Value;

use crate::vectors::{category, field, int, items, number, opt, text, text_of};

fn local(fields: &[Value]) -> chrono::NaiveDateTime {
    let f: Vec<i64> = fields.iter().map(int).collect();
    NaiveDate::from_ymd_opt(f[0] as i32, f[1] as u32, f[2] as u32)
        .and_then(|d| d.and_hms_micro_opt(f[3] as u32, f[4] as u32, f[5] as u32, f[6] as u32))
        .unwrap_or_else(|| panic!("fields {f:?}"))
}

/// A Python ValueError from `fromisoformat` against ours: the same verdict and, for range
/// errors, the same text.
pub(crate) fn assert_same_rejection(input: &str, error: &Value, ours: Result<(), CodecError>) {
    assert_eq!(text_of(error, "type"), "ValueError", "{input:?}");
    let message = text_of(error, "message");
    match ours {
        Err(CodecError::Temporal(e)) => {
            let want = (!message.starts_with("Invalid isoformat string")).then_some(message);
            assert_eq!(e.reason(), want, "{input:?}");
        }
        other => panic!("{input:?}: Python rejects ({message}), ours {other:?}"),
    }
}

fn encoded<V>(codec: &dyn Codec<V>, value: &V) -> String {
    match codec.encode(value) {
        Ok(Value::Str(s)) => s,
        other => panic!("encode gave {other:?}"),
    }
}

/// ATTR-12: DATETIME decodes what CPython 3.13's `datetime.fromisoformat` decodes and encodes
/// like the Python encoder, `Z` for UTC.
#[test]
fn attr_12_datetime_matches_python() {
    let datetime = category("datetime");
    for case in items(field(datetime, "decode_then_encode")) {
        let input = text_of(case, "input");
        let decoded = DATETIME.decode(&Value::Str(input.to_owned()));
        let Some(want) = opt(case, "encoded") else {
            assert_same_rejection(input, field(case, "error"), decoded.map(|_| ()));
            continue;
        };
        let value = decoded.unwrap_or_else(|e| panic!("{input:?}: Python decodes, ours: {e}"));
        assert_eq!(encoded(&DATETIME, &value), text(want), "{input:?}");
        let fields = field(case, "decoded");
        let offset = opt(fields, "utcoffset_seconds").filter(|v| **v != Value::Null).map(number);
        assert_eq!(
            value.offset().map(UtcOffset::as_micros),
            offset.map(|s| (s * 1e6).round() as i64),
            "{input:?}: offset"
        );
        assert_eq!(i64::from(value.local().and_utc().timestamp_subsec_micros()), int(field(fields, "microsecond")));
    }

    let mut divergent = 0;
    for case in items(field(datetime, "encode")) {
        let label = text_of(case, "tz_label");
        let want = text_of(case, "encoded");
        let tzname = opt(case, "tzname").filter(|v| **v != Value::Null).map(text);
        let local = local(items(field(case, "fields")));
        let offset_seconds = match field(case, "tz") {
            Value::Null => None,
            tz => Some(match (text_of(tz, "kind"), tzname) {
                ("timezone.utc", _) => 0.0,
                ("fixed", _) => number(field(tz, "offset_seconds")),
                ("zoneinfo", Some("UTC" | "GMT")) => 0.0,
                ("zoneinfo", Some("BST" | "CET")) => 3600.0,
                ("zoneinfo", Some("CEST")) => 7200.0,
                other => panic!("{label}: no offset known for {other:?}"),
            }),
        };
        let value = match offset_seconds {
            None => DateTime::Naive(local),
            Some(s) => DateTime::aware(local, UtcOffset::from_micros((s * 1e6).round() as i64).expect("offset")),
        };
        let ours = encoded(&DATETIME, &value);
        let zero = offset_seconds == Some(0.0);
        if zero && tzname != Some("UTC") {
            // Divergence: a zero-offset zone not named UTC (GMT, Europe/London in winter, a zone
            // named "Z") writes +00:00 in Python; an offset cannot carry the name, we write Z.
            assert_eq!(ours, want.replace("+00:00", "Z"), "{label} {local}");
            divergent += 1;
        } else if tzname == Some("UTC") && !zero && want.contains('Z') {
            // Divergence: Python's textual replace turns `+00:00:30` of a zone *named* UTC into `Z:30`.
            assert_eq!(ours, want.replace('Z', "+00:00"), "{label} {local}");
            divergent += 1;
        } else {
            assert_eq!(ours, want, "{label} {local}");
        }
    }
    assert_eq!(divergent, 17, "GMT, 'Z'-named, London winter and UTC-named +30 s cases");
}

/// ATTR-13: DATE ⇄ `YYYY-MM-DD` as Python's `date.fromisoformat` / `isoformat`.
#[test]
fn attr_13_date_matches_python() {
    let date = category("date");
    for case in items(field(date, "decode_then_encode")) {
        let input = text_of(case, "input");
        let decoded = DATE.decode(&Value::Str(input.to_owned()));
        match opt(case, "encoded") {
            Some(want) => {
                let value = decoded.unwrap_or_else(|e| panic!("{input:?}: Python decodes, ours: {e}"));
                assert_eq!(encoded(&DATE, &value), text(want), "{input:?}");
            }
            None => assert_same_rejection(input, field(case, "error"), decoded.map(|_| ())),
        }
    }
    for case in items(field(date, "encode")) {
        let Some(fields) = opt(case, "fields") else {
            // `DATE.encode(datetime(...))`: Python has no exact-type check; a Rust `Date` is a date.
            continue;
        };
        let f: Vec<i64> = items(fields).iter().map(int).collect();
        let value: Date = NaiveDate::from_ymd_opt(f[0] as i32, f[1] as u32, f[2] as u32).expect("date");
        assert_eq!(encoded(&DATE, &value), text_of(case, "encoded"), "{f:?}");
    }
}

/// ATTR-13: TIME ⇄ ISO time as Python's `time.fromisoformat` / `isoformat`, never `Z`.
#[test]
fn attr_13_time_matches_python() {
    let time = category("time");
    for case in items(field(time, "decode_then_encode")) {
        let input = text_of(case, "input");
        let decoded = TIME.decode(&Value::Str(input.to_owned()));
        match opt(case, "encoded") {
            Some(want) => {
                let value = decoded.unwrap_or_else(|e| panic!("{input:?}: Python decodes, ours: {e}"));
                assert_eq!(encoded(&TIME, &value), text(want), "{input:?}");
            }
            None => assert_same_rejection(input, field(case, "error"), decoded.map(|_| ())),
        }
    }
    for case in items(field(time, "encode")) {
        let label = text_of(case, "tz_label");
        let f: Vec<i64> = items(field(case, "fields")).iter().map(int).collect();
        let clock = NaiveTime::from_hms_micro_opt(f[0] as u32, f[1] as u32, f[2] as u32, f[3] as u32).expect("time");
        let offset = match label {
            "naive" => None,
            "timezone.utc" | "ZoneInfo('UTC')" => Some(UtcOffset::UTC),
            "timezone(timedelta(hours=-5,minutes=-30))" => UtcOffset::from_seconds(-19_800),
            other => panic!("no offset known for {other}"),
        };
        let want = opt(case, "encoded").map(text).unwrap_or_else(|| panic!("{label} {f:?}: Python error"));
        assert_eq!(encoded(&TIME, &Time::new(clock, offset)), want, "{label} {f:?}");
    }
}
