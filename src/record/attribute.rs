//! Typed attributes: one type-safe handle on a record field, carrying an explicit codec.
//!
//! An [`Attribute<V>`] names a wire key and says how its JSON value maps to a Rust `V`. Records
//! are read and written only through attributes, so every write is validated by the codec and
//! every read either yields a `V` or a named error — never a silently defaulted value.
//!
//! ```
//! use flechtwerk::attribute::{Attribute, INT, STR, set};
//! use flechtwerk::State;
//! use std::collections::BTreeSet;
//!
//! const COUNT: Attribute<i64> = Attribute::new("count", &INT);
//! const TAGS: Attribute<BTreeSet<String>> = Attribute::new("tags", &set(STR));
//! const NOTE: Attribute<String> = Attribute::optional("note", &STR);
//!
//! let mut state = State::new();
//! state.set(&COUNT, 1)?;
//! state.set(&TAGS, BTreeSet::from(["z".to_owned(), "a".to_owned()]))?;
//! state.set(&NOTE, None)?; // optional: stored as JSON null
//! assert_eq!(state.get(&COUNT)?, Some(1));
//! assert_eq!(state.encode()?, br#"{"count":1,"note":null,"tags":["a","z"]}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Codecs check the *exact* JSON type in both directions (ATTR-11): `INT` never reads a float or
//! a bool, `FLOAT` never reads an integer (`1` is not `1.0` on the wire, and silently widening it
//! would change the bytes the record re-encodes to).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::marker::PhantomData;

use super::temporal;
pub use super::temporal::{Date, DateTime, TemporalError, Time, UtcOffset};

#[cfg(feature = "secrets")]
pub use super::secret::{encrypted, signed, EncryptedCodec, SignedCodec};
use super::Record;
use crate::json::{Map, Value};

/// Why a JSON value does not fit a codec, or a Rust value cannot be encoded.
///
/// ```
/// use flechtwerk::attribute::{Codec, CodecError, INT};
/// use flechtwerk::json::Value;
///
/// assert_eq!(INT.decode(&Value::Float(1.0)), Err(CodecError::WrongType { expected: "int", found: "float" }));
/// assert_eq!(INT.decode(&Value::Int(1))?, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CodecError {
    /// The JSON type is not the one the codec reads (exact-type rule).
    #[error("expected {expected}, found {found}")]
    WrongType {
        /// What the codec reads.
        expected: &'static str,
        /// The JSON type present.
        found: &'static str,
    },
    /// An integer outside the range of the Rust type.
    #[error("integer {value} out of range for {target}")]
    OutOfRange {
        /// The decimal value.
        value: String,
        /// The Rust type.
        target: &'static str,
    },
    /// A float that JSON cannot carry.
    #[error("float {value} is not JSON compliant (NaN and infinities cannot be encoded)")]
    NonFinite {
        /// `NaN`, `inf` or `-inf`.
        value: String,
    },
    /// A date, time or datetime string that does not parse.
    #[error(transparent)]
    Temporal(#[from] TemporalError),
    /// An element of a list, set, tuple or dict failed.
    #[error("at {at}: {source}")]
    Element {
        /// Index or key of the element.
        at: String,
        /// What went wrong there.
        source: Box<CodecError>,
    },
    /// A custom codec's own error.
    #[error("{0}")]
    Custom(String),
    /// A secret codec's refusal (feature `secrets`): no keyring, a token that does not open
    /// under the attribute's scope, a plaintext value where ciphertext is required.
    #[cfg(feature = "secrets")]
    #[error(transparent)]
    Secret(#[from] crate::secrets::SecretError),
}

impl CodecError {
    fn wrong(expected: &'static str, found: &Value) -> Self {
        CodecError::WrongType { expected, found: found.type_name() }
    }

    fn at(self, at: impl fmt::Display) -> Self {
        CodecError::Element { at: at.to_string(), source: Box::new(self) }
    }
}

/// A pair of functions between a JSON value and a Rust value (ATTR-10).
///
/// Implement it for your own wire types; the atoms below cover JSON's scalars, and
/// [`list()`], [`set()`], [`tuple()`] and [`dict()`] compose them.
///
/// ```
/// use flechtwerk::attribute::{Attribute, Codec, CodecError};
/// use flechtwerk::json::Value;
/// use flechtwerk::Event;
///
/// /// Cents on the wire, a decimal string in Rust: "12.34" ⇄ 1234.
/// struct Cents;
///
/// impl Codec<String> for Cents {
///     fn decode(&self, raw: &Value) -> Result<String, CodecError> {
///         match raw {
///             Value::Int(cents) => Ok(format!("{}.{:02}", cents / 100, cents % 100)),
///             _ => Err(CodecError::Custom("cents must be an integer".into())),
///         }
///     }
///     fn encode(&self, value: &String) -> Result<Value, CodecError> {
///         let (units, cents) = value.split_once('.').ok_or_else(|| CodecError::Custom(format!("not a price: {value}")))?;
///         let parse = |s: &str| s.parse::<i64>().map_err(|e| CodecError::Custom(e.to_string()));
///         Ok(Value::Int(parse(units)? * 100 + parse(cents)?))
///     }
/// }
///
/// const PRICE: Attribute<String> = Attribute::new("price", &Cents);
/// let event = Event::new().with(&PRICE, "12.34".to_owned())?;
/// assert_eq!(event.encode()?, br#"{"price":1234}"#);
/// assert_eq!(event.require(&PRICE)?, "12.34");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Codec<V>: Send + Sync {
    /// Reads a JSON value.
    ///
    /// ```
    /// use flechtwerk::attribute::{Codec, INT};
    /// use flechtwerk::json::Value;
    /// assert_eq!(INT.decode(&Value::Int(42))?, 42);
    /// assert!(INT.decode(&Value::Str("42".into())).is_err()); // no coercion
    /// # Ok::<(), flechtwerk::attribute::CodecError>(())
    /// ```
    fn decode(&self, raw: &Value) -> Result<V, CodecError>;
    /// Writes a Rust value as JSON.
    ///
    /// ```
    /// use flechtwerk::attribute::{Codec, STR};
    /// use flechtwerk::json::Value;
    /// assert_eq!(STR.encode(&"ada".to_owned())?, Value::Str("ada".into()));
    /// # Ok::<(), flechtwerk::attribute::CodecError>(())
    /// ```
    fn encode(&self, value: &V) -> Result<Value, CodecError>;
}

/// Codec atom for strings (`str`).
///
/// ```
/// use flechtwerk::attribute::{Attribute, StrCodec, STR};
/// const NAME: Attribute<String> = Attribute::new("name", &STR); // STR is the StrCodec
/// let _: &StrCodec = &STR;
/// assert_eq!(flechtwerk::Event::new().with(&NAME, "Ada".to_owned())?.encode()?, br#"{"name":"Ada"}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct StrCodec;
/// Codec atom for integers (`int`; never a bool, never a float).
///
/// ```
/// use flechtwerk::attribute::{Codec, IntCodec, INT};
/// use flechtwerk::json::Value;
/// let _: &IntCodec = &INT;
/// assert_eq!(INT.decode(&Value::Int(7))?, 7);
/// assert!(INT.decode(&Value::Bool(true)).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct IntCodec;
/// Codec atom for booleans (`bool`; never an integer).
///
/// ```
/// use flechtwerk::attribute::{BoolCodec, Codec, BOOL};
/// use flechtwerk::json::Value;
/// let _: &BoolCodec = &BOOL;
/// assert!(BOOL.decode(&Value::Bool(true))?);
/// assert!(BOOL.decode(&Value::Int(1)).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct BoolCodec;
/// Codec atom for floats (`float`; a JSON integer such as `1` is rejected).
///
/// ```
/// use flechtwerk::attribute::{Codec, FloatCodec, FLOAT};
/// use flechtwerk::json::Value;
/// let _: &FloatCodec = &FLOAT;
/// assert_eq!(FLOAT.decode(&Value::Float(1.5))?, 1.5);
/// assert!(FLOAT.decode(&Value::Int(1)).is_err());
/// assert!(FLOAT.encode(&f64::NAN).is_err()); // JSON cannot carry it
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct FloatCodec;
/// Codec atom for dates (`YYYY-MM-DD`).
///
/// ```
/// use flechtwerk::attribute::{Codec, DateCodec, DATE};
/// use flechtwerk::json::Value;
/// let _: &DateCodec = &DATE;
/// let date = DATE.decode(&Value::Str("2024-06-15".into()))?;
/// assert_eq!(DATE.encode(&date)?, Value::Str("2024-06-15".into()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DateCodec;
/// Codec atom for datetimes (ISO 8601, `Z` for UTC).
///
/// ```
/// use flechtwerk::attribute::{Codec, DateTimeCodec, DATETIME};
/// use flechtwerk::json::Value;
/// let _: &DateTimeCodec = &DATETIME;
/// let at = DATETIME.decode(&Value::Str("2024-06-15T14:30:00+00:00".into()))?;
/// assert_eq!(DATETIME.encode(&at)?, Value::Str("2024-06-15T14:30:00Z".into()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DateTimeCodec;
/// Codec atom for times of day (ISO 8601, offsets as `+HH:MM`, never `Z`).
///
/// ```
/// use flechtwerk::attribute::{Codec, TimeCodec, TIME};
/// use flechtwerk::json::Value;
/// let _: &TimeCodec = &TIME;
/// let at = TIME.decode(&Value::Str("14:30Z".into()))?;
/// assert_eq!(TIME.encode(&at)?, Value::Str("14:30:00+00:00".into()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TimeCodec;
/// Codec atom for nested records (a JSON object).
///
/// ```
/// use flechtwerk::attribute::{Attribute, RecordCodec, INT, RECORD};
/// use flechtwerk::{Event, Record};
/// const X: Attribute<i64> = Attribute::new("x", &INT);
/// const POINT: Attribute<Record> = Attribute::new("point", &RECORD);
/// let _: &RecordCodec = &RECORD;
/// let event = Event::new().with(&POINT, Record::new().with(&X, 3)?)?;
/// assert_eq!(event.encode()?, br#"{"point":{"x":3}}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RecordCodec;
/// Codec atom that passes any JSON value through unchanged.
///
/// ```
/// use flechtwerk::attribute::{AnyCodec, Attribute, ANY};
/// use flechtwerk::json::Value;
/// const EXTRA: Attribute<Value> = Attribute::new("extra", &ANY);
/// let _: &AnyCodec = &ANY;
/// let event = flechtwerk::Event::new().with(&EXTRA, Value::List(vec![Value::Int(1), Value::Null]))?;
/// assert_eq!(event.encode()?, br#"{"extra":[1,null]}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct AnyCodec;

/// Strings.
///
/// ```
/// use flechtwerk::attribute::{Attribute, STR};
/// const NAME: Attribute<String> = Attribute::new("name", &STR);
/// assert_eq!(flechtwerk::Event::new().with(&NAME, "Ada".to_owned())?.require(&NAME)?, "Ada");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const STR: StrCodec = StrCodec;
/// Integers (exact type: booleans and floats are rejected).
///
/// ```
/// use flechtwerk::attribute::{Attribute, INT};
/// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
/// assert_eq!(flechtwerk::State::new().with(&COUNT, 3)?.require(&COUNT)?, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const INT: IntCodec = IntCodec;
/// Booleans.
///
/// ```
/// use flechtwerk::attribute::{Attribute, BOOL};
/// const ACTIVE: Attribute<bool> = Attribute::new("active", &BOOL);
/// assert!(flechtwerk::Config::new().with(&ACTIVE, true)?.require(&ACTIVE)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const BOOL: BoolCodec = BoolCodec;
/// Floats (exact type: JSON integers are rejected, non-finite values cannot be written).
///
/// ```
/// use flechtwerk::attribute::{Attribute, FLOAT};
/// const RATIO: Attribute<f64> = Attribute::new("ratio", &FLOAT);
/// let event = flechtwerk::Event::new().with(&RATIO, 1.0)?;
/// assert_eq!(event.encode()?, br#"{"ratio":1.0}"#); // a float stays a float on the wire
/// assert!(flechtwerk::Event::new().with(&RATIO, f64::INFINITY).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const FLOAT: FloatCodec = FloatCodec;
/// Dates as `YYYY-MM-DD`.
///
/// ```
/// use flechtwerk::attribute::{Attribute, Date, DATE};
/// const BORN: Attribute<Date> = Attribute::new("born", &DATE);
/// let born = Date::from_ymd_opt(1815, 12, 10).unwrap();
/// assert_eq!(flechtwerk::Event::new().with(&BORN, born)?.encode()?, br#"{"born":"1815-12-10"}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const DATE: DateCodec = DateCodec;
/// Datetimes, naive or with an offset; UTC encodes with `Z`.
///
/// ```
/// use flechtwerk::attribute::{Attribute, DateTime, DATETIME};
/// use flechtwerk::Event;
/// const AT: Attribute<DateTime> = Attribute::new("at", &DATETIME);
/// let event = Event::wrap(match flechtwerk::json::parse(r#"{"at": "2024-06-15 14:30:00+00:00"}"#)? {
///     flechtwerk::json::Value::Object(map) => map,
///     _ => unreachable!(),
/// });
/// let at = event.require(&AT)?;
/// assert_eq!(Event::new().with(&AT, at)?.encode()?, br#"{"at":"2024-06-15T14:30:00Z"}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const DATETIME: DateTimeCodec = DateTimeCodec;
/// Times of day, optionally with an offset.
///
/// ```
/// use flechtwerk::attribute::{Attribute, Time, TIME};
/// const OPENS: Attribute<Time> = Attribute::new("opens", &TIME);
/// let nine = chrono::NaiveTime::from_hms_opt(9, 0, 0).unwrap();
/// assert_eq!(flechtwerk::Config::new().with(&OPENS, Time::from(nine))?.encode()?, br#"{"opens":"09:00:00"}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const TIME: TimeCodec = TimeCodec;
/// Nested records.
///
/// ```
/// use flechtwerk::attribute::{Attribute, RECORD, STR};
/// use flechtwerk::Record;
/// const CITY: Attribute<String> = Attribute::new("city", &STR);
/// const ADDRESS: Attribute<Record> = Attribute::new("address", &RECORD);
/// let event = flechtwerk::Event::new().with(&ADDRESS, Record::new().with(&CITY, "Lyon".to_owned())?)?;
/// assert_eq!(event.require(&ADDRESS)?.require(&CITY)?, "Lyon");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const RECORD: RecordCodec = RecordCodec;
/// Any JSON value.
///
/// ```
/// use flechtwerk::attribute::{Attribute, ANY};
/// use flechtwerk::json::Value;
/// const PAYLOAD: Attribute<Value> = Attribute::new("payload", &ANY);
/// let event = flechtwerk::Event::new().with(&PAYLOAD, Value::Str("anything".into()))?;
/// assert_eq!(event.require(&PAYLOAD)?, Value::Str("anything".into()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const ANY: AnyCodec = AnyCodec;

impl Codec<String> for StrCodec {
    fn decode(&self, raw: &Value) -> Result<String, CodecError> {
        match raw {
            Value::Str(s) => Ok(s.clone()),
            other => Err(CodecError::wrong("str", other)),
        }
    }
    fn encode(&self, value: &String) -> Result<Value, CodecError> {
        Ok(Value::Str(value.clone()))
    }
}

impl Codec<i64> for IntCodec {
    fn decode(&self, raw: &Value) -> Result<i64, CodecError> {
        match raw {
            Value::Int(v) => Ok(*v),
            Value::BigInt(v) => Err(CodecError::OutOfRange { value: v.to_string(), target: "i64" }),
            other => Err(CodecError::wrong("int", other)),
        }
    }
    fn encode(&self, value: &i64) -> Result<Value, CodecError> {
        Ok(Value::Int(*value))
    }
}

impl Codec<bool> for BoolCodec {
    fn decode(&self, raw: &Value) -> Result<bool, CodecError> {
        match raw {
            Value::Bool(v) => Ok(*v),
            other => Err(CodecError::wrong("bool", other)),
        }
    }
    fn encode(&self, value: &bool) -> Result<Value, CodecError> {
        Ok(Value::Bool(*value))
    }
}

impl Codec<f64> for FloatCodec {
    fn decode(&self, raw: &Value) -> Result<f64, CodecError> {
        match raw {
            Value::Float(v) => Ok(*v),
            other => Err(CodecError::wrong("float", other)),
        }
    }
    fn encode(&self, value: &f64) -> Result<Value, CodecError> {
        if value.is_finite() {
            Ok(Value::Float(*value))
        } else {
            Err(CodecError::NonFinite { value: value.to_string() })
        }
    }
}

impl Codec<Date> for DateCodec {
    fn decode(&self, raw: &Value) -> Result<Date, CodecError> {
        match raw {
            Value::Str(s) => Ok(temporal::parse_date(s)?),
            other => Err(CodecError::wrong("str (ISO date)", other)),
        }
    }
    fn encode(&self, value: &Date) -> Result<Value, CodecError> {
        Ok(Value::Str(temporal::format_date(value)?))
    }
}

impl Codec<DateTime> for DateTimeCodec {
    fn decode(&self, raw: &Value) -> Result<DateTime, CodecError> {
        match raw {
            Value::Str(s) => Ok(temporal::parse_datetime(s)?),
            other => Err(CodecError::wrong("str (ISO datetime)", other)),
        }
    }
    fn encode(&self, value: &DateTime) -> Result<Value, CodecError> {
        Ok(Value::Str(temporal::format_datetime(value)?))
    }
}

impl Codec<Time> for TimeCodec {
    fn decode(&self, raw: &Value) -> Result<Time, CodecError> {
        match raw {
            Value::Str(s) => Ok(temporal::parse_time(s)?),
            other => Err(CodecError::wrong("str (ISO time)", other)),
        }
    }
    fn encode(&self, value: &Time) -> Result<Value, CodecError> {
        Ok(Value::Str(temporal::format_time(value)?))
    }
}

impl Codec<Record> for RecordCodec {
    fn decode(&self, raw: &Value) -> Result<Record, CodecError> {
        match raw {
            Value::Object(map) => Ok(Record::wrap(map.clone())),
            other => Err(CodecError::wrong("object", other)),
        }
    }
    fn encode(&self, value: &Record) -> Result<Value, CodecError> {
        Ok(Value::Object(value.raw().clone()))
    }
}

impl Codec<Value> for AnyCodec {
    fn decode(&self, raw: &Value) -> Result<Value, CodecError> {
        Ok(raw.clone())
    }
    fn encode(&self, value: &Value) -> Result<Value, CodecError> {
        check_finite(value)?;
        Ok(value.clone())
    }
}

/// Refuses NaN and infinities anywhere inside `value`, at write time rather than at send time.
fn check_finite(value: &Value) -> Result<(), CodecError> {
    match value {
        Value::Float(v) if !v.is_finite() => Err(CodecError::NonFinite { value: v.to_string() }),
        Value::List(items) => items.iter().enumerate().try_for_each(|(i, v)| check_finite(v).map_err(|e| e.at(i))),
        Value::Object(map) => map.iter().try_for_each(|(k, v)| check_finite(v).map_err(|e| e.at(k))),
        _ => Ok(()),
    }
}

/// `LIST(V)`: a JSON array read element-wise.
///
/// ```
/// use flechtwerk::attribute::{list, Attribute, ListCodec, IntCodec, INT};
/// const CODEC: ListCodec<IntCodec> = list(INT);
/// const SCORES: Attribute<Vec<i64>> = Attribute::new("scores", &CODEC);
/// assert_eq!(flechtwerk::Event::new().with(&SCORES, vec![3, 1])?.encode()?, br#"{"scores":[3,1]}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ListCodec<C>(C);
/// `SET(V)`: a JSON array read into a set; written sorted, so equal sets encode equally.
///
/// ```
/// use std::collections::BTreeSet;
/// use flechtwerk::attribute::{set, Attribute, SetCodec, StrCodec, STR};
/// const CODEC: SetCodec<StrCodec> = set(STR);
/// const TAGS: Attribute<BTreeSet<String>> = Attribute::new("tags", &CODEC);
/// let tags = BTreeSet::from(["b".to_owned(), "a".to_owned()]);
/// assert_eq!(flechtwerk::Event::new().with(&TAGS, tags)?.encode()?, br#"{"tags":["a","b"]}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SetCodec<C>(C);
/// `TUPLE(V)`: a JSON array read into a fixed-length sequence, order preserved.
///
/// ```
/// use flechtwerk::attribute::{tuple, Attribute, FloatCodec, TupleCodec, FLOAT};
/// const CODEC: TupleCodec<FloatCodec> = tuple(FLOAT);
/// const POINT: Attribute<Box<[f64]>> = Attribute::new("point", &CODEC);
/// let event = flechtwerk::Event::new().with(&POINT, Box::from([0.5, 2.0]))?;
/// assert_eq!(event.encode()?, br#"{"point":[0.5,2.0]}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TupleCodec<C>(C);
/// `DICT(V)`: a JSON object read value-wise.
///
/// ```
/// use std::collections::BTreeMap;
/// use flechtwerk::attribute::{dict, Attribute, DictCodec, IntCodec, INT};
/// const CODEC: DictCodec<IntCodec> = dict(INT);
/// const STOCK: Attribute<BTreeMap<String, i64>> = Attribute::new("stock", &CODEC);
/// let stock = BTreeMap::from([("pears".to_owned(), 4), ("apples".to_owned(), 2)]);
/// assert_eq!(flechtwerk::Event::new().with(&STOCK, stock)?.encode()?, br#"{"stock":{"apples":2,"pears":4}}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DictCodec<C>(C);

/// `LIST(V)`: `Vec<V>` ⇄ JSON array.
///
/// ```
/// use flechtwerk::attribute::{list, Attribute, STR};
/// const NAMES: Attribute<Vec<String>> = Attribute::new("names", &list(STR));
/// let event = flechtwerk::Event::new().with(&NAMES, vec!["b".to_owned(), "a".to_owned()])?;
/// assert_eq!(event.encode()?, br#"{"names":["b","a"]}"#); // order kept
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const fn list<C>(element: C) -> ListCodec<C> {
    ListCodec(element)
}

/// `SET(V)`: `BTreeSet<V>` ⇄ JSON array sorted by value (ATTR-14), so equal sets always
/// produce equal bytes. Duplicates on the wire collapse.
///
/// ```
/// use std::collections::BTreeSet;
/// use flechtwerk::attribute::{set, Attribute, INT};
/// const IDS: Attribute<BTreeSet<i64>> = Attribute::new("ids", &set(INT));
/// let event = flechtwerk::Event::new().with(&IDS, BTreeSet::from([3, 1, 2]))?;
/// assert_eq!(event.encode()?, br#"{"ids":[1,2,3]}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const fn set<C>(element: C) -> SetCodec<C> {
    SetCodec(element)
}

/// `TUPLE(V)`: `Box<[V]>` ⇄ JSON array, order preserved.
///
/// ```
/// use flechtwerk::attribute::{tuple, Attribute, INT};
/// const RANGE: Attribute<Box<[i64]>> = Attribute::new("range", &tuple(INT));
/// let event = flechtwerk::Event::new().with(&RANGE, Box::from([10, 20]))?;
/// assert_eq!(&*event.require(&RANGE)?, [10, 20]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const fn tuple<C>(element: C) -> TupleCodec<C> {
    TupleCodec(element)
}

/// `DICT(V)`: `BTreeMap<String, V>` ⇄ JSON object.
///
/// ```
/// use std::collections::BTreeMap;
/// use flechtwerk::attribute::{dict, Attribute, BOOL};
/// const FLAGS: Attribute<BTreeMap<String, bool>> = Attribute::new("flags", &dict(BOOL));
/// let event = flechtwerk::Event::new().with(&FLAGS, BTreeMap::from([("beta".to_owned(), true)]))?;
/// assert_eq!(event.encode()?, br#"{"flags":{"beta":true}}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const fn dict<C>(value: C) -> DictCodec<C> {
    DictCodec(value)
}

fn decode_items<V, C: Codec<V>>(codec: &C, raw: &Value) -> Result<Vec<V>, CodecError> {
    match raw {
        Value::List(items) => items.iter().enumerate().map(|(i, v)| codec.decode(v).map_err(|e| e.at(i))).collect(),
        other => Err(CodecError::wrong("list", other)),
    }
}

fn encode_items<'v, V: 'v, C: Codec<V>>(codec: &C, items: impl Iterator<Item = &'v V>) -> Result<Value, CodecError> {
    let encoded: Result<Vec<Value>, CodecError> =
        items.enumerate().map(|(i, v)| codec.encode(v).map_err(|e| e.at(i))).collect();
    Ok(Value::List(encoded?))
}

impl<V, C: Codec<V>> Codec<Vec<V>> for ListCodec<C> {
    fn decode(&self, raw: &Value) -> Result<Vec<V>, CodecError> {
        decode_items(&self.0, raw)
    }
    fn encode(&self, value: &Vec<V>) -> Result<Value, CodecError> {
        encode_items(&self.0, value.iter())
    }
}

impl<V: Ord, C: Codec<V>> Codec<BTreeSet<V>> for SetCodec<C> {
    fn decode(&self, raw: &Value) -> Result<BTreeSet<V>, CodecError> {
        Ok(decode_items(&self.0, raw)?.into_iter().collect())
    }
    fn encode(&self, value: &BTreeSet<V>) -> Result<Value, CodecError> {
        // A BTreeSet iterates in ascending order: the "sorted by raw value" rule of ATTR-14.
        encode_items(&self.0, value.iter())
    }
}

impl<V, C: Codec<V>> Codec<Box<[V]>> for TupleCodec<C> {
    fn decode(&self, raw: &Value) -> Result<Box<[V]>, CodecError> {
        Ok(decode_items(&self.0, raw)?.into_boxed_slice())
    }
    fn encode(&self, value: &Box<[V]>) -> Result<Value, CodecError> {
        encode_items(&self.0, value.iter())
    }
}

impl<V, C: Codec<V>> Codec<BTreeMap<String, V>> for DictCodec<C> {
    fn decode(&self, raw: &Value) -> Result<BTreeMap<String, V>, CodecError> {
        match raw {
            Value::Object(map) => {
                map.iter().map(|(k, v)| Ok((k.clone(), self.0.decode(v).map_err(|e| e.at(k))?))).collect()
            }
            other => Err(CodecError::wrong("object", other)),
        }
    }
    fn encode(&self, value: &BTreeMap<String, V>) -> Result<Value, CodecError> {
        let mut map = Map::new();
        for (k, v) in value {
            map.insert(k.clone(), self.0.encode(v).map_err(|e| e.at(k))?);
        }
        Ok(Value::Object(map))
    }
}

/// A typed handle on one record field: its wire name, its codec, and whether `None` may be
/// written (ATTR-01).
///
/// Attributes are usually constants. Two attributes are equal when their names are equal; the
/// codec and optionality do not take part (ATTR-03).
///
/// ```
/// use flechtwerk::attribute::{Attribute, INT, STR};
/// use flechtwerk::State;
///
/// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
/// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
///
/// let state = State::new().with(&COUNT, 1)?.with(&NOTE, None)?;
/// assert_eq!(state.encode()?, br#"{"count":1,"note":null}"#);
/// assert_eq!(COUNT, Attribute::<String>::new("count", &STR)); // equal by name
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Attribute<V: 'static> {
    name: &'static str,
    codec: &'static dyn Codec<V>,
    optional: bool,
    _value: PhantomData<fn() -> V>,
}

impl<V> Attribute<V> {
    /// A required attribute: writing `None` to it is an error.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT};
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// assert!(COUNT.is_required());
    /// assert!(flechtwerk::State::new().with(&COUNT, None).is_err());
    /// ```
    pub const fn new(name: &'static str, codec: &'static dyn Codec<V>) -> Self {
        Attribute { name, codec, optional: false, _value: PhantomData }
    }

    /// An optional attribute: writing `None` stores JSON `null` (the codec is not called).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT};
    /// const LIMIT: Attribute<i64> = Attribute::optional("limit", &INT);
    /// let config = flechtwerk::Config::new().with(&LIMIT, None).unwrap();
    /// assert_eq!(config.encode().unwrap(), br#"{"limit":null}"#);
    /// ```
    pub const fn optional(name: &'static str, codec: &'static dyn Codec<V>) -> Self {
        Attribute { name, codec, optional: true, _value: PhantomData }
    }

    /// The wire key.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT};
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// assert_eq!(COUNT.name(), "count");
    /// ```
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// Whether `None` may be written.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT};
    /// assert!(Attribute::<i64>::optional("limit", &INT).is_optional());
    /// assert!(!Attribute::<i64>::new("count", &INT).is_optional());
    /// ```
    pub const fn is_optional(&self) -> bool {
        self.optional
    }

    /// The inverse of [`is_optional`](Self::is_optional).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT};
    /// assert!(Attribute::<i64>::new("count", &INT).is_required());
    /// ```
    pub const fn is_required(&self) -> bool {
        !self.optional
    }

    /// The codec.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT};
    /// use flechtwerk::json::Value;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// assert_eq!(COUNT.codec().encode(&3).unwrap(), Value::Int(3));
    /// ```
    pub fn codec(&self) -> &'static dyn Codec<V> {
        self.codec
    }

    pub(crate) fn decode(&self, raw: &Value) -> Result<V, AttributeError> {
        self.codec.decode(raw).map_err(|source| AttributeError::Codec { name: self.name, source })
    }

    pub(crate) fn encode(&self, value: &V) -> Result<Value, AttributeError> {
        self.codec.encode(value).map_err(|source| AttributeError::Codec { name: self.name, source })
    }
}

impl<V> Clone for Attribute<V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V> Copy for Attribute<V> {}

impl<V, W> PartialEq<Attribute<W>> for Attribute<V> {
    fn eq(&self, other: &Attribute<W>) -> bool {
        self.name == other.name
    }
}

impl<V> Eq for Attribute<V> {}

impl<V> std::hash::Hash for Attribute<V> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl<V> fmt::Debug for Attribute<V> {
    /// `Attribute('count')`, or `Attribute('count', optional=True)` (ATTR-04).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.optional {
            write!(f, "Attribute({:?}, optional)", self.name)
        } else {
            write!(f, "Attribute({:?})", self.name)
        }
    }
}

/// A failed read or write through an [`Attribute`], naming the attribute.
///
/// ```
/// use flechtwerk::attribute::{Attribute, AttributeError, INT};
/// use flechtwerk::Event;
/// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
///
/// let error = Event::new().require(&COUNT).unwrap_err();
/// assert_eq!(error, AttributeError::Missing { name: "count" });
/// assert_eq!(error.to_string(), r#"missing attribute "count" (absent or null)"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AttributeError {
    /// A strict read found the attribute absent or null (ATTR-06).
    #[error("missing attribute {name:?} (absent or null)")]
    Missing {
        /// Wire key.
        name: &'static str,
    },
    /// `None` written to a required attribute (ERR-24).
    #[error("cannot assign None to required attribute {name:?}")]
    RequiredNone {
        /// Wire key.
        name: &'static str,
    },
    /// The codec rejected the value.
    #[error("attribute {name:?}: {source}")]
    Codec {
        /// Wire key.
        name: &'static str,
        /// The codec's reason.
        source: CodecError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    const RATIO: Attribute<f64> = Attribute::new("ratio", &FLOAT);
    const TAGS: Attribute<BTreeSet<String>> = Attribute::new("tags", &set(STR));
    const NESTED: Attribute<Vec<BTreeMap<String, Box<[i64]>>>> = Attribute::new("n", &list(dict(tuple(INT))));

    #[test]
    fn attr_11_exact_types() {
        assert!(INT.decode(&Value::Bool(true)).is_err());
        assert!(INT.decode(&Value::Float(1.0)).is_err());
        assert_eq!(INT.decode(&Value::Int(3)), Ok(3));
        assert!(FLOAT.decode(&Value::Int(1)).is_err());
        assert!(BOOL.decode(&Value::Int(0)).is_err());
        assert!(STR.decode(&Value::Int(1)).is_err());
        assert!(FLOAT.encode(&f64::NAN).is_err());
        let big = crate::json::parse("18446744073709551616").unwrap();
        assert!(matches!(INT.decode(&big), Err(CodecError::OutOfRange { .. })));
    }

    #[test]
    fn attr_14_set_encodes_sorted_and_composes() {
        let tags = BTreeSet::from(["z".to_owned(), "x".to_owned()]);
        assert_eq!(TAGS.encode(&tags).unwrap(), Value::List(vec!["x".into(), "z".into()]));
        let raw = crate::json::parse(r#"["b","a","b"]"#).unwrap();
        assert_eq!(TAGS.decode(&raw).unwrap().len(), 2);
        let raw = crate::json::parse(r#"[{"k":[1,2]},{}]"#).unwrap();
        let v = NESTED.decode(&raw).unwrap();
        assert_eq!(&*v[0]["k"], &[1, 2]);
        assert_eq!(NESTED.encode(&v).unwrap(), raw);
        let bad = crate::json::parse(r#"[{"k":[1,true]}]"#).unwrap();
        let err = NESTED.decode(&bad).unwrap_err().to_string();
        assert!(err.contains("at 0") && err.contains("at k") && err.contains("expected int"), "{err}");
    }

    #[test]
    fn attr_03_equality_by_name_only() {
        const A: Attribute<String> = Attribute::new("x", &STR);
        const B: Attribute<String> = Attribute::optional("x", &STR);
        const C: Attribute<i64> = Attribute::new("x", &INT);
        assert_eq!(A, B);
        assert_eq!(A, C);
        assert_ne!(A, COUNT);
        assert_eq!(format!("{COUNT:?}"), "Attribute(\"count\")");
        assert_eq!(format!("{B:?}"), "Attribute(\"x\", optional)");
        assert!(RATIO.is_required() && B.is_optional());
    }
}
