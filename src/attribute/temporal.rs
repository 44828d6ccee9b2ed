//! DATE, DATETIME and TIME: Python's `fromisoformat` / `isoformat` semantics, microsecond
//! precision (ATTR-12, ATTR-13).

use chrono::{Datelike, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Timelike};

/// A calendar date (`YYYY-MM-DD` on the wire).
pub type Date = NaiveDate;

/// A DATETIME value: naive, or aware with a fixed UTC offset; microsecond precision.
///
/// An aware value with a zero offset encodes with `Z`: Python decodes both `Z` and `+00:00` to
/// `timezone.utc`, whose name is `UTC`, and its encoder writes `Z` exactly for such a zone. (Python
/// can also carry a named zone that merely has a zero offset, such as Europe/London in winter,
/// which encodes as `+00:00`; a fixed-offset value cannot express that distinction.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DateTime {
    /// No zone.
    Naive(NaiveDateTime),
    /// With a UTC offset.
    Aware(chrono::DateTime<FixedOffset>),
}

impl From<chrono::DateTime<chrono::Utc>> for DateTime {
    fn from(v: chrono::DateTime<chrono::Utc>) -> Self {
        DateTime::Aware(v.fixed_offset())
    }
}

impl From<chrono::DateTime<FixedOffset>> for DateTime {
    fn from(v: chrono::DateTime<FixedOffset>) -> Self {
        DateTime::Aware(v)
    }
}

impl From<NaiveDateTime> for DateTime {
    fn from(v: NaiveDateTime) -> Self {
        DateTime::Naive(v)
    }
}

/// A TIME value: a time of day with an optional UTC offset; microsecond precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Time {
    /// The wall-clock time.
    pub time: NaiveTime,
    /// The offset, if the value is aware.
    pub offset: Option<FixedOffset>,
}

impl From<NaiveTime> for Time {
    fn from(time: NaiveTime) -> Self {
        Time { time, offset: None }
    }
}

/// A date, time or datetime string that is not ISO 8601 in a form Python accepts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid isoformat {kind} string: {text:?}")]
pub struct TemporalError {
    kind: &'static str,
    text: String,
}

impl TemporalError {
    fn new(kind: &'static str, text: &str) -> Self {
        TemporalError { kind, text: text.to_owned() }
    }
}

pub(crate) fn parse_date(text: &str) -> Result<Date, TemporalError> {
    let err = || TemporalError::new("date", text);
    if text.len() != 10 || text.as_bytes()[4] != b'-' || text.as_bytes()[7] != b'-' {
        return Err(err());
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| err())
}

pub(crate) fn format_date(date: &Date) -> String {
    format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day())
}

/// Parses `HH:MM[:SS[.f{1,6}]]` and returns the time and the unparsed rest.
fn parse_clock<'t>(text: &'t str, kind: &'static str, whole: &str) -> Result<(NaiveTime, &'t str), TemporalError> {
    let err = || TemporalError::new(kind, whole);
    let b = text.as_bytes();
    let two = |i: usize| -> Result<u32, TemporalError> {
        match (b.get(i), b.get(i + 1)) {
            (Some(x @ b'0'..=b'9'), Some(y @ b'0'..=b'9')) => Ok(u32::from(x - b'0') * 10 + u32::from(y - b'0')),
            _ => Err(err()),
        }
    };
    let hour = two(0)?;
    if b.get(2) != Some(&b':') {
        return Err(err());
    }
    let minute = two(3)?;
    let mut pos = 5;
    let mut second = 0;
    let mut micros = 0;
    if b.get(pos) == Some(&b':') {
        second = two(pos + 1)?;
        pos += 3;
        if b.get(pos) == Some(&b'.') {
            let start = pos + 1;
            let mut end = start;
            while b.get(end).is_some_and(u8::is_ascii_digit) {
                end += 1;
            }
            let digits = &text[start..end];
            if digits.is_empty() || digits.len() > 6 {
                return Err(err());
            }
            micros = digits.parse::<u32>().map_err(|_| err())? * 10u32.pow(6 - digits.len() as u32);
            pos = end;
        }
    }
    let time = NaiveTime::from_hms_micro_opt(hour, minute, second, micros).ok_or_else(err)?;
    Ok((time, &text[pos..]))
}

/// Parses `Z`, `+HH:MM` or `-HH:MM` (the whole rest of the string).
fn parse_offset(rest: &str, kind: &'static str, whole: &str) -> Result<Option<FixedOffset>, TemporalError> {
    let err = || TemporalError::new(kind, whole);
    match rest.as_bytes().first() {
        None => Ok(None),
        Some(b'Z') if rest.len() == 1 => Ok(Some(FixedOffset::east_opt(0).expect("zero offset"))),
        Some(sign @ (b'+' | b'-')) => {
            let (clock, tail) = parse_clock(&rest[1..], kind, whole)?;
            if !tail.is_empty() || clock.nanosecond() != 0 {
                return Err(err());
            }
            let seconds = clock.num_seconds_from_midnight() as i32;
            let seconds = if *sign == b'-' { -seconds } else { seconds };
            FixedOffset::east_opt(seconds).map(Some).ok_or_else(err)
        }
        Some(_) => Err(err()),
    }
}

pub(crate) fn parse_datetime(text: &str) -> Result<DateTime, TemporalError> {
    let err = || TemporalError::new("datetime", text);
    if text.len() < 10 || !text.is_char_boundary(10) {
        return Err(err());
    }
    let date = parse_date(&text[..10]).map_err(|_| err())?;
    let rest = &text[10..];
    let (time, rest) = match rest.as_bytes().first() {
        None => (NaiveTime::MIN, ""),
        Some(b'T' | b' ') => parse_clock(&rest[1..], "datetime", text)?,
        Some(_) => return Err(err()),
    };
    let naive = date.and_time(time);
    match parse_offset(rest, "datetime", text)? {
        None => Ok(DateTime::Naive(naive)),
        Some(offset) => offset.from_local_datetime(&naive).single().map(DateTime::Aware).ok_or_else(err),
    }
}

fn push_clock(out: &mut String, time: &NaiveTime) {
    use std::fmt::Write as _;
    let micros = time.nanosecond() / 1_000;
    write!(out, "{:02}:{:02}:{:02}", time.hour(), time.minute(), time.second()).expect("write to String");
    if micros != 0 {
        write!(out, ".{micros:06}").expect("write to String");
    }
}

fn push_offset(out: &mut String, offset: &FixedOffset) {
    use std::fmt::Write as _;
    let seconds = offset.local_minus_utc();
    let sign = if seconds < 0 { '-' } else { '+' };
    let seconds = seconds.unsigned_abs();
    write!(out, "{sign}{:02}:{:02}", seconds / 3600, seconds / 60 % 60).expect("write to String");
    if seconds % 60 != 0 {
        write!(out, ":{:02}", seconds % 60).expect("write to String");
    }
}

pub(crate) fn format_datetime(value: &DateTime) -> String {
    let mut out = String::with_capacity(32);
    match value {
        DateTime::Naive(naive) => {
            out.push_str(&format_date(&naive.date()));
            out.push('T');
            push_clock(&mut out, &naive.time());
        }
        DateTime::Aware(aware) => {
            let local = aware.naive_local();
            out.push_str(&format_date(&local.date()));
            out.push('T');
            push_clock(&mut out, &local.time());
            if aware.offset().fix().local_minus_utc() == 0 {
                out.push('Z');
            } else {
                push_offset(&mut out, aware.offset());
            }
        }
    }
    out
}

pub(crate) fn parse_time(text: &str) -> Result<Time, TemporalError> {
    let (time, rest) = parse_clock(text, "time", text)?;
    let offset = parse_offset(rest, "time", text)?;
    Ok(Time { time, offset })
}

pub(crate) fn format_time(value: &Time) -> String {
    let mut out = String::with_capacity(24);
    push_clock(&mut out, &value.time);
    if let Some(offset) = &value.offset {
        // TIME never writes `Z` (ATTR-13): Python's time.isoformat() spells UTC `+00:00`.
        push_offset(&mut out, offset);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_12_datetime_z_rule() {
        let v = parse_datetime("2024-06-15T14:30:45.123Z").unwrap();
        assert_eq!(format_datetime(&v), "2024-06-15T14:30:45.123000Z");
        let v = parse_datetime("2024-06-15T14:30:45+00:00").unwrap();
        assert_eq!(format_datetime(&v), "2024-06-15T14:30:45Z");
        let v = parse_datetime("2024-06-15 14:30:45-05:30").unwrap();
        assert_eq!(format_datetime(&v), "2024-06-15T14:30:45-05:30");
        let v = parse_datetime("2024-06-15T14:30").unwrap();
        assert_eq!(format_datetime(&v), "2024-06-15T14:30:00");
    }

    #[test]
    fn attr_13_time_and_date() {
        let t = parse_time("13:30:00+00:00").unwrap();
        assert_eq!(format_time(&t), "13:30:00+00:00");
        assert_eq!(format_date(&parse_date("2024-02-29").unwrap()), "2024-02-29");
        assert!(parse_date("2023-02-29").is_err());
    }
}
