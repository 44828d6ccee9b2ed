//! Canonical JSON: the one wire format of Flechtwerk-schema records.
//!
//! Every record the framework writes (output values, changelog states, config entries) is
//! encoded here, and the bytes are identical to what the Python implementation writes with
//! `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)`:
//! sorted keys at every level, no spaces, non-ASCII as raw UTF-8, floats in Python's `repr`
//! form (`1.0`, `1e+16`, `1e-05`), NaN and infinities rejected. Mixed Rust/Python fleets share
//! topics, changelogs and partitioning only because these bytes match; `tests/golden/` pins them
//! against the reference implementation.
//!
//! Decoding is strict: the parser accepts exactly RFC 8259 JSON. Where Python's `json.loads` is
//! more lenient, we reject the input at decode time instead of failing later at encode time (see
//! [`JsonError`]): `NaN`/`Infinity` literals, numbers that overflow to infinity, and `\u` escapes
//! that leave a lone surrogate. Such a record reaches `on_invalid_message` like any other
//! undecodable one, rather than crashing the stage when it is re-encoded.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

/// A JSON object: keys sorted by code point (which is UTF-8 byte order), as encoded.
pub type Map = BTreeMap<String, Value>;

/// Nesting bound of the parser and the canonical scanner (objects and arrays together).
///
/// Python's decoder stops near its recursion limit (about 1000 frames); ours is a fixed, named
/// bound so a hostile record cannot exhaust a task's stack.
pub const JSON_DEPTH_MAX: usize = 512;

/// Most digits an integer literal may have: CPython's `int` string-conversion limit, which makes
/// Python's `json.loads` refuse longer integers (`value has 4301 digits`), so such a record is
/// invalid for both implementations.
pub const INT_DIGITS_MAX: usize = 4300;

/// A JSON value with Python's number model: integers and floats are distinct types.
///
/// Equality is type-strict (`Int(1) != Float(1.0)`) and floats compare by bit pattern, so two
/// values are equal exactly when they encode to the same bytes (ATTR-44).
#[derive(Clone, Debug)]
pub enum Value {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// An integer outside the `i64` range, kept exactly (Python integers are unbounded).
    BigInt(BigInt),
    /// A finite float (a non-finite one is representable but refused by the encoder).
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    List(Vec<Value>),
    /// An object.
    Object(Map),
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::BigInt(a), Value::BigInt(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::List(a), Value::List(b)) => a == b,
            (Value::Object(a), Value::Object(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Value {}

impl Value {
    /// The JSON type name, for error messages (`"int"`, `"float"`, `"object"`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::BigInt(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::List(_) => "list",
            Value::Object(_) => "object",
        }
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(v.into())
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_owned())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}
impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Self {
        Value::List(v)
    }
}
impl From<Map> for Value {
    fn from(v: Map) -> Self {
        Value::Object(v)
    }
}

/// An integer outside the `i64` range, held as its canonical decimal digits.
///
/// Python integers are unbounded, so a Python producer can write `18446744073709551616`; we keep
/// such a number exactly instead of widening it to a float (which would change its type and its
/// bytes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BigInt(Box<str>);

impl BigInt {
    /// The canonical decimal text (optional `-`, no leading zeros).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value as an `i128`, when it fits.
    pub fn to_i128(&self) -> Option<i128> {
        self.0.parse().ok()
    }
}

impl fmt::Display for BigInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Builds the integer value for a JSON integer literal (grammar already checked).
fn integer_value(text: &str) -> Value {
    match text.parse::<i64>() {
        Ok(v) => Value::Int(v),
        // The literal matched `-?(0|[1-9][0-9]*)`, so the only failure is the range, and a
        // literal outside i64 is never "-0": its digits are already canonical.
        Err(_) => Value::BigInt(BigInt(text.into())),
    }
}

/// Why bytes are not (strict) JSON. Offsets are byte positions in the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// The input ended inside a value.
    #[error("unexpected end of JSON input at byte {offset}")]
    UnexpectedEnd {
        /// Byte position.
        offset: usize,
    },
    /// A byte that cannot start or continue a value here.
    #[error("unexpected character at byte {offset}")]
    UnexpectedChar {
        /// Byte position.
        offset: usize,
        /// The offending character.
        found: char,
    },
    /// Non-whitespace after the top-level value.
    #[error("extra data after the JSON value at byte {offset}")]
    TrailingData {
        /// Byte position.
        offset: usize,
    },
    /// A raw control character (U+0000..U+001F) inside a string.
    #[error("invalid control character in a string at byte {offset}")]
    ControlCharacter {
        /// Byte position.
        offset: usize,
    },
    /// An unknown escape, a malformed `\u` escape, or one that leaves a lone surrogate.
    #[error("invalid string escape at byte {offset}")]
    InvalidEscape {
        /// Byte position.
        offset: usize,
    },
    /// A malformed number literal.
    #[error("invalid number at byte {offset}")]
    InvalidNumber {
        /// Byte position.
        offset: usize,
    },
    /// A float literal too large for a finite `f64` (Python would read it as `inf`).
    #[error("number out of range at byte {offset}: it would be infinite")]
    NumberOutOfRange {
        /// Byte position.
        offset: usize,
    },
    /// An integer literal with more than [`INT_DIGITS_MAX`] digits (Python refuses it too).
    #[error("integer at byte {offset} has more than {max} digits", max = INT_DIGITS_MAX)]
    IntegerTooLong {
        /// Byte position.
        offset: usize,
    },
    /// `NaN`, `Infinity` or `-Infinity`: not JSON, and never encodable.
    #[error("non-finite number literal at byte {offset} is not JSON")]
    NonFiniteLiteral {
        /// Byte position.
        offset: usize,
    },
    /// Objects and arrays nested deeper than [`JSON_DEPTH_MAX`].
    #[error("JSON nested deeper than {max} levels at byte {offset}", max = JSON_DEPTH_MAX)]
    TooDeep {
        /// Byte position.
        offset: usize,
    },
}

/// Parses one JSON document (surrounding whitespace allowed). Duplicate keys: the last wins.
pub fn parse(text: &str) -> Result<Value, JsonError> {
    let mut parser = Parser { bytes: text.as_bytes(), pos: 0 };
    parser.skip_whitespace();
    let value = parser.value(0)?;
    parser.skip_whitespace();
    if parser.pos != parser.bytes.len() {
        return Err(JsonError::TrailingData { offset: parser.pos });
    }
    Ok(value)
}

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn unexpected(&self) -> JsonError {
        match self.bytes.get(self.pos..) {
            None | Some([]) => JsonError::UnexpectedEnd { offset: self.pos },
            Some(rest) => {
                // The input is a &str, so the position is on a char boundary.
                let found = std::str::from_utf8(rest)
                    .ok()
                    .and_then(|s| s.chars().next())
                    .unwrap_or(char::REPLACEMENT_CHARACTER);
                JsonError::UnexpectedChar { offset: self.pos, found }
            }
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), JsonError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    fn literal(&mut self, word: &[u8], value: Value) -> Result<Value, JsonError> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.unexpected())
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(b't') => self.literal(b"true", Value::Bool(true)),
            Some(b'f') => self.literal(b"false", Value::Bool(false)),
            Some(b'n') => self.literal(b"null", Value::Null),
            Some(b'N') | Some(b'I') => self.non_finite(),
            Some(b'-') if self.bytes.get(self.pos + 1) == Some(&b'I') => self.non_finite(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.unexpected()),
        }
    }

    fn non_finite(&mut self) -> Result<Value, JsonError> {
        let rest = &self.bytes[self.pos..];
        if rest.starts_with(b"NaN") || rest.starts_with(b"Infinity") || rest.starts_with(b"-Infinity") {
            Err(JsonError::NonFiniteLiteral { offset: self.pos })
        } else {
            Err(self.unexpected())
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > JSON_DEPTH_MAX {
            return Err(JsonError::TooDeep { offset: self.pos });
        }
        self.pos += 1; // '{'
        let mut map = Map::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(map));
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.unexpected());
            }
            let key = self.string()?;
            self.skip_whitespace();
            self.expect(b':')?;
            self.skip_whitespace();
            let value = self.value(depth)?;
            map.insert(key, value);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > JSON_DEPTH_MAX {
            return Err(JsonError::TooDeep { offset: self.pos });
        }
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::List(items));
        }
        loop {
            self.skip_whitespace();
            items.push(self.value(depth)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::List(items));
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            let start = self.pos;
            // Copy the run of plain bytes in one go; the input is valid UTF-8, and '"', '\\'
            // and control characters are ASCII, so the run ends on a char boundary.
            self.pos = plain_run_end(self.bytes, self.pos);
            out.push_str(std::str::from_utf8(&self.bytes[start..self.pos]).expect("utf-8 input"));
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => out.push(self.escape()?),
                Some(_) => return Err(JsonError::ControlCharacter { offset: self.pos }),
                None => return Err(JsonError::UnexpectedEnd { offset: self.pos }),
            }
        }
    }

    /// Reads one escape sequence (at the backslash) and returns the character it denotes.
    fn escape(&mut self) -> Result<char, JsonError> {
        let at = self.pos;
        let Some(kind) = self.bytes.get(self.pos + 1).copied() else {
            return Err(JsonError::UnexpectedEnd { offset: self.pos + 1 });
        };
        self.pos += 2;
        let c = match kind {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let high = self.hex4(at)?;
                if (0xD800..0xDC00).contains(&high) {
                    // A high surrogate must be followed by an escaped low surrogate.
                    if self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u") {
                        return Err(JsonError::InvalidEscape { offset: at });
                    }
                    self.pos += 2;
                    let low = self.hex4(at)?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return Err(JsonError::InvalidEscape { offset: at });
                    }
                    let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                    char::from_u32(code).ok_or(JsonError::InvalidEscape { offset: at })?
                } else {
                    // A lone low surrogate is not a char either.
                    char::from_u32(high).ok_or(JsonError::InvalidEscape { offset: at })?
                }
            }
            _ => return Err(JsonError::InvalidEscape { offset: at }),
        };
        Ok(c)
    }

    fn hex4(&mut self, at: usize) -> Result<u32, JsonError> {
        let digits = self.bytes.get(self.pos..self.pos + 4).ok_or(JsonError::InvalidEscape { offset: at })?;
        let mut code = 0u32;
        for &d in digits {
            let v = (d as char).to_digit(16).ok_or(JsonError::InvalidEscape { offset: at })?;
            code = code * 16 + v;
        }
        self.pos += 4;
        Ok(code)
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.pos;
        let end = scan_number(self.bytes, start).ok_or(JsonError::InvalidNumber { offset: start })?;
        self.pos = end.end;
        let text = std::str::from_utf8(&self.bytes[start..end.end]).expect("ascii number");
        if end.is_float {
            let v: f64 = text.parse().map_err(|_| JsonError::InvalidNumber { offset: start })?;
            if !v.is_finite() {
                return Err(JsonError::NumberOutOfRange { offset: start });
            }
            Ok(Value::Float(v))
        } else {
            check_int_digits(text, start)?;
            Ok(integer_value(text))
        }
    }
}

/// Refuses an integer literal longer than [`INT_DIGITS_MAX`] digits (the sign does not count).
fn check_int_digits(text: &str, offset: usize) -> Result<(), JsonError> {
    if text.trim_start_matches('-').len() > INT_DIGITS_MAX {
        return Err(JsonError::IntegerTooLong { offset });
    }
    Ok(())
}

struct NumberEnd {
    end: usize,
    is_float: bool,
}

/// Matches `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?` at `start`.
fn scan_number(bytes: &[u8], start: usize) -> Option<NumberEnd> {
    let digits = |mut i: usize| {
        let from = i;
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        (i > from).then_some(i)
    };
    let mut i = start;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    match bytes.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(i)?,
        _ => return None,
    }
    let mut is_float = false;
    if bytes.get(i) == Some(&b'.') {
        i = digits(i + 1)?;
        is_float = true;
    }
    if let Some(b'e' | b'E') = bytes.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = bytes.get(i) {
            i += 1;
        }
        i = digits(i)?;
        is_float = true;
    }
    Some(NumberEnd { end: i, is_float })
}

/// Why a value cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// NaN or an infinity: JSON has no spelling for it (Python: `allow_nan=False`).
    #[error("float {value} is not JSON compliant (NaN and infinities cannot be encoded)")]
    NonFiniteFloat {
        /// `NaN`, `inf` or `-inf`.
        value: String,
    },
}

/// Appends the canonical encoding of `value` to `out`.
pub fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Int(v) => {
            let mut text = String::with_capacity(20);
            write!(text, "{v}").expect("write to String");
            out.extend_from_slice(text.as_bytes());
        }
        Value::BigInt(v) => out.extend_from_slice(v.as_str().as_bytes()),
        Value::Float(v) => write_float(*v, out)?,
        Value::Str(s) => write_string(s, out),
        Value::List(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out)?;
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(map, out)?,
    }
    Ok(())
}

/// Appends the canonical encoding of an object to `out`.
pub fn write_object(map: &Map, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    out.push(b'{');
    for (i, (key, item)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(key, out);
        out.push(b':');
        write_canonical(item, out)?;
    }
    out.push(b'}');
    Ok(())
}

/// The canonical encoding of `value` as a new buffer.
pub fn to_canonical_bytes(value: &Value) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    write_canonical(value, &mut out)?;
    Ok(out)
}

/// Writes `s` as a JSON string the way Python does with `ensure_ascii=False`: only `"`, `\` and
/// U+0000..U+001F are escaped (short forms where JSON has them, else `\u00xx` in lowercase).
fn write_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => {
                out.extend_from_slice(&bytes[start..i]);
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(escape);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Writes a float exactly like Python's `repr(float)`: the shortest digits that round-trip,
/// positional notation for decimal exponents in `[-4, 16)`, else `d.ddde±XX`; integral values
/// in positional form keep a `.0`.
pub fn write_float(v: f64, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    if !v.is_finite() {
        return Err(EncodeError::NonFiniteFloat { value: format!("{v}") });
    }
    let mut text = String::new();
    python_float_repr(v, &mut text);
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

/// Python's `repr` of a finite float, appended to `out`.
pub(crate) fn python_float_repr(v: f64, out: &mut String) {
    debug_assert!(v.is_finite());
    // Rust's `{:e}` prints the shortest round-trip digits, like Python's `repr` (both use the
    // shortest representation that reads back to the same double).
    let mut sci = String::with_capacity(32);
    write!(sci, "{:e}", v.abs()).expect("write to String");
    let (mantissa, exponent) = sci.split_once('e').expect("{:e} always has an exponent");
    let exponent: i32 = exponent.parse().expect("{:e} exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let ndigits = digits.len() as i32;
    // Python's `decpt`: the position of the decimal point relative to the digit string.
    let decpt = exponent + 1;
    if v.is_sign_negative() {
        out.push('-');
    }
    if !(-4 < decpt && decpt <= 16) {
        out.push_str(&digits[..1]);
        if ndigits > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        write!(out, "e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs()).expect("write to String");
    } else if decpt <= 0 {
        out.push_str("0.");
        for _ in 0..-decpt {
            out.push('0');
        }
        out.push_str(&digits);
    } else if decpt < ndigits {
        out.push_str(&digits[..decpt as usize]);
        out.push('.');
        out.push_str(&digits[decpt as usize..]);
    } else {
        out.push_str(&digits);
        for _ in 0..decpt - ndigits {
            out.push('0');
        }
        out.push_str(".0");
    }
}

/// Checks that `bytes` is one JSON object already in canonical form (what [`write_object`]
/// would produce for its parsed value), without allocating a value.
///
/// `Ok(true)`: canonical, store the bytes as they are. `Ok(false)`: valid JSON that is not
/// canonical (or not an object), parse and re-encode it. `Err`: not JSON. This is the config
/// store's fast path: configs written by a Flechtwerk stage are canonical, and skipping the
/// parse/encode round trip is what makes a million-entry bootstrap cheap.
pub fn check_canonical_object(bytes: &[u8]) -> Result<bool, CanonicalScanError> {
    let text = std::str::from_utf8(bytes).map_err(CanonicalScanError::Utf8)?;
    let mut scanner = Scanner { bytes: text.as_bytes(), pos: 0, canonical: true, key_stack: Vec::new() };
    let is_object = scanner.bytes.first() == Some(&b'{');
    scanner.skip_whitespace();
    scanner.value(0).map_err(CanonicalScanError::Json)?;
    scanner.skip_whitespace();
    if scanner.pos != scanner.bytes.len() {
        return Err(CanonicalScanError::Json(JsonError::TrailingData { offset: scanner.pos }));
    }
    Ok(scanner.canonical && is_object)
}

/// Why [`check_canonical_object`] rejected its input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalScanError {
    /// The bytes are not UTF-8.
    #[error(transparent)]
    Utf8(std::str::Utf8Error),
    /// The text is not JSON.
    #[error(transparent)]
    Json(JsonError),
}

/// The end of the run of string bytes starting at `from` that need no attention: the index of
/// the first `"`, `\\` or control character, or the end of `bytes`. Eight bytes at a time (SWAR):
/// strings are most of a config's bytes, and this loop is most of the canonical scan.
#[inline]
fn plain_run_end(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    /// High bit set in each byte of `w` that is zero (exact for the lowest such byte, which is
    /// the one we look for).
    fn zero_bytes(w: u64) -> u64 {
        w.wrapping_sub(ONES) & !w & HIGHS
    }
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        // Control characters are the bytes below 0x20: subtracting 0x20 borrows into the high bit
        // (exact for the lowest; bytes >= 0x80 are masked out by `!w`).
        let control = w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
        let quote = zero_bytes(w ^ (ONES * u64::from(b'"')));
        let backslash = zero_bytes(w ^ (ONES * u64::from(b'\\')));
        let found = control | quote | backslash;
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        i += 1;
    }
    i
}

/// The allocation-free twin of [`Parser`]: the same grammar, plus a running "still canonical"
/// verdict. Keeping both grammars identical is pinned by property tests and a fuzz target.
struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
    canonical: bool,
    /// For each open object, its previous key (for the sorted-keys check).
    key_stack: Vec<Option<ScannedKey>>,
}

/// A key as the sorted-keys check compares it: a span of the input when it has no escapes,
/// else its unescaped text (rare, so the allocation is too).
enum ScannedKey {
    Span(usize, usize),
    Unescaped(String),
}

impl ScannedKey {
    fn bytes<'a>(&'a self, input: &'a [u8]) -> &'a [u8] {
        match self {
            ScannedKey::Span(start, end) => &input[*start..*end],
            ScannedKey::Unescaped(text) => text.as_bytes(),
        }
    }
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
            self.canonical = false;
        }
    }

    fn parser_error(&self) -> JsonError {
        Parser { bytes: self.bytes, pos: self.pos }.unexpected()
    }

    fn expect(&mut self, byte: u8) -> Result<(), JsonError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.parser_error())
        }
    }

    fn value(&mut self, depth: usize) -> Result<(), JsonError> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'N') | Some(b'I') => Parser { bytes: self.bytes, pos: self.pos }.non_finite().map(|_| ()),
            Some(b'-') if self.bytes.get(self.pos + 1) == Some(&b'I') => {
                Parser { bytes: self.bytes, pos: self.pos }.non_finite().map(|_| ())
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.parser_error()),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), JsonError> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.parser_error())
        }
    }

    fn object(&mut self, depth: usize) -> Result<(), JsonError> {
        if depth > JSON_DEPTH_MAX {
            return Err(JsonError::TooDeep { offset: self.pos });
        }
        self.pos += 1;
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        self.key_stack.push(None);
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.parser_error());
            }
            let (start, end, escaped) = self.string()?;
            let key = if escaped {
                // Key order is decided on unescaped text.
                let quoted = std::str::from_utf8(&self.bytes[start - 1..end + 1]).expect("utf-8 input");
                let mut parser = Parser { bytes: quoted.as_bytes(), pos: 0 };
                ScannedKey::Unescaped(parser.string()?)
            } else {
                ScannedKey::Span(start, end)
            };
            if let Some(Some(previous)) = self.key_stack.last() {
                if previous.bytes(self.bytes) >= key.bytes(self.bytes) {
                    self.canonical = false; // unsorted or duplicate
                }
            }
            *self.key_stack.last_mut().expect("pushed above") = Some(key);
            self.skip_whitespace();
            self.expect(b':')?;
            self.skip_whitespace();
            self.value(depth)?;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.key_stack.pop();
                    return Ok(());
                }
                _ => return Err(self.parser_error()),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), JsonError> {
        if depth > JSON_DEPTH_MAX {
            return Err(JsonError::TooDeep { offset: self.pos });
        }
        self.pos += 1;
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_whitespace();
            self.value(depth)?;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.parser_error()),
            }
        }
    }

    /// Scans a string; returns the content's byte range and whether it held an escape.
    fn string(&mut self) -> Result<(usize, usize, bool), JsonError> {
        self.pos += 1;
        let start = self.pos;
        let mut escaped = false;
        loop {
            self.pos = plain_run_end(self.bytes, self.pos);
            match self.peek() {
                Some(b'"') => {
                    let end = self.pos;
                    self.pos += 1;
                    return Ok((start, end, escaped));
                }
                Some(b'\\') => {
                    escaped = true;
                    let at = self.pos;
                    let mut parser = Parser { bytes: self.bytes, pos: self.pos };
                    let c = parser.escape()?;
                    let written = &self.bytes[at..parser.pos];
                    self.pos = parser.pos;
                    if !is_canonical_escape(c, written) {
                        self.canonical = false;
                    }
                }
                Some(_) => return Err(JsonError::ControlCharacter { offset: self.pos }),
                None => return Err(JsonError::UnexpectedEnd { offset: self.pos }),
            }
        }
    }

    fn number(&mut self) -> Result<(), JsonError> {
        let start = self.pos;
        let end = scan_number(self.bytes, start).ok_or(JsonError::InvalidNumber { offset: start })?;
        self.pos = end.end;
        let text = std::str::from_utf8(&self.bytes[start..end.end]).expect("ascii number");
        if end.is_float {
            let v: f64 = text.parse().map_err(|_| JsonError::InvalidNumber { offset: start })?;
            if !v.is_finite() {
                return Err(JsonError::NumberOutOfRange { offset: start });
            }
            if self.canonical {
                let mut repr = String::with_capacity(24);
                python_float_repr(v, &mut repr);
                if repr != text {
                    self.canonical = false;
                }
            }
        } else if text == "-0" {
            self.canonical = false; // Python prints 0
        } else {
            check_int_digits(text, start)?;
        }
        Ok(())
    }
}

/// Whether `written` is how the canonical encoder spells the escaped character `c`.
fn is_canonical_escape(c: char, written: &[u8]) -> bool {
    match c {
        '"' => written == b"\\\"",
        '\\' => written == b"\\\\",
        '\n' => written == b"\\n",
        '\r' => written == b"\\r",
        '\t' => written == b"\\t",
        '\u{8}' => written == b"\\b",
        '\u{c}' => written == b"\\f",
        '\0'..='\u{1f}' => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let b = c as u8;
            written == [b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]
        }
        _ => false, // everything else is written raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(text: &str) -> String {
        String::from_utf8(to_canonical_bytes(&parse(text).unwrap()).unwrap()).unwrap()
    }

    fn repr(v: f64) -> String {
        let mut s = String::new();
        python_float_repr(v, &mut s);
        s
    }

    #[test]
    fn float_repr_matches_python() {
        // Values and Python 3.12 `repr` outputs.
        let cases = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (100.0, "100.0"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (2.5e-7, "2.5e-07"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (1e22, "1e+22"),
            (-1.5, "-1.5"),
            (9999999999999998.0, "9999999999999998.0"),
            (0.30000000000000004, "0.30000000000000004"),
        ];
        for (v, want) in cases {
            assert_eq!(repr(v), want, "repr({v:e})");
        }
    }

    #[test]
    fn attr_43_sorted_keys_no_spaces_utf8() {
        assert_eq!(canon(r#"{"b":2,"a":1}"#), r#"{"a":1,"b":2}"#);
        assert_eq!(
            canon(r#"{ "z" : { "y":1, "x":[1, 2.50, "M\u00fcller"] } }"#),
            r#"{"z":{"x":[1,2.5,"Müller"],"y":1}}"#
        );
        assert_eq!(canon(r#""a\/b\u001F\u2028""#), "\"a/b\\u001f\u{2028}\"");
        assert_eq!(canon("-0"), "0");
        assert_eq!(canon("18446744073709551616"), "18446744073709551616");
        assert_eq!(canon("-9223372036854775809"), "-9223372036854775809");
        assert_eq!(canon(r#"{"a":1,"a":2}"#), r#"{"a":2}"#);
    }

    #[test]
    fn strict_rejections() {
        assert!(matches!(parse("NaN"), Err(JsonError::NonFiniteLiteral { .. })));
        assert!(matches!(parse("[-Infinity]"), Err(JsonError::NonFiniteLiteral { .. })));
        assert!(matches!(parse("1e400"), Err(JsonError::NumberOutOfRange { .. })));
        assert!(
            parse(&"9".repeat(INT_DIGITS_MAX)).is_ok() && parse(&format!("-{}", "9".repeat(INT_DIGITS_MAX))).is_ok()
        );
        assert!(matches!(parse(&"9".repeat(INT_DIGITS_MAX + 1)), Err(JsonError::IntegerTooLong { .. })));
        assert!(matches!(parse(r#""\ud800""#), Err(JsonError::InvalidEscape { .. })));
        assert!(matches!(parse(r#""\udc00\ud800""#), Err(JsonError::InvalidEscape { .. })));
        assert!(matches!(parse("\"a\u{1}\""), Err(JsonError::ControlCharacter { .. })));
        assert!(matches!(parse("{} x"), Err(JsonError::TrailingData { .. })));
        assert!(matches!(parse("01"), Err(JsonError::TrailingData { .. })));
        assert!(matches!(parse("1."), Err(JsonError::InvalidNumber { .. })));
        assert!(matches!(parse("\u{feff}{}"), Err(JsonError::UnexpectedChar { .. })));
        let deep = "[".repeat(JSON_DEPTH_MAX + 1) + &"]".repeat(JSON_DEPTH_MAX + 1);
        assert!(matches!(parse(&deep), Err(JsonError::TooDeep { .. })));
        let ok = "[".repeat(JSON_DEPTH_MAX) + &"]".repeat(JSON_DEPTH_MAX);
        assert!(parse(&ok).is_ok());
        assert_eq!(parse(r#""\ud83d\ude00""#).unwrap(), Value::Str("😀".into()));
    }

    #[test]
    fn non_finite_floats_do_not_encode() {
        assert!(matches!(to_canonical_bytes(&Value::Float(f64::NAN)), Err(EncodeError::NonFiniteFloat { .. })));
        assert!(to_canonical_bytes(&Value::Float(f64::INFINITY)).is_err());
    }

    #[test]
    fn canonical_scan_agrees_on_examples() {
        let yes = [
            r#"{}"#,
            r#"{"a":1,"b":[1.5,"x\n",null]}"#,
            "{\"\u{e9}\":\"\u{2028}\\u0001\"}",
            r#"{"\u0000":1,"\n":2,"\"":3,"a":{"\\":4}}"#,
        ];
        for text in yes {
            assert_eq!(check_canonical_object(text.as_bytes()), Ok(true), "{text}");
        }
        let no = [
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":1}"#,
            r#"{ }"#,
            r#"{"a":1.50}"#,
            r#"{"a":-0}"#,
            r#"{"a":"\u00e9"}"#,
            r#"{"a":1e16}"#,
            "[]",
            r#"{"\u0061":1}"#,
        ];
        for text in no {
            assert_eq!(check_canonical_object(text.as_bytes()), Ok(false), "{text}");
        }
        assert!(check_canonical_object(b"{\"a\":NaN}").is_err());
        assert!(check_canonical_object(b"{\"a\":1").is_err());
        assert!(check_canonical_object(b"\xff").is_err());
    }

    proptest::proptest! {
        /// The eight-at-a-time scan stops exactly where a byte-at-a-time scan does, at every
        /// start, over bytes dense in the ones that matter (and in their SWAR near-misses).
        #[test]
        fn plain_run_end_matches_the_byte_loop(
            bytes in proptest::collection::vec(proptest::prop_oneof![
                proptest::prelude::Just(b'"'), proptest::prelude::Just(b'\\'),
                proptest::prelude::Just(0x1f_u8), proptest::prelude::Just(0x20_u8),
                proptest::prelude::Just(0x21_u8), proptest::prelude::Just(0x5b_u8),
                proptest::prelude::Just(0x00_u8), proptest::prelude::Just(0x80_u8),
                proptest::prelude::Just(0xa2_u8), proptest::prelude::Just(0xdc_u8),
                proptest::prelude::any::<u8>(), 0x61_u8..0x7b,
            ], 0..40),
        ) {
            for from in 0..=bytes.len() {
                let naive = from + bytes[from..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                    .unwrap_or(bytes.len() - from);
                proptest::prop_assert_eq!(plain_run_end(&bytes, from), naive, "from {}", from);
            }
        }
    }
}
