//! The invalid-message hook's types: the error it sees, what it may decide (INV-10..31).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use super::{DecodeError, RawRecord};
use crate::record::Record;

/// Which side of a record failed to decode.
///
/// ```
/// # use std::sync::Arc;
/// # let record = flechtwerk::wire::RawRecord {
/// #     topic: Arc::from("in"), partition: 0, offset: 9, timestamp_ms: None,
/// #     key: Some("k".into()), value: Some("{oops".into()), headers: vec![],
/// # };
/// use flechtwerk::wire::{decode_value, InvalidMessageError, Part};
/// let error = InvalidMessageError::new(Part::Value, &record, decode_value(Some(&b"{oops"[..])).unwrap_err());
/// assert_eq!(error.part(), Part::Value);
/// assert_eq!(Part::Key.to_string(), "key");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// The key (state identity: it can be skipped, never substituted).
    Key,
    /// The value.
    Value,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Key => "key",
            Part::Value => "value",
        })
    }
}

/// An undecodable record, forensically complete (INV-30, INV-31).
///
/// It carries where the record is and its raw bytes; its message names the part and
/// `topic/partition/offset` but never prints the bytes (a value may be a megabyte, or a secret).
/// The decode error is its [`source`](std::error::Error::source).
///
/// ```
/// # use std::sync::Arc;
/// # use flechtwerk::wire::RawRecord;
/// # let record = RawRecord {
/// #     topic: Arc::from("in"), partition: 2, offset: 41, timestamp_ms: None,
/// #     key: Some("k".into()), value: Some("not json".into()), headers: vec![],
/// # };
/// use flechtwerk::wire::{decode_value, InvalidMessageError, Part};
/// let error = InvalidMessageError::new(Part::Value, &record, decode_value(record.value.as_deref()).unwrap_err());
/// assert!(error.to_string().starts_with("undecodable value in the record at in/2/41"));
/// assert!(!error.to_string().contains("not json")); // the bytes are on the error, never in its text
/// assert_eq!(error.value().map(|v| &v[..]), Some(&b"not json"[..]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "undecodable {part} in the record at {topic}/{partition}/{offset} (the source error says why, \
     and the raw key and value bytes are on this error); on_invalid_message decides: raise, skip, \
     or substitute"
)]
pub struct InvalidMessageError {
    part: Part,
    topic: Arc<str>,
    partition: i32,
    offset: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
    #[source]
    source: DecodeError,
}

impl InvalidMessageError {
    /// Builds the error for `record`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let record = RawRecord {
    /// #     topic: Arc::from("in"), partition: 2, offset: 41, timestamp_ms: None,
    /// #     key: Some("k".into()), value: Some("not json".into()), headers: vec![],
    /// # };
    /// use flechtwerk::wire::{decode_value, InvalidMessageError, Part};
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(record.value.as_deref()).unwrap_err());
    /// assert_eq!(error.offset(), 41);
    /// ```
    pub fn new(part: Part, record: &RawRecord, source: DecodeError) -> Self {
        InvalidMessageError {
            part,
            topic: record.topic.clone(),
            partition: record.partition,
            offset: record.offset,
            key: record.key.clone(),
            value: record.value.clone(),
            source,
        }
    }

    /// Which side failed.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let record = RawRecord {
    /// #     topic: Arc::from("in"), partition: 2, offset: 41, timestamp_ms: None,
    /// #     key: Some("k".into()), value: Some("not json".into()), headers: vec![],
    /// # };
    /// use flechtwerk::wire::{decode_value, InvalidMessageError, Part};
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(record.value.as_deref()).unwrap_err());
    /// assert_eq!(error.part(), Part::Value);
    /// ```
    pub fn part(&self) -> Part {
        self.part
    }
    /// Topic of the record.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let record = RawRecord {
    /// #     topic: Arc::from("in"), partition: 2, offset: 41, timestamp_ms: None,
    /// #     key: Some("k".into()), value: Some("not json".into()), headers: vec![],
    /// # };
    /// use flechtwerk::wire::{decode_value, InvalidMessageError, Part};
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(record.value.as_deref()).unwrap_err());
    /// assert_eq!(error.topic(), "in");
    /// ```
    pub fn topic(&self) -> &str {
        &self.topic
    }
    /// Topic of the record, shared.
    pub(crate) fn topic_arc(&self) -> &Arc<str> {
        &self.topic
    }
    /// Partition of the record.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let record = RawRecord {
    /// #     topic: Arc::from("in"), partition: 2, offset: 41, timestamp_ms: None,
    /// #     key: Some("k".into()), value: Some("not json".into()), headers: vec![],
    /// # };
    /// use flechtwerk::wire::{decode_value, InvalidMessageError, Part};
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(record.value.as_deref()).unwrap_err());
    /// assert_eq!(error.partition(), 2);
    /// ```
    pub fn partition(&self) -> i32 {
        self.partition
    }
    /// Offset of the record.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let record = RawRecord {
    /// #     topic: Arc::from("in"), partition: 2, offset: 41, timestamp_ms: None,
    /// #     key: Some("k".into()), value: Some("not json".into()), headers: vec![],
    /// # };
    /// use flechtwerk::wire::{decode_value, InvalidMessageError, Part};
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(record.value.as_deref()).unwrap_err());
    /// assert_eq!(error.offset(), 41);
    /// ```
    pub fn offset(&self) -> i64 {
        self.offset
    }
    /// The raw key bytes.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let record = RawRecord {
    /// #     topic: Arc::from("in"), partition: 2, offset: 41, timestamp_ms: None,
    /// #     key: Some("k".into()), value: Some("not json".into()), headers: vec![],
    /// # };
    /// use flechtwerk::wire::{decode_value, InvalidMessageError, Part};
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(record.value.as_deref()).unwrap_err());
    /// assert_eq!(error.key().map(|k| &k[..]), Some(&b"k"[..]));
    /// ```
    pub fn key(&self) -> Option<&Bytes> {
        self.key.as_ref()
    }
    /// The raw value bytes.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let record = RawRecord {
    /// #     topic: Arc::from("in"), partition: 2, offset: 41, timestamp_ms: None,
    /// #     key: Some("k".into()), value: Some("not json".into()), headers: vec![],
    /// # };
    /// use flechtwerk::wire::{decode_value, InvalidMessageError, Part};
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(record.value.as_deref()).unwrap_err());
    /// assert_eq!(error.value().map(|v| &v[..]), Some(&b"not json"[..]));
    /// ```
    pub fn value(&self) -> Option<&Bytes> {
        self.value.as_ref()
    }
    /// The decode error.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let record = RawRecord {
    /// #     topic: Arc::from("in"), partition: 2, offset: 41, timestamp_ms: None,
    /// #     key: Some("k".into()), value: Some("not json".into()), headers: vec![],
    /// # };
    /// use flechtwerk::wire::{decode_value, InvalidMessageError, Part};
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(record.value.as_deref()).unwrap_err());
    /// println!("why: {}", error.decode_error());
    /// ```
    pub fn decode_error(&self) -> &DecodeError {
        &self.source
    }
}

/// What `on_invalid_message` decides for one undecodable record (INV-11..13).
///
/// ```
/// use flechtwerk::attribute::{Attribute, BOOL};
/// use flechtwerk::stage::transformer;
/// use flechtwerk::wire::{InvalidMessageAction, Part};
/// use flechtwerk::Record;
///
/// const BROKEN: Attribute<bool> = Attribute::new("broken", &BOOL);
///
/// // Undecodable values become `{"broken": true}`; an undecodable key stops the stage.
/// let stage = transformer(["in"])
///     .on_invalid_message(|error| match error.part() {
///         Part::Value => InvalidMessageAction::Substitute(Record::new().with(&BROKEN, true).unwrap()),
///         Part::Key => InvalidMessageAction::Raise,
///     })
///     .transform(|_, _, _| Ok(()));
/// # let _ = stage;
/// assert_eq!(InvalidMessageAction::default(), InvalidMessageAction::Raise);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum InvalidMessageAction {
    /// Propagate the error: the stage crashes before anything is committed, and a restart
    /// re-reads the record (the default).
    #[default]
    Raise,
    /// Skip the record. An input record's offset still commits with its batch; a config record
    /// is not applied.
    Skip,
    /// Use this value instead (value failures only: a key is state identity).
    Substitute(Record),
}

/// The decision hook, synchronous and deterministic (configs are re-read through it on every
/// boot, INV-43). Closures implement it.
///
/// ```
/// # use std::sync::Arc;
/// # let record = flechtwerk::wire::RawRecord {
/// #     topic: Arc::from("in"), partition: 0, offset: 9, timestamp_ms: None,
/// #     key: Some("k".into()), value: Some("{oops".into()), headers: vec![],
/// # };
/// use flechtwerk::wire::{decode_value, InvalidMessageAction, InvalidMessageError, InvalidMessagePolicy, Part};
/// /// Skips undecodable values of one topic, raises everywhere else.
/// struct SkipLegacy;
/// impl InvalidMessagePolicy for SkipLegacy {
///     fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction {
///         if error.topic() == "in" && error.part() == Part::Value {
///             InvalidMessageAction::Skip
///         } else {
///             InvalidMessageAction::Raise
///         }
///     }
/// }
/// let error = InvalidMessageError::new(Part::Value, &record, decode_value(Some(&b"{oops"[..])).unwrap_err());
/// assert_eq!(SkipLegacy.on_invalid_message(&error), InvalidMessageAction::Skip);
/// ```
pub trait InvalidMessagePolicy: Send + Sync {
    /// Decides what happens to an undecodable record.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # let record = flechtwerk::wire::RawRecord {
    /// #     topic: Arc::from("in"), partition: 0, offset: 9, timestamp_ms: None,
    /// #     key: Some("k".into()), value: Some("{oops".into()), headers: vec![],
    /// # };
    /// use flechtwerk::wire::{decode_value, InvalidMessageAction, InvalidMessageError, InvalidMessagePolicy, Part};
    /// // A closure is a policy.
    /// let skip_all = |_: &InvalidMessageError| InvalidMessageAction::Skip;
    /// let error = InvalidMessageError::new(Part::Value, &record, decode_value(Some(&b"{oops"[..])).unwrap_err());
    /// assert_eq!(skip_all.on_invalid_message(&error), InvalidMessageAction::Skip);
    /// ```
    fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction;
}

impl<F> InvalidMessagePolicy for F
where
    F: Fn(&InvalidMessageError) -> InvalidMessageAction + Send + Sync,
{
    fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction {
        self(error)
    }
}

/// The default policy: raise every error.
///
/// ```
/// # use std::sync::Arc;
/// # let record = flechtwerk::wire::RawRecord {
/// #     topic: Arc::from("in"), partition: 0, offset: 9, timestamp_ms: None,
/// #     key: Some("k".into()), value: Some("{oops".into()), headers: vec![],
/// # };
/// use flechtwerk::wire::{decode_value, InvalidMessageAction, InvalidMessageError, InvalidMessagePolicy, Part, RaisePolicy};
/// let error = InvalidMessageError::new(Part::Value, &record, decode_value(Some(&b"{oops"[..])).unwrap_err());
/// assert_eq!(RaisePolicy.on_invalid_message(&error), InvalidMessageAction::Raise);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct RaisePolicy;

impl InvalidMessagePolicy for RaisePolicy {
    fn on_invalid_message(&self, _error: &InvalidMessageError) -> InvalidMessageAction {
        InvalidMessageAction::Raise
    }
}

/// A record the policy refused, or a decision that cannot be carried out.
///
/// ```
/// # use std::sync::Arc;
/// # let record = flechtwerk::wire::RawRecord {
/// #     topic: Arc::from("in"), partition: 0, offset: 9, timestamp_ms: None,
/// #     key: Some("k".into()), value: Some("{oops".into()), headers: vec![],
/// # };
/// use flechtwerk::testing::decode_value_with;
/// use flechtwerk::testing::RecordingObserver;
/// use flechtwerk::wire::{PolicyError, RaisePolicy};
/// // The default policy raises: the error carries the record's position and bytes.
/// let error = decode_value_with(&record, &RaisePolicy, &RecordingObserver::default()).unwrap_err();
/// let PolicyError::Raised(raised) = error else { panic!("raised") };
/// assert_eq!(raised.offset(), 9);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The policy raised (the default for every undecodable record).
    #[error(transparent)]
    Raised(#[from] InvalidMessageError),
    /// The policy substituted a value for an undecodable key (INV-14, ERR-15).
    #[error(
        "on_invalid_message returned a substitute for an undecodable key at {topic}/{partition}/{offset}: \
         a key is state identity (it selects the state bucket, names the changelog record and decides \
         ownership), so it can only be raised or skipped",
        topic = .0.topic, partition = .0.partition, offset = .0.offset
    )]
    KeySubstitution(#[source] InvalidMessageError),
    /// The policy's substitute holds a value JSON cannot carry (NaN or an infinity).
    #[error(
        "on_invalid_message returned a substitute for the record at {topic}/{partition}/{offset} \
         that cannot be encoded"
    )]
    SubstituteNotEncodable {
        /// Topic of the record.
        topic: Arc<str>,
        /// Partition of the record.
        partition: i32,
        /// Offset of the record.
        offset: i64,
        /// Why the substitute does not encode.
        #[source]
        source: crate::json::EncodeError,
    },
}

impl PolicyError {
    /// The error for a substitute of `record` that does not encode.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # let record = flechtwerk::wire::RawRecord {
    /// #     topic: Arc::from("in"), partition: 0, offset: 9, timestamp_ms: None,
    /// #     key: Some("k".into()), value: Some("{oops".into()), headers: vec![],
    /// # };
    /// use flechtwerk::json::{to_canonical_bytes, Value};
    /// use flechtwerk::wire::PolicyError;
    /// let not_json = to_canonical_bytes(&Value::Float(f64::NAN)).unwrap_err();
    /// let error = PolicyError::substitute_not_encodable(&record, not_json);
    /// assert!(error.to_string().contains("in/0/9"));
    /// ```
    pub fn substitute_not_encodable(record: &RawRecord, source: crate::json::EncodeError) -> Self {
        PolicyError::SubstituteNotEncodable {
            topic: Arc::clone(&record.topic),
            partition: record.partition,
            offset: record.offset,
            source,
        }
    }
}
