//! The canonical encoder: Python's `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)`, byte for byte.

use std::fmt::Write as _;

use super::lex::plain_run_end;
use super::{Map, Value};

/// Why a value cannot be encoded.
///
/// ```
/// use flechtwerk::json::{self, EncodeError, Value};
///
/// assert!(matches!(json::to_canonical_bytes(&Value::Float(f64::NAN)), Err(EncodeError::NonFiniteFloat { .. })));
/// ```
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
///
/// ```
/// use flechtwerk::json::{self, Value};
///
/// let mut out = b"value: ".to_vec();
/// json::write_canonical(&Value::List(vec![Value::Bool(true), Value::Str("x".into())]), &mut out)?;
/// assert_eq!(out, br#"value: [true,"x"]"#);
/// # Ok::<(), json::EncodeError>(())
/// ```
pub fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Int(v) => write_int(*v, out),
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
///
/// ```
/// use flechtwerk::json::{self, Map, Value};
///
/// let map = Map::from([("z".to_owned(), Value::Int(1)), ("a".to_owned(), Value::Int(2))]);
/// let mut out = Vec::new();
/// json::write_object(&map, &mut out)?;
/// assert_eq!(out, br#"{"a":2,"z":1}"#);
/// # Ok::<(), json::EncodeError>(())
/// ```
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
///
/// ```
/// use flechtwerk::json;
///
/// let value = json::parse(r#"{ "b" : 1.50, "a" : [] }"#)?;
/// assert_eq!(json::to_canonical_bytes(&value)?, br#"{"a":[],"b":1.5}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn to_canonical_bytes(value: &Value) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    write_canonical(value, &mut out)?;
    Ok(out)
}

/// Appends the decimal digits of `v` (a leading `-` when negative), as `str(int)` in Python:
/// without `fmt`'s machinery and without a temporary string (issue #14: `write!` into a new
/// `String` was ~700 instructions per integer of every output and state).
fn write_int(v: i64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20]; // u64::MAX has 20 digits
    let mut n = v.unsigned_abs();
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[at..]);
}

/// Writes `s` as a JSON string the way Python does with `ensure_ascii=False`: only `"`, `\` and
/// U+0000..U+001F are escaped (short forms where JSON has them, else `\u00xx` in lowercase).
fn write_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    loop {
        // The bytes that need an escape are exactly those that end a plain run: '"', '\\' and
        // the control characters (eight bytes at a time; a byte loop was ~10 instructions per
        // byte of every string of every output and state, issue #14).
        let end = plain_run_end(bytes, start);
        out.extend_from_slice(&bytes[start..end]);
        let Some(&b) = bytes.get(end) else { break };
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
            }
        }
        start = end + 1;
    }
    out.push(b'"');
}

/// Writes a float exactly like Python's `repr(float)`: the shortest digits that round-trip,
/// positional notation for decimal exponents in `[-4, 16)`, else `d.ddde±XX`; integral values
/// in positional form keep a `.0`.
///
/// ```
/// use flechtwerk::json;
///
/// let mut out = Vec::new();
/// json::write_float(1e16, &mut out)?;
/// assert_eq!(out, b"1e+16"); // as Python's repr
/// # Ok::<(), json::EncodeError>(())
/// ```
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
