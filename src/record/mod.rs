//! Records: a JSON object read and written through typed [`Attribute`]s.
//!
//! [`Record`] is the plain form; [`Event`] (a data-topic value), [`State`] (per-key state) and
//! [`Config`] (a config-topic value) are distinct types with the same interface, so the compiler
//! keeps them apart where Python compared them at run time (ATTR-23, ATTR-25). Each derefs to
//! [`Record`] for the shared operations.

use std::fmt;
use std::ops::{Deref, DerefMut};

pub mod attribute;
#[cfg(feature = "secrets")]
mod secret;
mod temporal;

use self::attribute::{Attribute, AttributeError};
use crate::json::{self, EncodeError, Map, Value};

/// A JSON object (`raw`) accessed through attributes (ATTR-20).
///
/// Equality is by content; equal records always encode to the same bytes (ATTR-44). Cloning is
/// a deep copy (ATTR-24): a clone never shares anything with its original.
///
/// ```
/// use flechtwerk::attribute::{Attribute, INT, STR};
/// use flechtwerk::Record;
///
/// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
/// const NAME: Attribute<String> = Attribute::new("name", &STR);
///
/// let mut record = Record::new().with(&NAME, "ada".to_owned())?;
/// record.set(&COUNT, 2)?;
/// assert_eq!(record.get(&COUNT)?, Some(2));
/// assert_eq!(record.encode()?, br#"{"count":2,"name":"ada"}"#); // canonical: keys sorted
/// let copy = record.clone();
/// record.set(&COUNT, 3)?;
/// assert_eq!(copy.get(&COUNT)?, Some(2)); // a deep copy
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Record {
    raw: Map,
}

impl Record {
    /// An empty record.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// let record = Record::new();
    /// assert!(record.is_empty());
    /// assert_eq!(record.get(&COUNT)?, None);
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn new() -> Self {
        Record { raw: Map::new() }
    }

    /// The wire entry point: wraps a JSON object as it arrived (ATTR-21). Ownership moves in,
    /// so the record never aliases its source.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// use flechtwerk::json::{self, Value};
    /// let Value::Object(map) = json::parse(r#"{"count": 7}"#).unwrap() else { unreachable!() };
    /// let record = Record::wrap(map);
    /// assert_eq!(record.get(&COUNT)?, Some(7));
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn wrap(raw: Map) -> Self {
        Record { raw }
    }

    /// The JSON object.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// let record = Record::new().with(&COUNT, 1)?;
    /// assert_eq!(record.raw().keys().collect::<Vec<_>>(), ["count"]);
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn raw(&self) -> &Map {
        &self.raw
    }

    /// The JSON object, mutable: writes here bypass the codecs (the escape hatch for dynamic
    /// keys; typed code goes through [`set`](Self::set)).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// use flechtwerk::json::Value;
    /// let mut record = Record::new();
    /// for day in ["mon", "tue"] {
    ///     record.raw_mut().insert(format!("visits_{day}"), Value::Int(0)); // keys known at run time only
    /// }
    /// assert_eq!(record.len(), 2);
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn raw_mut(&mut self) -> &mut Map {
        &mut self.raw
    }

    /// Unwraps the JSON object.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// let map = Record::new().with(&COUNT, 1)?.into_raw();
    /// assert!(map.contains_key("count"));
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn into_raw(self) -> Map {
        self.raw
    }

    /// Reads an attribute: `None` when absent or null; an error when the value does not fit the
    /// codec.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// let record = Record::new().with(&COUNT, 1)?.with(&NOTE, None)?;
    /// assert_eq!(record.get(&COUNT)?, Some(1));
    /// assert_eq!(record.get(&NOTE)?, None); // null reads as None
    /// let wrong: Attribute<String> = Attribute::new("count", &STR);
    /// assert!(record.get(&wrong).is_err()); // an integer is not a string
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn get<V>(&self, attr: &Attribute<V>) -> Result<Option<V>, AttributeError> {
        match self.raw.get(attr.name()) {
            None | Some(Value::Null) => Ok(None),
            Some(raw) => attr.decode(raw).map(Some),
        }
    }

    /// Strict read (Python's `record[attr]`): absent or null is
    /// [`AttributeError::Missing`] (ATTR-06).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// use flechtwerk::attribute::AttributeError;
    /// let record = Record::new().with(&COUNT, 1)?;
    /// assert_eq!(record.require(&COUNT)?, 1);
    /// assert_eq!(record.require(&NOTE), Err(AttributeError::Missing { name: "note" }));
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn require<V>(&self, attr: &Attribute<V>) -> Result<V, AttributeError> {
        self.get(attr)?.ok_or(AttributeError::Missing { name: attr.name() })
    }

    /// Writes an attribute through its codec. `None` stores JSON null on an optional attribute
    /// and is [`AttributeError::RequiredNone`] on a required one (ATTR-02).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// use flechtwerk::attribute::AttributeError;
    /// let mut record = Record::new();
    /// record.set(&COUNT, 1)?;
    /// record.set(&NOTE, None)?; // optional: stored as null
    /// assert_eq!(record.set(&COUNT, None), Err(AttributeError::RequiredNone { name: "count" }));
    /// assert_eq!(record.encode().unwrap(), br#"{"count":1,"note":null}"#);
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn set<V>(&mut self, attr: &Attribute<V>, value: impl Into<Option<V>>) -> Result<(), AttributeError> {
        let encoded = match value.into() {
            Some(value) => attr.encode(&value)?,
            None if attr.is_optional() => Value::Null,
            None => return Err(AttributeError::RequiredNone { name: attr.name() }),
        };
        self.raw.insert(attr.name().to_owned(), encoded);
        Ok(())
    }

    /// Builder form of [`set`](Self::set).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// let record = Record::new().with(&COUNT, 1)?.with(&NOTE, "first".to_owned())?;
    /// assert_eq!(record.len(), 2);
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn with<V>(mut self, attr: &Attribute<V>, value: impl Into<Option<V>>) -> Result<Self, AttributeError> {
        self.set(attr, value)?;
        Ok(self)
    }

    /// Presence test: true even when the stored value is null.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// let record = Record::new().with(&NOTE, None)?;
    /// assert!(record.contains(&NOTE)); // present, though null
    /// assert!(!record.contains(&COUNT));
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn contains<V>(&self, attr: &Attribute<V>) -> bool {
        self.raw.contains_key(attr.name())
    }

    /// Removes an attribute (Python's `del record[attr]`): absent is
    /// [`AttributeError::Missing`].
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// let mut record = Record::new().with(&COUNT, 1)?;
    /// record.delete(&COUNT)?;
    /// assert!(record.is_empty());
    /// assert!(record.delete(&COUNT).is_err()); // already gone
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn delete<V>(&mut self, attr: &Attribute<V>) -> Result<(), AttributeError> {
        self.raw.remove(attr.name()).map(|_| ()).ok_or(AttributeError::Missing { name: attr.name() })
    }

    /// Removes an attribute and returns its value (Python's `pop`): `Ok(None)` when it was
    /// absent or null.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// let mut record = Record::new().with(&COUNT, 1)?;
    /// assert_eq!(record.take(&COUNT)?, Some(1));
    /// assert_eq!(record.take(&COUNT)?, None);
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn take<V>(&mut self, attr: &Attribute<V>) -> Result<Option<V>, AttributeError> {
        match self.raw.remove(attr.name()) {
            None | Some(Value::Null) => Ok(None),
            Some(raw) => attr.decode(&raw).map(Some),
        }
    }

    /// The first attribute holding a non-null value, decoded (Python's `coalesce`).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// const NICK: Attribute<String> = Attribute::optional("nick", &STR);
    /// const NAME: Attribute<String> = Attribute::new("name", &STR);
    /// let record = Record::new().with(&NICK, None)?.with(&NAME, "Ada".to_owned())?;
    /// assert_eq!(record.coalesce(&[&NICK, &NAME])?, Some("Ada".to_owned()));
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn coalesce<V>(&self, attrs: &[&Attribute<V>]) -> Result<Option<V>, AttributeError> {
        for attr in attrs {
            if let Some(v) = self.get(attr)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// Merges `other`'s fields into this record, overwriting equal keys (Python's `update`).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// let mut record = Record::new().with(&COUNT, 1)?;
    /// record.update(&Record::new().with(&COUNT, 5)?.with(&NOTE, "merged".to_owned())?);
    /// assert_eq!(record.get(&COUNT)?, Some(5));
    /// assert_eq!(record.len(), 2);
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn update(&mut self, other: &Record) {
        self.raw.extend(other.raw.iter().map(|(k, v)| (k.clone(), v.clone())));
    }

    /// Number of fields.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// assert_eq!(Record::new().with(&COUNT, 1)?.with(&NOTE, None)?.len(), 2);
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// True when there are no fields: an empty `State` is a deletion (STG-43).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// assert!(Record::new().is_empty());
    /// assert!(!Record::new().with(&NOTE, None)?.is_empty()); // a null field is a field
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// Canonical JSON bytes (ATTR-43).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT, STR};
    /// use flechtwerk::Record;
    /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    /// const NOTE: Attribute<String> = Attribute::optional("note", &STR);
    /// let record = Record::new().with(&NOTE, "ü".to_owned())?.with(&COUNT, 1)?;
    /// assert_eq!(record.encode().unwrap(), r#"{"count":1,"note":"ü"}"#.as_bytes());
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        // Sized for the usual record up front (a Vec growing 64 → 128 → 256 bytes was two
        // reallocations per output of ~150 bytes; issue #14). Nested values are guessed, not
        // walked: a bigger record grows as before.
        let hint = 2 + self
            .raw
            .iter()
            .map(|(key, value)| {
                key.len()
                    + 4
                    + match value {
                        Value::Str(s) => s.len() + 2,
                        Value::Int(_) => 8,
                        Value::Float(_) | Value::BigInt(_) => 24,
                        Value::Null | Value::Bool(_) => 5,
                        Value::List(_) | Value::Object(_) => 32,
                    }
            })
            .sum::<usize>();
        let mut out = Vec::with_capacity(hint);
        json::write_object(&self.raw, &mut out)?;
        Ok(out)
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.raw.iter()).finish()
    }
}

macro_rules! record_kind {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Default, PartialEq, Eq)]
        pub struct $name(Record);

        impl $name {
            /// An empty record.
            ///
            /// ```
            #[doc = concat!("let record = flechtwerk::", stringify!($name), "::new();")]
            /// assert!(record.is_empty()); // every `Record` method works on it (it derefs)
            /// ```
            pub fn new() -> Self {
                $name(Record::new())
            }

            /// Wraps a JSON object as it arrived (ATTR-21).
            ///
            /// ```
            /// use flechtwerk::json::{self, Value};
            /// let Value::Object(map) = json::parse(r#"{"plan": "pro"}"#)? else { unreachable!() };
            #[doc = concat!("let record = flechtwerk::", stringify!($name), "::wrap(map);")]
            /// assert_eq!(record.len(), 1);
            /// # Ok::<(), json::JsonError>(())
            /// ```
            pub fn wrap(raw: Map) -> Self {
                $name(Record::wrap(raw))
            }

            /// The plain record.
            ///
            /// ```
            /// use flechtwerk::Record;
            #[doc = concat!("let record: Record = flechtwerk::", stringify!($name), "::new().into_record();")]
            /// assert!(record.is_empty());
            /// ```
            pub fn into_record(self) -> Record {
                self.0
            }

            /// Builder form of [`Record::set`].
            ///
            /// ```
            /// use flechtwerk::attribute::{Attribute, INT};
            /// const COUNT: Attribute<i64> = Attribute::new("count", &INT);
            #[doc = concat!("let record = flechtwerk::", stringify!($name), "::new().with(&COUNT, 1)?;")]
            /// assert_eq!(record.get(&COUNT)?, Some(1));
            /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
            /// ```
            pub fn with<V>(
                self,
                attr: &Attribute<V>,
                value: impl Into<Option<V>>,
            ) -> Result<Self, AttributeError> {
                Ok($name(self.0.with(attr, value)?))
            }
        }

        impl Deref for $name {
            type Target = Record;
            fn deref(&self) -> &Record {
                &self.0
            }
        }

        impl DerefMut for $name {
            fn deref_mut(&mut self) -> &mut Record {
                &mut self.0
            }
        }

        impl From<Record> for $name {
            fn from(record: Record) -> Self {
                $name(record)
            }
        }

        impl From<$name> for Record {
            fn from(value: $name) -> Record {
                value.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "("))?;
                fmt::Debug::fmt(&self.0, f)?;
                write!(f, ")")
            }
        }
    };
}

record_kind!(
    /// The value of a data-topic record: what `transform` receives and what a `Message` carries.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, STR};
    /// use flechtwerk::{Event, Message};
    ///
    /// const CITY: Attribute<String> = Attribute::new("city", &STR);
    ///
    /// let event = Event::new().with(&CITY, "Lyon".to_owned())?;
    /// let message = Message::new("visits", "ada", event);
    /// assert_eq!(message.encode_value()?.as_deref(), Some(&br#"{"city":"Lyon"}"#[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    Event
);
record_kind!(
    /// Per-key state. Emitting an empty `State` deletes the key's state (STG-43).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT};
    /// use flechtwerk::State;
    ///
    /// const SEEN: Attribute<i64> = Attribute::new("seen", &INT);
    ///
    /// let mut state = State::new(); // a key without state starts empty
    /// let seen = state.get(&SEEN)?.unwrap_or(0) + 1;
/// state.set(&SEEN, seen)?;
    /// assert_eq!(state.require(&SEEN)?, 1);
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    State
);
record_kind!(
    /// A config-topic value, as held by the config store. To send a config as data, convert it:
    /// `Event::from(config.into_record())` (a `Config` travels as data, it is not itself a
    /// payload).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, STR};
    /// use flechtwerk::{Config, Event, Message};
    ///
    /// const PLAN: Attribute<String> = Attribute::new("plan", &STR);
    ///
    /// let config = Config::new().with(&PLAN, "pro".to_owned())?;
    /// assert_eq!(config.require(&PLAN)?, "pro");
    /// let as_data = Message::new("plans-audit", "ada", Event::from(config.into_record()));
    /// # let _ = as_data;
    /// # Ok::<(), flechtwerk::attribute::AttributeError>(())
    /// ```
    Config
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::attribute::{INT, STR};

    const COUNT: Attribute<i64> = Attribute::new("count", &INT);
    const NAME: Attribute<String> = Attribute::new("name", &STR);
    const NOTE: Attribute<String> = Attribute::optional("note", &STR);

    #[test]
    fn attr_02_and_06_none_and_missing() {
        let mut r = Record::new();
        assert_eq!(r.set(&COUNT, None), Err(AttributeError::RequiredNone { name: "count" }));
        assert!(r.set(&COUNT, None).unwrap_err().to_string().contains("cannot assign None to required"));
        r.set(&NOTE, None).unwrap();
        assert!(r.contains(&NOTE));
        assert_eq!(r.get(&NOTE), Ok(None));
        assert_eq!(r.require(&NOTE), Err(AttributeError::Missing { name: "note" }));
        assert_eq!(r.require(&COUNT), Err(AttributeError::Missing { name: "count" }));
    }

    #[test]
    fn attr_20_operations() {
        let mut r = Record::new().with(&COUNT, 1).unwrap().with(&NAME, "x".to_owned()).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r.take(&COUNT), Ok(Some(1)));
        assert!(r.delete(&COUNT).is_err());
        assert_eq!(r.coalesce(&[&NOTE, &NAME]), Ok(Some("x".to_owned())));
        let mut other = Record::new();
        other.set(&NAME, "y".to_owned()).unwrap();
        r.update(&other);
        assert_eq!(r.get(&NAME), Ok(Some("y".to_owned())));
        r.raw_mut().insert("name".into(), Value::Int(3));
        assert!(matches!(r.get(&NAME), Err(AttributeError::Codec { name: "name", .. })));
    }

    #[test]
    fn attr_24_clone_is_independent() {
        let a = State::new().with(&COUNT, 1).unwrap();
        let mut b = a.clone();
        b.set(&COUNT, 2).unwrap();
        assert_eq!(a.get(&COUNT), Ok(Some(1)));
        assert!(State::new().is_empty());
    }
}
