//! DATE, DATETIME and TIME (ATTR-12, ATTR-13): an exact port of what the Python implementation
//! does with CPython 3.13, microsecond precision.
//!
//! Decoding is CPython 3.13's `date.fromisoformat`, `datetime.fromisoformat` and
//! `time.fromisoformat` (the C implementation, `_datetimemodule.c`), ported byte for byte: the
//! parsers below walk the UTF-8 bytes the same way, including the C code's reliance on the NUL
//! terminator. Encoding is `date.isoformat()`, `time.isoformat()`, and for DATETIME
//! `isoformat()` with `+00:00` replaced by `Z` when the zone is UTC. `tests/golden/datetime.rs`
//! pins both directions against vectors recorded from the Python implementation.
//!
//! ## What decodes
//!
//! A DATETIME is a date, then optionally **any single character** as the separator (`T`, a
//! space, `_`, `é`, an emoji, even a digit: `2024-06-15114:30:45`), then a time:
//!
//! - dates: `YYYY-MM-DD`, `YYYYMMDD`, and ISO week dates `YYYY-Www-D`, `YYYYWwwD`, `YYYY-Www`,
//!   `YYYYWww` (the Monday); a date alone is midnight. Ordinal dates (`2024-167`) are rejected.
//! - times: `HH`, `HH:MM`, `HH:MM:SS`, or the same without colons (`HHMM`, `HHMMSS`), then an
//!   optional fraction after `.` or `,` of any length, **truncated** to microseconds.
//! - offsets: `Z`, `±HH`, `±HHMM`, `±HH:MM`, `±HH:MM:SS[.ffffff]`. Offset fields are not range
//!   checked (`+00:99` is 99 minutes), but the total must lie strictly within ±24 h.
//!
//! The C parser's leniencies come along, because Python accepts them: one stray character
//! between the time and the offset (`14:30:45 +01:00`), a third `:` read as the decimal mark
//! (`12:34:56:78` is `12:34:56.78`), a decimal mark after the hour or minute (`12.5` is
//! `12:00:00.5`), eight bare digits as `HHMMSSff`, a NUL character after the value.
//! What Python rejects is rejected: `24:00`, leap second `:60`, lowercase `z`, surrounding
//! whitespace, signed years, a trailing `.`, invalid week 53. A DATE is exactly 7, 8 or 10
//! bytes of date (trailing bytes inside those lengths are ignored, as in Python:
//! `20240615XY`); a TIME may start with `T`.
//!
//! A zero offset (`Z`, `+00:00`, `-00:00`, and, as in CPython, any offset whose whole seconds
//! are zero, so `-00:00:00.000001` too) decodes to UTC.
//!
//! ## What encodes
//!
//! `YYYY-MM-DD`; `HH:MM:SS` with `.ffffff` only when the microseconds are non-zero; offsets as
//! `+HH:MM`, with `:SS` and `.ffffff` only when non-zero. DATETIME writes a zero offset as `Z`;
//! TIME never writes `Z` (`+00:00`). Years outside 1..=9999 and leap seconds, which Python
//! cannot represent, are encode errors; digits below the microsecond are dropped.
//!
//! ## Known divergences
//!
//! A [`UtcOffset`] is a number, not a named Python `tzinfo`, so two kinds of Python value have
//! no Rust equivalent (the golden test asserts our side of each):
//!
//! - **A named zone with a zero offset that is not called `UTC`**, such as
//!   `ZoneInfo("Europe/London")` in winter or `timezone(timedelta(0), "GMT")`: Python writes
//!   `+00:00` (`Z` asserts UTC, not a zero offset); ours is a zero offset and writes `Z`. Decoded
//!   values never hit this: Python decodes every zero offset to `timezone.utc`.
//! - **A zone named `UTC` with a non-zero offset**, `timezone(timedelta(seconds=30), "UTC")`:
//!   Python's textual `replace("+00:00", "Z")` writes `...T14:30:45Z:30`; we write `+00:00:30`.
//!   (With a whole-minute offset such as +01:00 both write `+01:00`.)
//!
//! Equality follows Python's `==`: naive values compare by their fields, aware values by the
//! instant they denote (`14:30+01:00 == 13:30Z`), and a naive value never equals an aware one.

use std::fmt::{self, Write as _};
use std::hash::{Hash, Hasher};

use chrono::{Datelike, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

/// A calendar date (`YYYY-MM-DD` on the wire).
///
/// ```
/// use flechtwerk::attribute::{Attribute, Date, DATE};
/// const DUE: Attribute<Date> = Attribute::new("due", &DATE);
/// let due = Date::from_ymd_opt(2024, 6, 15).unwrap(); // chrono's NaiveDate
/// assert_eq!(flechtwerk::Event::new().with(&DUE, due).unwrap().encode().unwrap(), br#"{"due":"2024-06-15"}"#);
/// ```
pub type Date = NaiveDate;

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// A fixed UTC offset with microsecond precision, strictly between -24 h and +24 h: Python's
/// `datetime.timezone` without its name.
///
/// Python offsets may carry seconds and microseconds (`+05:30:15.123456` decodes and
/// re-encodes), which [`FixedOffset`] (whole seconds) cannot hold.
///
/// ```
/// use flechtwerk::attribute::UtcOffset;
/// let ist = UtcOffset::from_seconds(5 * 3600 + 30 * 60).unwrap();
/// assert_eq!(ist.to_string(), "+05:30");
/// assert_eq!(UtcOffset::from_micros(-1).unwrap().to_string(), "-00:00:00.000001");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UtcOffset {
    micros: i64,
}

impl UtcOffset {
    /// The zero offset: UTC.
    ///
    /// ```
    /// use flechtwerk::attribute::UtcOffset;
    /// assert!(UtcOffset::UTC.is_utc());
    /// assert_eq!(UtcOffset::UTC.to_string(), "+00:00");
    /// ```
    pub const UTC: UtcOffset = UtcOffset { micros: 0 };

    /// An offset of `micros` east of UTC; `None` unless strictly within ±24 h.
    ///
    /// ```
    /// use flechtwerk::attribute::UtcOffset;
    /// assert_eq!(UtcOffset::from_micros(3_600_000_000).unwrap().to_string(), "+01:00");
    /// assert_eq!(UtcOffset::from_micros(86_400_000_000), None); // 24 h is out of range
    /// ```
    pub const fn from_micros(micros: i64) -> Option<Self> {
        if micros > -MICROS_PER_DAY && micros < MICROS_PER_DAY {
            Some(UtcOffset { micros })
        } else {
            None
        }
    }

    /// An offset of `seconds` east of UTC; `None` unless strictly within ±24 h.
    ///
    /// ```
    /// use flechtwerk::attribute::UtcOffset;
    /// assert_eq!(UtcOffset::from_seconds(-7 * 3600).unwrap().to_string(), "-07:00");
    /// ```
    pub const fn from_seconds(seconds: i32) -> Option<Self> {
        Self::from_micros(seconds as i64 * MICROS_PER_SECOND)
    }

    /// Microseconds east of UTC.
    ///
    /// ```
    /// use flechtwerk::attribute::UtcOffset;
    /// assert_eq!(UtcOffset::from_seconds(90).unwrap().as_micros(), 90_000_000);
    /// ```
    pub const fn as_micros(self) -> i64 {
        self.micros
    }

    /// Whether this is the zero offset.
    ///
    /// ```
    /// use flechtwerk::attribute::UtcOffset;
    /// assert!(UtcOffset::from_seconds(0).unwrap().is_utc());
    /// assert!(!UtcOffset::from_seconds(3600).unwrap().is_utc());
    /// ```
    pub const fn is_utc(self) -> bool {
        self.micros == 0
    }

    /// The offset as a chrono [`FixedOffset`]; `None` when it has a fraction of a second.
    ///
    /// ```
    /// use flechtwerk::attribute::UtcOffset;
    /// assert_eq!(UtcOffset::from_seconds(3600).unwrap().to_fixed_offset().unwrap().local_minus_utc(), 3600);
    /// assert_eq!(UtcOffset::from_micros(1).unwrap().to_fixed_offset(), None);
    /// ```
    pub fn to_fixed_offset(self) -> Option<FixedOffset> {
        if self.micros % MICROS_PER_SECOND != 0 {
            return None;
        }
        FixedOffset::east_opt((self.micros / MICROS_PER_SECOND) as i32)
    }
}

impl From<FixedOffset> for UtcOffset {
    fn from(offset: FixedOffset) -> Self {
        UtcOffset { micros: i64::from(offset.local_minus_utc()) * MICROS_PER_SECOND }
    }
}

impl fmt::Display for UtcOffset {
    /// Python's `_format_offset`: `+HH:MM`, then `:SS` and `.ffffff` only when non-zero.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.micros < 0 { '-' } else { '+' };
        let abs = self.micros.unsigned_abs();
        let micros_per_second = MICROS_PER_SECOND as u64;
        let seconds = abs / micros_per_second;
        let micros = abs % micros_per_second;
        let (minutes, seconds) = (seconds / 60, seconds % 60);
        write!(f, "{sign}{:02}:{:02}", minutes / 60, minutes % 60)?;
        if seconds != 0 || micros != 0 {
            write!(f, ":{seconds:02}")?;
            if micros != 0 {
                write!(f, ".{micros:06}")?;
            }
        }
        Ok(())
    }
}

/// A DATETIME value: naive, or aware with a fixed UTC offset; microsecond precision.
///
/// An aware value with a zero offset encodes with `Z`: Python decodes both `Z` and `+00:00` to
/// `timezone.utc`, whose name is `UTC`, and its encoder writes `Z` exactly for such a zone. (Python
/// can also carry a named zone that merely has a zero offset, such as Europe/London in winter,
/// which encodes as `+00:00`; an offset cannot express that distinction, see the module docs.)
///
/// Equality is Python's: naive values by their fields, aware values by instant, naive ≠ aware.
///
/// ```
/// use flechtwerk::attribute::{Codec, DateTime, DATETIME};
/// use flechtwerk::json::Value;
/// let parse = |s: &str| DATETIME.decode(&Value::Str(s.into())).unwrap();
/// assert_eq!(parse("2024-06-15T14:30+01:00"), parse("2024-06-15T13:30Z")); // the same instant
/// assert_ne!(parse("2024-06-15T13:30"), parse("2024-06-15T13:30Z")); // naive ≠ aware
/// assert!(matches!(parse("2024-06-15T13:30"), DateTime::Naive(_)));
/// ```
#[derive(Clone, Copy, Debug)]
pub enum DateTime {
    /// No zone.
    Naive(NaiveDateTime),
    /// A wall-clock time at a UTC offset.
    Aware {
        /// The local wall-clock date and time (what the string shows).
        local: NaiveDateTime,
        /// The offset of `local` from UTC.
        offset: UtcOffset,
    },
}

impl DateTime {
    /// An aware value: `local` wall-clock time at `offset`.
    ///
    /// ```
    /// use flechtwerk::attribute::{Codec, Date, DateTime, UtcOffset, DATETIME};
    /// let local = Date::from_ymd_opt(2024, 6, 15).unwrap().and_hms_opt(14, 30, 0).unwrap();
    /// let at = DateTime::aware(local, UtcOffset::from_seconds(7200).unwrap());
    /// assert_eq!(DATETIME.encode(&at).unwrap(), flechtwerk::json::Value::Str("2024-06-15T14:30:00+02:00".into()));
    /// ```
    pub const fn aware(local: NaiveDateTime, offset: UtcOffset) -> Self {
        DateTime::Aware { local, offset }
    }

    /// An aware value in UTC.
    ///
    /// ```
    /// use flechtwerk::attribute::{Codec, Date, DateTime, DATETIME};
    /// let local = Date::from_ymd_opt(2024, 6, 15).unwrap().and_hms_opt(14, 30, 0).unwrap();
    /// assert_eq!(DATETIME.encode(&DateTime::utc(local)).unwrap(), flechtwerk::json::Value::Str("2024-06-15T14:30:00Z".into()));
    /// ```
    pub const fn utc(local: NaiveDateTime) -> Self {
        DateTime::Aware { local, offset: UtcOffset::UTC }
    }

    /// The wall-clock date and time.
    ///
    /// ```
    /// use flechtwerk::attribute::{Codec, DATETIME};
    /// let at = DATETIME.decode(&flechtwerk::json::Value::Str("2024-06-15T14:30+02:00".into())).unwrap();
    /// assert_eq!(at.local().to_string(), "2024-06-15 14:30:00"); // as written, not converted
    /// ```
    pub fn local(&self) -> NaiveDateTime {
        match *self {
            DateTime::Naive(local) | DateTime::Aware { local, .. } => local,
        }
    }

    /// The offset, if the value is aware.
    ///
    /// ```
    /// use flechtwerk::attribute::{Codec, DATETIME};
    /// let at = DATETIME.decode(&flechtwerk::json::Value::Str("2024-06-15T14:30+02:00".into())).unwrap();
    /// assert_eq!(at.offset().map(|o| o.as_micros()), Some(7_200_000_000));
    /// ```
    pub fn offset(&self) -> Option<UtcOffset> {
        match *self {
            DateTime::Naive(_) => None,
            DateTime::Aware { offset, .. } => Some(offset),
        }
    }

    /// The value as a chrono `DateTime<FixedOffset>`; `None` when naive or when the offset has
    /// a fraction of a second.
    ///
    /// ```
    /// use flechtwerk::attribute::{Codec, DATETIME};
    /// let at = DATETIME.decode(&flechtwerk::json::Value::Str("2024-06-15T14:30Z".into())).unwrap();
    /// assert_eq!(at.to_chrono().unwrap().timestamp(), 1_718_461_800);
    /// ```
    pub fn to_chrono(&self) -> Option<chrono::DateTime<FixedOffset>> {
        let DateTime::Aware { local, offset } = *self else {
            return None;
        };
        local.and_local_timezone(offset.to_fixed_offset()?).single()
    }

    /// Python's equality key: fields for naive values, the UTC instant for aware ones.
    fn key(&self) -> (bool, i128) {
        match *self {
            DateTime::Naive(local) => (false, micros_since_epoch(&local)),
            DateTime::Aware { local, offset } => (true, micros_since_epoch(&local) - i128::from(offset.micros)),
        }
    }
}

fn micros_since_epoch(local: &NaiveDateTime) -> i128 {
    let utc = local.and_utc();
    i128::from(utc.timestamp()) * i128::from(MICROS_PER_SECOND) + i128::from(utc.timestamp_subsec_micros())
}

impl PartialEq for DateTime {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for DateTime {}

impl Hash for DateTime {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl From<chrono::DateTime<chrono::Utc>> for DateTime {
    fn from(v: chrono::DateTime<chrono::Utc>) -> Self {
        DateTime::utc(v.naive_utc())
    }
}

impl From<chrono::DateTime<FixedOffset>> for DateTime {
    fn from(v: chrono::DateTime<FixedOffset>) -> Self {
        DateTime::aware(v.naive_local(), (*v.offset()).into())
    }
}

impl From<NaiveDateTime> for DateTime {
    fn from(v: NaiveDateTime) -> Self {
        DateTime::Naive(v)
    }
}

/// A TIME value: a time of day with an optional UTC offset; microsecond precision.
///
/// Equality is Python's: naive values by their fields, aware values by the time minus the
/// offset, naive ≠ aware.
///
/// ```
/// use flechtwerk::attribute::{Codec, TIME};
/// use flechtwerk::json::Value;
/// let parse = |s: &str| TIME.decode(&Value::Str(s.into())).unwrap();
/// assert_eq!(parse("14:30+01:00"), parse("13:30+00:00"));
/// assert_eq!(parse("09:15").offset, None);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Time {
    /// The wall-clock time.
    pub time: NaiveTime,
    /// The offset, if the value is aware.
    pub offset: Option<UtcOffset>,
}

impl Time {
    /// A time of day, naive or at an offset.
    ///
    /// ```
    /// use flechtwerk::attribute::{Codec, Time, UtcOffset, TIME};
    /// let nine = chrono::NaiveTime::from_hms_opt(9, 0, 0).unwrap();
    /// let at = Time::new(nine, Some(UtcOffset::UTC));
    /// assert_eq!(TIME.encode(&at).unwrap(), flechtwerk::json::Value::Str("09:00:00+00:00".into()));
    /// ```
    pub const fn new(time: NaiveTime, offset: Option<UtcOffset>) -> Self {
        Time { time, offset }
    }

    fn key(&self) -> (bool, i64) {
        let micros = i64::from(self.time.num_seconds_from_midnight()) * MICROS_PER_SECOND
            + i64::from(self.time.nanosecond() / 1_000);
        match self.offset {
            None => (false, micros),
            Some(offset) => (true, micros - offset.micros),
        }
    }
}

impl PartialEq for Time {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Time {}

impl Hash for Time {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl From<NaiveTime> for Time {
    fn from(time: NaiveTime) -> Self {
        Time { time, offset: None }
    }
}

/// A date, time or datetime string that Python's `fromisoformat` rejects, or a value Python
/// cannot represent.
///
/// ```
/// use flechtwerk::attribute::{Codec, CodecError, DATE};
/// let error = DATE.decode(&flechtwerk::json::Value::Str("2024-02-30".into())).unwrap_err();
/// let CodecError::Temporal(error) = error else { panic!("not a temporal error") };
/// assert_eq!((error.kind(), error.input(), error.reason()), ("date", "2024-02-30", Some("day is out of range for month")));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemporalError {
    kind: &'static str,
    text: String,
    reason: Option<String>,
}

impl TemporalError {
    /// Python's `Invalid isoformat string`: the text is not in the grammar.
    fn syntax(kind: &'static str, text: &str) -> Self {
        TemporalError { kind, text: text.to_owned(), reason: None }
    }

    /// A field out of range, with Python's `ValueError` text (e.g. `hour must be in 0..23`).
    fn range(kind: &'static str, text: &str, reason: String) -> Self {
        TemporalError { kind, text: text.to_owned(), reason: Some(reason) }
    }

    /// `"date"`, `"datetime"` or `"time"`.
    ///
    /// ```
    /// use flechtwerk::attribute::{Codec, CodecError, TIME};
    /// let Err(CodecError::Temporal(error)) = TIME.decode(&flechtwerk::json::Value::Str("25:00".into())) else { panic!() };
    /// assert_eq!(error.kind(), "time");
    /// ```
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The rejected string (for an encode error, a rendering of the value).
    ///
    /// ```
    /// use flechtwerk::attribute::{Codec, CodecError, DATETIME};
    /// let Err(CodecError::Temporal(error)) = DATETIME.decode(&flechtwerk::json::Value::Str("yesterday".into())) else { panic!() };
    /// assert_eq!(error.input(), "yesterday");
    /// ```
    pub fn input(&self) -> &str {
        &self.text
    }

    /// For a value out of range, Python's `ValueError` text (`"hour must be in 0..23"`,
    /// `"day is out of range for month"`, ...); `None` when the text is not in the grammar at all
    /// (Python's `"Invalid isoformat string: ..."`).
    ///
    /// ```
    /// use flechtwerk::attribute::{Codec, CodecError, DATE};
    /// let Err(CodecError::Temporal(error)) = DATE.decode(&flechtwerk::json::Value::Str("June 15".into())) else { panic!() };
    /// assert_eq!(error.reason(), None); // not in the grammar at all
    /// ```
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
}

impl fmt::Display for TemporalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            None => write!(f, "invalid isoformat {} string: {:?}", self.kind, self.text),
            Some(reason) => write!(f, "invalid {} {:?}: {reason}", self.kind, self.text),
        }
    }
}

impl std::error::Error for TemporalError {}

// ---------------------------------------------------------------------------------------------
// The parser: CPython 3.13's C code, over the UTF-8 bytes and a virtual NUL terminator.

/// The input as the C parser sees it: UTF-8 bytes, then NUL.
struct CStr<'a>(&'a [u8]);

impl CStr<'_> {
    /// The byte at `i`; the terminator (and anything past it) reads as NUL. The ported code
    /// never reads past the terminator, exactly like the C code.
    fn at(&self, i: usize) -> u8 {
        self.0.get(i).copied().unwrap_or(0)
    }
}

/// `parse_digits`: exactly `n` ASCII digits at `p`.
fn parse_digits(s: &CStr<'_>, mut p: usize, n: usize) -> Option<(i64, usize)> {
    let mut value = 0;
    for _ in 0..n {
        let digit = s.at(p).wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value * 10 + i64::from(digit);
        p += 1;
    }
    Some((value, p))
}

/// Hour, minute, second, microsecond, unchecked (the C parser leaves range checks to the
/// constructors).
#[derive(Clone, Copy, Debug, Default)]
struct Clock {
    hour: i64,
    minute: i64,
    second: i64,
    micros: i64,
}

/// `parse_hh_mm_ss_ff` over `[start, end)`: the clock, and whether the C function returned 1
/// ("not at the end of the string"); `None` for its negative returns.
fn parse_hh_mm_ss_ff(s: &CStr<'_>, start: usize, end: usize) -> Option<(Clock, bool)> {
    let mut vals = [0i64; 3];
    let clock = |vals: [i64; 3], micros| Clock { hour: vals[0], minute: vals[1], second: vals[2], micros };
    let mut p = start;
    let mut has_separator = true;
    let mut i = 0;
    while i < 3 {
        let (value, next) = parse_digits(s, p, 2)?;
        vals[i] = value;
        p = next;
        let c = s.at(p);
        p += 1;
        if i == 0 {
            has_separator = c == b':';
        }
        if p >= end {
            return Some((clock(vals, 0), c != 0));
        } else if has_separator && c == b':' {
            i += 1;
            continue;
        } else if c == b'.' || c == b',' {
            break;
        } else if !has_separator {
            p -= 1;
        } else {
            return None; // malformed time separator
        }
        i += 1;
    }
    // The fraction: up to six digits count, further digits are skipped (truncation).
    let to_parse = end.saturating_sub(p).min(6);
    if to_parse == 0 {
        return None; // unreachable: the C code would index `correction[-1]` here
    }
    let (fraction, mut p) = parse_digits(s, p, to_parse)?;
    let micros = fraction * 10i64.pow((6 - to_parse) as u32);
    while s.at(p).is_ascii_digit() {
        p += 1;
    }
    Some((clock(vals, micros), s.at(p) != 0))
}

/// An offset as parsed: whole seconds and the (same-signed) microseconds.
type RawOffset = (i64, i64);

/// `parse_isoformat_time` over `len` bytes at `start`: the clock and the offset, if any.
fn parse_isoformat_time(s: &CStr<'_>, start: usize, len: usize) -> Option<(Clock, Option<RawOffset>)> {
    let end = start + len;
    // The first `Z`, `+` or `-` starts the offset (a `do ... while` in C: the first byte is
    // always inspected, even when `len` is 0).
    let mut tz = start;
    loop {
        if matches!(s.at(tz), b'Z' | b'+' | b'-') {
            break;
        }
        tz += 1;
        if tz >= end {
            break;
        }
    }
    let (clock, more) = parse_hh_mm_ss_ff(s, start, tz)?;
    if tz == end {
        // No offset: anything after the time is an error.
        return if more { None } else { Some((clock, None)) };
    }
    if s.at(tz) == b'Z' {
        return if s.at(tz + 1) != 0 { None } else { Some((clock, Some((0, 0)))) };
    }
    let sign = if s.at(tz) == b'-' { -1 } else { 1 };
    let (offset, more) = parse_hh_mm_ss_ff(s, tz + 1, end)?;
    if more {
        return None;
    }
    Some((clock, Some((sign * (offset.hour * 3600 + offset.minute * 60 + offset.second), sign * offset.micros))))
}

/// `_find_isoformat_datetime_separator`: where the date ends (the separator's byte position),
/// or -1.
fn find_separator(s: &CStr<'_>, len: usize) -> isize {
    if len == 7 {
        return 7;
    }
    if s.at(4) == b'-' {
        if s.at(5) == b'W' {
            if len < 8 {
                return -1;
            }
            if len > 8 && s.at(8) == b'-' {
                // YYYY-Www-D (10) or YYYY-Www-HH (8)
                if len == 9 {
                    return -1;
                }
                if len > 10 && s.at(10).is_ascii_digit() {
                    return 8;
                }
                return 10;
            }
            return 8; // YYYY-Www
        }
        return 10; // YYYY-MM-DD
    }
    if s.at(4) == b'W' {
        // YYYYWww (7) or YYYYWwwd (8): count the digits from position 7.
        let mut idx = 7;
        while idx < len && s.at(idx).is_ascii_digit() {
            idx += 1;
        }
        if idx < 9 {
            return idx as isize;
        }
        return if idx % 2 == 0 { 7 } else { 8 };
    }
    8 // YYYYMMDD
}

/// `parse_isoformat_date` with `len` bytes of date: year, month and day, unchecked (a week date
/// is converted, and may land in year 10000).
fn parse_isoformat_date(s: &CStr<'_>, len: usize) -> Option<(i64, i64, i64)> {
    let (year, mut p) = parse_digits(s, 0, 4)?;
    let uses_separator = s.at(p) == b'-';
    if uses_separator {
        p += 1;
    }
    if s.at(p) == b'W' {
        let (week, next) = parse_digits(s, p + 1, 2)?;
        p = next;
        let mut day = 1;
        if p < len {
            if uses_separator {
                if s.at(p) != b'-' {
                    return None;
                }
                p += 1;
            }
            day = parse_digits(s, p, 1)?.0;
        }
        return iso_to_ymd(year, week, day);
    }
    let (month, mut p) = parse_digits(s, p, 2)?;
    if uses_separator {
        if s.at(p) != b'-' {
            return None;
        }
        p += 1;
    }
    let (day, _) = parse_digits(s, p, 2)?;
    Some((year, month, day))
}

/// `iso_to_ymd`: an ISO week date to a calendar date.
fn iso_to_ymd(iso_year: i64, week: i64, day: i64) -> Option<(i64, i64, i64)> {
    if !(1..=9999).contains(&iso_year) {
        return None;
    }
    let jan_1 = NaiveDate::from_ymd_opt(iso_year as i32, 1, 1)?;
    if !(1..53).contains(&week) {
        // Week 53 exists in years starting on a Thursday, and leap years starting on a Wednesday.
        let weekday = jan_1.weekday().num_days_from_monday();
        let long_year = weekday == 3 || (weekday == 2 && jan_1.leap_year());
        if week != 53 || !long_year {
            return None;
        }
    }
    if !(1..8).contains(&day) {
        return None;
    }
    // The Monday of week 1: the week holding the year's first Thursday.
    let first_day = i64::from(jan_1.num_days_from_ce());
    let first_weekday = i64::from(jan_1.weekday().num_days_from_monday());
    let mut week1_monday = first_day - first_weekday;
    if first_weekday > 3 {
        week1_monday += 7;
    }
    let ordinal = week1_monday + (week - 1) * 7 + day - 1;
    let date = NaiveDate::from_num_days_from_ce_opt(i32::try_from(ordinal).ok()?)?;
    Some((i64::from(date.year()), i64::from(date.month()), i64::from(date.day())))
}

/// `check_date_args`: the date, or Python's `ValueError` text.
fn check_date(year: i64, month: i64, day: i64) -> Result<NaiveDate, String> {
    if !(1..=9999).contains(&year) {
        return Err(format!("year {year} is out of range"));
    }
    if !(1..=12).contains(&month) {
        return Err("month must be in 1..12".to_owned());
    }
    NaiveDate::from_ymd_opt(year as i32, month as u32, day as u32)
        .ok_or_else(|| "day is out of range for month".to_owned())
}

/// `check_time_args`: the time, or Python's `ValueError` text.
fn check_time(clock: Clock) -> Result<NaiveTime, String> {
    let Clock { hour, minute, second, micros } = clock;
    if !(0..=23).contains(&hour) {
        return Err("hour must be in 0..23".to_owned());
    }
    if !(0..=59).contains(&minute) {
        return Err("minute must be in 0..59".to_owned());
    }
    if !(0..=59).contains(&second) {
        return Err("second must be in 0..59".to_owned());
    }
    NaiveTime::from_hms_micro_opt(hour as u32, minute as u32, second as u32, micros as u32)
        .ok_or_else(|| "microsecond must be in 0..999999".to_owned())
}

/// `tzinfo_from_isoformat_results`: whole seconds 0 is UTC (its microseconds are dropped, a
/// CPython quirk); anything else must lie strictly within ±24 h.
fn offset_from((seconds, micros): RawOffset) -> Result<UtcOffset, String> {
    if seconds == 0 {
        return Ok(UtcOffset::UTC);
    }
    let total = seconds * MICROS_PER_SECOND + micros;
    UtcOffset::from_micros(total).ok_or_else(|| {
        format!(
            "offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not {}.",
            timedelta_repr(total)
        )
    })
}

/// `repr(timedelta(microseconds=micros))`.
fn timedelta_repr(micros: i64) -> String {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let rest = micros.rem_euclid(MICROS_PER_DAY);
    let (seconds, micros) = (rest / MICROS_PER_SECOND, rest % MICROS_PER_SECOND);
    let parts: Vec<String> = [("days", days), ("seconds", seconds), ("microseconds", micros)]
        .iter()
        .filter(|(_, v)| *v != 0)
        .map(|(name, v)| format!("{name}={v}"))
        .collect();
    if parts.is_empty() {
        "datetime.timedelta(0)".to_owned()
    } else {
        format!("datetime.timedelta({})", parts.join(", "))
    }
}

/// `date.fromisoformat`.
pub(crate) fn parse_date(text: &str) -> Result<Date, TemporalError> {
    let syntax = || TemporalError::syntax("date", text);
    let len = text.len();
    if !matches!(len, 7 | 8 | 10) {
        return Err(syntax());
    }
    let (year, month, day) = parse_isoformat_date(&CStr(text.as_bytes()), len).ok_or_else(syntax)?;
    check_date(year, month, day).map_err(|reason| TemporalError::range("date", text, reason))
}

/// `datetime.fromisoformat`.
pub(crate) fn parse_datetime(text: &str) -> Result<DateTime, TemporalError> {
    let syntax = || TemporalError::syntax("datetime", text);
    let range = |reason| TemporalError::range("datetime", text, reason);
    // `_sanitize_isoformat_str`: every valid string has at least 7 characters.
    if text.chars().count() < 7 {
        return Err(syntax());
    }
    let s = CStr(text.as_bytes());
    let len = text.len();
    // A negative separator position only arises for `YYYY-Www-` (9 bytes), whose date part
    // then fails to parse in C as well.
    let sep = usize::try_from(find_separator(&s, len)).map_err(|_| syntax())?;
    let (year, month, day) = parse_isoformat_date(&s, sep).ok_or_else(syntax)?;
    let mut clock = Clock::default();
    let mut offset = None;
    if len > sep {
        // The separator is any one character: skip it by the length its UTF-8 lead byte states.
        let lead = s.at(sep);
        let width = if lead & 0x80 == 0 {
            1
        } else {
            match lead & 0xf0 {
                0xe0 => 3,
                0xf0 => 4,
                _ => 2,
            }
        };
        let start = sep + width;
        if !text.is_char_boundary(sep) || start > len {
            return Err(syntax()); // unreachable for a parsed date: its bytes are ASCII
        }
        (clock, offset) = parse_isoformat_time(&s, start, len - start).ok_or_else(syntax)?;
    }
    let offset = offset.map(offset_from).transpose().map_err(range)?;
    let date = check_date(year, month, day).map_err(range)?;
    let local = date.and_time(check_time(clock).map_err(range)?);
    Ok(match offset {
        None => DateTime::Naive(local),
        Some(offset) => DateTime::Aware { local, offset },
    })
}

/// `time.fromisoformat`.
pub(crate) fn parse_time(text: &str) -> Result<Time, TemporalError> {
    let syntax = || TemporalError::syntax("time", text);
    let range = |reason| TemporalError::range("time", text, reason);
    let s = CStr(text.as_bytes());
    // A leading `T` is allowed (ISO 8601's time designator).
    let start = usize::from(s.at(0) == b'T');
    let (clock, offset) = parse_isoformat_time(&s, start, text.len() - start).ok_or_else(syntax)?;
    let offset = offset.map(offset_from).transpose().map_err(range)?;
    let time = check_time(clock).map_err(range)?;
    Ok(Time { time, offset })
}

// ---------------------------------------------------------------------------------------------
// The encoders.

fn push_date(out: &mut String, kind: &'static str, date: &Date) -> Result<(), TemporalError> {
    let year = date.year();
    if !(1..=9999).contains(&year) {
        return Err(TemporalError::range(kind, &date.to_string(), format!("year {year} is out of range")));
    }
    write!(out, "{year:04}-{:02}-{:02}", date.month(), date.day()).expect("write to String");
    Ok(())
}

/// `HH:MM:SS[.ffffff]`. Sub-microsecond digits are dropped; a chrono leap second has no Python
/// equivalent and is refused.
fn push_clock(out: &mut String, kind: &'static str, time: &NaiveTime) -> Result<(), TemporalError> {
    let nanos = time.nanosecond();
    if nanos >= 1_000_000_000 {
        return Err(TemporalError::range(kind, &time.to_string(), "second must be in 0..59".to_owned()));
    }
    write!(out, "{:02}:{:02}:{:02}", time.hour(), time.minute(), time.second()).expect("write to String");
    let micros = nanos / 1_000;
    if micros != 0 {
        write!(out, ".{micros:06}").expect("write to String");
    }
    Ok(())
}

/// `date.isoformat()`.
pub(crate) fn format_date(date: &Date) -> Result<String, TemporalError> {
    let mut out = String::with_capacity(10);
    push_date(&mut out, "date", date)?;
    Ok(out)
}

/// DATETIME's encoder: `isoformat()`, with `Z` for UTC.
pub(crate) fn format_datetime(value: &DateTime) -> Result<String, TemporalError> {
    let mut out = String::with_capacity(32);
    let local = value.local();
    push_date(&mut out, "datetime", &local.date())?;
    out.push('T');
    push_clock(&mut out, "datetime", &local.time())?;
    match value.offset() {
        None => {}
        Some(offset) if offset.is_utc() => out.push('Z'),
        Some(offset) => write!(out, "{offset}").expect("write to String"),
    }
    Ok(out)
}

/// `time.isoformat()`: never `Z` (ATTR-13), Python spells UTC `+00:00`.
pub(crate) fn format_time(value: &Time) -> Result<String, TemporalError> {
    let mut out = String::with_capacity(24);
    push_clock(&mut out, "time", &value.time)?;
    if let Some(offset) = value.offset {
        write!(out, "{offset}").expect("write to String");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encoded value, or `!` and the reason (`syntax` for Python's "Invalid isoformat").
    fn dt(text: &str) -> String {
        match parse_datetime(text) {
            Ok(v) => format_datetime(&v).unwrap(),
            Err(e) => format!("!{}", e.reason().unwrap_or("syntax")),
        }
    }

    /// The encoded value, or `!` and the reason (`syntax` for Python's "Invalid isoformat").
    fn tm(text: &str) -> String {
        match parse_time(text) {
            Ok(v) => format_time(&v).unwrap(),
            Err(e) => format!("!{}", e.reason().unwrap_or("syntax")),
        }
    }

    /// The encoded value, or `!` and the reason (`syntax` for Python's "Invalid isoformat").
    fn dd(text: &str) -> String {
        match parse_date(text) {
            Ok(v) => format_date(&v).unwrap(),
            Err(e) => format!("!{}", e.reason().unwrap_or("syntax")),
        }
    }

    #[test]
    fn attr_12_datetime_z_rule() {
        assert_eq!(dt("2024-06-15T14:30:45.123Z"), "2024-06-15T14:30:45.123000Z");
        assert_eq!(dt("2024-06-15T14:30:45+00:00"), "2024-06-15T14:30:45Z");
        assert_eq!(dt("2024-06-15 14:30:45-05:30"), "2024-06-15T14:30:45-05:30");
        assert_eq!(dt("2024-06-15T14:30"), "2024-06-15T14:30:00");
    }

    #[test]
    fn attr_13_time_and_date() {
        assert_eq!(tm("13:30:00+00:00"), "13:30:00+00:00");
        assert_eq!(tm("13:30:00Z"), "13:30:00+00:00");
        assert_eq!(dd("2024-02-29"), "2024-02-29");
        assert_eq!(dd("2023-02-29"), "!day is out of range for month");
    }

    /// The C parser's corners, each checked against CPython 3.13.0.
    #[test]
    fn attr_12_cpython_corners() {
        let ok = [
            ("2024-06-15T12:34:56:78", "2024-06-15T12:34:56.780000"),
            ("2024-06-15T12.5", "2024-06-15T12:00:00.500000"),
            ("2024-06-15T13300012", "2024-06-15T13:30:00.120000"),
            ("2024-06-15T14:30:45.+01:00", "2024-06-15T14:30:45+01:00"),
            ("2024-06-15T14X+01:00", "2024-06-15T14:00:00+01:00"),
            ("2024-06-15T14:30:45+00:99", "2024-06-15T14:30:45+01:39"),
            ("2024-06-15T14:30:45+00:00:00.5", "2024-06-15T14:30:45Z"),
            ("2024-06-15T14:30:45-00:00:01.5", "2024-06-15T14:30:45-00:00:01.500000"),
            ("2024-06-15T14:30:45+05:30:15,5", "2024-06-15T14:30:45+05:30:15.500000"),
            ("2024-06-15T14:30:45Z\0", "2024-06-15T14:30:45Z"),
            ("2024-06-15T14:30:45\0", "2024-06-15T14:30:45"),
            ("2024-W24-1030", "2024-06-10T10:30:00"),
            ("2024W24T10", "2024-06-10T10:00:00"),
            ("9999-W52-5", "9999-12-31T00:00:00"),
            ("2024-06-15T14:30:45.1234567X+01:00", "2024-06-15T14:30:45.123456+01:00"),
            ("2024-06-15T14:30:45+01:00:00:00", "2024-06-15T14:30:45+01:00"),
            ("2024-06-15\u{e9}14:30:45", "2024-06-15T14:30:45"),
            ("2024-06-15\u{1f600}14:30:45", "2024-06-15T14:30:45"),
        ];
        for (input, want) in ok {
            assert_eq!(dt(input), want, "{input:?}");
        }
        let err = [
            ("0000-W01-1T00", "syntax"),
            ("9999-W52-6", "year 10000 is out of range"),
            ("0000-01-01T00:00", "year 0 is out of range"),
            ("2024-06-15T", "syntax"),
            ("2024-W24-61", "hour must be in 0..23"),
            ("2024-06-15T14:30:45+0100:00", "syntax"),
            ("2024-06-15T14:30:45Z+", "syntax"),
            ("2024-06-15TZ", "syntax"),
            ("2024-06-15\u{e9}\u{e9}14:30:45", "syntax"),
            ("2024-06-1514:30:45", "syntax"),
            ("2024-06-15T14:30:45  +01:00", "syntax"),
            ("2024-W2", "syntax"),
            ("2024-06-15T14:30:45-24:00", "offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=-1)."),
            ("2024-06-15T14:30:45+99:00", "offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=4, seconds=10800)."),
        ];
        for (input, want) in err {
            assert_eq!(dt(input), format!("!{want}"), "{input:?}");
        }
        assert_eq!(dd("20240615XY"), "2024-06-15");
        assert_eq!(dd("2024W246XY"), "2024-06-15");
        assert_eq!(dd("2024-W24XY"), "!syntax");
        assert_eq!(dd("2024-06-15\0"), "!syntax");
        assert_eq!(tm("13300012"), "13:30:00.120000");
        assert_eq!(tm("1330001"), "!syntax");
        assert_eq!(tm("13:30X+01:00"), "13:30:00+01:00");
        assert_eq!(tm("13:30-05:00:00.000001"), "13:30:00-05:00:00.000001");
        assert_eq!(tm("T"), "!syntax");
        assert_eq!(tm("TT13"), "!syntax");
    }

    #[test]
    fn attr_12_python_equality_and_unrepresentable_values() {
        let a = parse_datetime("2024-06-15T14:30:00+01:00").unwrap();
        let b = parse_datetime("2024-06-15T13:30:00Z").unwrap();
        assert_eq!(a, b);
        assert_ne!(a, parse_datetime("2024-06-15T13:30:00").unwrap());
        assert_eq!(parse_time("14:30+01:00").unwrap(), parse_time("13:30Z").unwrap());
        assert_eq!(a.to_chrono().unwrap().to_rfc3339(), "2024-06-15T14:30:00+01:00");
        let far = NaiveDate::from_ymd_opt(10_000, 1, 1).unwrap().and_hms_opt(0, 0, 0).unwrap();
        assert_eq!(format_datetime(&DateTime::Naive(far)).unwrap_err().reason(), Some("year 10000 is out of range"));
        let leap = NaiveTime::from_hms_milli_opt(23, 59, 59, 1_500).unwrap();
        assert!(format_time(&Time::from(leap)).is_err());
        let nanos = NaiveTime::from_hms_nano_opt(1, 2, 3, 123_456_789).unwrap();
        assert_eq!(format_time(&Time::from(nanos)).unwrap(), "01:02:03.123456");
        let sub_second = UtcOffset::from_micros(500_000).unwrap();
        assert_eq!(format_time(&Time::new(NaiveTime::MIN, Some(sub_second))).unwrap(), "00:00:00+00:00:00.500000");
        assert!(UtcOffset::from_micros(MICROS_PER_DAY).is_none());
    }
}
