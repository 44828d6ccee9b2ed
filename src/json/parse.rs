//! The strict JSON parser.

use super::lex::{plain_run_end, scan_number};
use super::{BigInt, Map, Value, INT_DIGITS_MAX, JSON_DEPTH_MAX};

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
///
/// ```
/// use flechtwerk::json::{self, JsonError};
///
/// assert!(matches!(json::parse("[1, 2"), Err(JsonError::UnexpectedEnd { .. })));
/// assert!(json::parse("{} x").is_err()); // trailing data
/// ```
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
///
/// ```
/// use flechtwerk::json::{self, Value};
///
/// assert_eq!(json::parse(r#" {"a": 1, "a": 2} "#)?, json::parse(r#"{"a":2}"#)?);
/// assert_eq!(json::parse("null")?, Value::Null);
/// # Ok::<(), json::JsonError>(())
/// ```
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

pub(super) struct Parser<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
}

impl Parser<'_> {
    pub(super) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    pub(super) fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    pub(super) fn unexpected(&self) -> JsonError {
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

    pub(super) fn expect(&mut self, byte: u8) -> Result<(), JsonError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    pub(super) fn literal(&mut self, word: &[u8], value: Value) -> Result<Value, JsonError> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.unexpected())
        }
    }

    pub(super) fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
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

    pub(super) fn non_finite(&mut self) -> Result<Value, JsonError> {
        let rest = &self.bytes[self.pos..];
        if rest.starts_with(b"NaN") || rest.starts_with(b"Infinity") || rest.starts_with(b"-Infinity") {
            Err(JsonError::NonFiniteLiteral { offset: self.pos })
        } else {
            Err(self.unexpected())
        }
    }

    pub(super) fn object(&mut self, depth: usize) -> Result<Value, JsonError> {
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

    pub(super) fn array(&mut self, depth: usize) -> Result<Value, JsonError> {
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

    pub(super) fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1; // opening quote
                       // Built only once an escape shows up: a string without one (the usual case) is copied
                       // once, into an allocation of its exact size.
        let mut escaped: Option<String> = None;
        loop {
            // Copy the run of plain bytes in one go; the input is valid UTF-8, and '"', '\\'
            // and control characters are ASCII, so the run ends on a char boundary.
            let start = self.pos;
            self.pos = plain_run_end(self.bytes, self.pos);
            let run = std::str::from_utf8(&self.bytes[start..self.pos]).expect("utf-8 input");
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(match escaped {
                        None => run.to_owned(),
                        Some(mut out) => {
                            out.push_str(run);
                            out
                        }
                    });
                }
                Some(b'\\') => {
                    let out = escaped.get_or_insert_with(|| String::with_capacity(run.len() + 8));
                    out.push_str(run);
                    out.push(self.escape()?);
                }
                Some(_) => return Err(JsonError::ControlCharacter { offset: self.pos }),
                None => return Err(JsonError::UnexpectedEnd { offset: self.pos }),
            }
        }
    }

    /// Reads one escape sequence (at the backslash) and returns the character it denotes.
    pub(super) fn escape(&mut self) -> Result<char, JsonError> {
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

    pub(super) fn hex4(&mut self, at: usize) -> Result<u32, JsonError> {
        let digits = self.bytes.get(self.pos..self.pos + 4).ok_or(JsonError::InvalidEscape { offset: at })?;
        let mut code = 0u32;
        for &d in digits {
            let v = (d as char).to_digit(16).ok_or(JsonError::InvalidEscape { offset: at })?;
            code = code * 16 + v;
        }
        self.pos += 4;
        Ok(code)
    }

    pub(super) fn number(&mut self) -> Result<Value, JsonError> {
        let (number, end) = read_number(self.bytes, self.pos)?;
        self.pos = end;
        Ok(match number {
            Number::Float { value, .. } => Value::Float(value),
            Number::Int { text } => integer_value(text),
        })
    }
}

/// A number literal read as Python's `json` reads it.
pub(super) enum Number<'a> {
    /// A literal with a fraction or an exponent, and its (finite) value.
    Float { text: &'a str, value: f64 },
    /// An integer literal of at most [`INT_DIGITS_MAX`] digits.
    Int { text: &'a str },
}

/// Reads the number literal at `start` (the parser and the canonical scan share it): the
/// literal and where it ends, or why it is refused (malformed, a float out of range, an
/// integer too long).
pub(super) fn read_number(bytes: &[u8], start: usize) -> Result<(Number<'_>, usize), JsonError> {
    let end = scan_number(bytes, start).ok_or(JsonError::InvalidNumber { offset: start })?;
    let text = std::str::from_utf8(&bytes[start..end.end]).expect("ascii number");
    let number = if end.is_float {
        let value: f64 = text.parse().map_err(|_| JsonError::InvalidNumber { offset: start })?;
        if !value.is_finite() {
            return Err(JsonError::NumberOutOfRange { offset: start });
        }
        Number::Float { text, value }
    } else {
        check_int_digits(text, start)?;
        Number::Int { text }
    };
    Ok((number, end.end))
}

/// Refuses an integer literal longer than [`INT_DIGITS_MAX`] digits (the sign does not count).
fn check_int_digits(text: &str, offset: usize) -> Result<(), JsonError> {
    if text.trim_start_matches('-').len() > INT_DIGITS_MAX {
        return Err(JsonError::IntegerTooLong { offset });
    }
    Ok(())
}
