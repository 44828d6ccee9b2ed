//! The allocation-free check that bytes are already one canonical JSON object.

use super::encode::python_float_repr;
use super::lex::plain_ascii_run_end;
use super::parse::{read_number, Number, Parser};
use super::{JsonError, JSON_DEPTH_MAX};

/// Checks that `bytes` is one JSON object already in canonical form (what [`write_object`](super::write_object)
/// would produce for its parsed value), without allocating a value.
///
/// `Ok(true)`: canonical, store the bytes as they are. `Ok(false)`: valid JSON that is not
/// canonical (or not an object), parse and re-encode it. `Err`: not JSON. This is the config
/// store's fast path: configs written by a Flechtwerk stage are canonical, and skipping the
/// parse/encode round trip is what makes a million-entry bootstrap cheap.
///
/// ```
/// use flechtwerk::testing::check_canonical_object;
/// assert_eq!(check_canonical_object(br#"{"a":1,"b":[true]}"#), Ok(true));
/// assert_eq!(check_canonical_object(br#"{"b":1,"a":2}"#), Ok(false)); // keys out of order
/// assert!(check_canonical_object(b"{oops").is_err());
/// ```
pub fn check_canonical_object(bytes: &[u8]) -> Result<bool, CanonicalScanError> {
    // One pass: the scanner validates UTF-8 as it goes (only a string's bytes can be non-ASCII in
    // JSON; anything else non-ASCII is a grammar error). A failed scan looks at the encoding
    // once more, so that input which is not UTF-8 is reported as such whatever else is wrong
    // with it, as when the encoding was checked first.
    let mut scanner = Scanner { bytes, pos: 0, canonical: true, key_stack: Vec::new() };
    let is_object = scanner.bytes.first() == Some(&b'{');
    let scanned = scanner.scan_all();
    if let Err(error) = scanned {
        return Err(match std::str::from_utf8(bytes) {
            Err(utf8) => CanonicalScanError::Utf8(utf8),
            Ok(_) => CanonicalScanError::Json(error),
        });
    }
    Ok(scanner.canonical && is_object)
}

/// Why [`check_canonical_object`] rejected its input.
///
/// ```
/// use flechtwerk::json::{check_canonical_object, CanonicalScanError};
/// assert!(matches!(check_canonical_object(b"\xff"), Err(CanonicalScanError::Utf8(_))));
/// assert!(matches!(check_canonical_object(b"{oops"), Err(CanonicalScanError::Json(_))));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalScanError {
    /// The bytes are not UTF-8.
    #[error(transparent)]
    Utf8(std::str::Utf8Error),
    /// The text is not JSON.
    #[error(transparent)]
    Json(JsonError),
}

/// The length of the UTF-8 sequence starting at `at` (whose first byte is >= 0x80), or `None`
/// when it is not a valid one (overlong forms, surrogates and truncation included).
#[inline]
fn utf8_sequence_len(bytes: &[u8], at: usize) -> Option<usize> {
    let width = match bytes[at] {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return None,
    };
    let sequence = bytes.get(at..at + width)?;
    std::str::from_utf8(sequence).ok().map(|_| width)
}

/// The allocation-free twin of [`Parser`]: the same grammar, plus a running "still canonical"
/// verdict, over bytes it validates as UTF-8 while it scans. Keeping both grammars identical is
/// pinned by property tests and a fuzz target.
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
    /// The whole input as one JSON value with optional whitespace around it. An error may also
    /// mean the input is not UTF-8 (the caller tells which).
    fn scan_all(&mut self) -> Result<(), JsonError> {
        self.skip_whitespace();
        self.value(0)?;
        self.skip_whitespace();
        if self.pos != self.bytes.len() {
            return Err(JsonError::TrailingData { offset: self.pos });
        }
        Ok(())
    }

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
            self.pos = plain_ascii_run_end(self.bytes, self.pos);
            match self.peek() {
                Some(b'"') => {
                    let end = self.pos;
                    self.pos += 1;
                    return Ok((start, end, escaped));
                }
                Some(0x80..) => match utf8_sequence_len(self.bytes, self.pos) {
                    Some(width) => self.pos += width,
                    // Not UTF-8: `check_canonical_object` reports it as such.
                    None => return Err(JsonError::ControlCharacter { offset: self.pos }),
                },
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
        let (number, end) = read_number(self.bytes, self.pos)?;
        self.pos = end;
        match number {
            Number::Float { text, value } => {
                if self.canonical {
                    let mut repr = String::with_capacity(24);
                    python_float_repr(value, &mut repr);
                    if repr != text {
                        self.canonical = false;
                    }
                }
            }
            Number::Int { text } => {
                if text == "-0" {
                    self.canonical = false; // Python prints 0
                }
            }
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
