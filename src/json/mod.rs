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
use std::fmt;

/// A JSON object: keys sorted by code point (which is UTF-8 byte order), as encoded.
///
/// ```
/// use flechtwerk::json::{self, Map, Value};
///
/// let mut map = Map::new();
/// map.insert("b".into(), Value::Int(1));
/// map.insert("a".into(), Value::Null);
/// assert_eq!(json::to_canonical_bytes(&Value::Object(map))?, br#"{"a":null,"b":1}"#);
/// # Ok::<(), json::EncodeError>(())
/// ```
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
///
/// ```
/// use flechtwerk::json::{self, Value};
///
/// let value = json::parse(r#"{"n": 1, "x": 1.0}"#)?;
/// let Value::Object(map) = &value else { unreachable!() };
/// assert_eq!(map["n"], Value::Int(1));
/// assert_ne!(map["n"], map["x"]); // type-strict: 1 and 1.0 encode differently
/// # Ok::<(), json::JsonError>(())
/// ```
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
    ///
    /// ```
    /// # use flechtwerk::json::Value;
    /// assert_eq!(Value::List(vec![]).type_name(), "list");
    /// ```
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
///
/// ```
/// use flechtwerk::json::{self, Value};
///
/// let Value::BigInt(big) = json::parse("123456789012345678901234567890")? else { unreachable!() };
/// assert_eq!(big.as_str(), "123456789012345678901234567890");
/// assert_eq!(big.to_i128(), Some(123456789012345678901234567890));
/// # Ok::<(), json::JsonError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BigInt(pub(super) Box<str>);

impl BigInt {
    /// The canonical decimal text (optional `-`, no leading zeros).
    ///
    /// ```
    /// # use flechtwerk::json::{self, Value};
    /// let Value::BigInt(big) = json::parse("-99999999999999999999")? else { unreachable!() };
    /// assert_eq!(big.as_str(), "-99999999999999999999");
    /// # Ok::<(), json::JsonError>(())
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value as an `i128`, when it fits.
    ///
    /// ```
    /// # use flechtwerk::json::{self, Value};
    /// let Value::BigInt(big) = json::parse(&"9".repeat(50))? else { unreachable!() };
    /// assert_eq!(big.to_i128(), None); // beyond i128
    /// # Ok::<(), json::JsonError>(())
    /// ```
    pub fn to_i128(&self) -> Option<i128> {
        self.0.parse().ok()
    }
}

impl fmt::Display for BigInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

mod canonical;
mod encode;
mod lex;
mod parse;
#[cfg(test)]
mod tests;

pub use canonical::{check_canonical_object, CanonicalScanError};
pub use encode::{to_canonical_bytes, write_canonical, write_float, write_object, EncodeError};
pub use parse::{parse, JsonError};
