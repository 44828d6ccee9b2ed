//! Strict decoding of Kafka records and the invalid-message policy (INV-01..43).
//!
//! Every record a stage reads crosses the JSON boundary: the key is UTF-8 text, the value a JSON
//! object. Decoding is strict (no replacement characters, no lenient fallbacks), and the decision
//! about an undecodable record belongs to exactly one hook, `on_invalid_message`: raise (the
//! default), skip, or substitute a value. Every decision is counted through the
//! [`Observer`](crate::observer::Observer); the framework logs nothing for it.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::json::{self, JsonError, Map, Value};
use crate::message::{timestamp_from_ms, IncomingMessage};
use crate::observer::{InvalidOutcome, Observer};
use crate::record::{Event, Record};

/// One record header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Header name.
    pub key: String,
    /// Header value (`None` is a null header).
    pub value: Option<Bytes>,
}

/// A record as read from Kafka, before any decoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawRecord {
    /// Topic.
    pub topic: Arc<str>,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Timestamp in epoch milliseconds, if the record has one.
    pub timestamp_ms: Option<i64>,
    /// Key bytes (`None`: no key).
    pub key: Option<Bytes>,
    /// Value bytes (`None`: a Kafka tombstone).
    pub value: Option<Bytes>,
    /// Headers, in order.
    pub headers: Vec<Header>,
}

impl RawRecord {
    /// Key plus value size in bytes, as the `message_in_bytes` metric counts it.
    pub fn size_bytes(&self) -> usize {
        self.key.as_ref().map_or(0, Bytes::len) + self.value.as_ref().map_or(0, Bytes::len)
    }
}

/// The framework's tombstone test, on raw value bytes before any decoding (INV-17): absent,
/// empty, or exactly the two bytes `{}`.
///
/// ```
/// use flechtwerk::wire::is_tombstone;
/// assert!(is_tombstone(None) && is_tombstone(Some(b"")) && is_tombstone(Some(b"{}")));
/// assert!(!is_tombstone(Some(b"{ }")) && !is_tombstone(Some(b"null")));
/// ```
pub fn is_tombstone(value: Option<&[u8]>) -> bool {
    matches!(value, None | Some(b"") | Some(b"{}"))
}

/// Why a key or value does not decode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not UTF-8 (strict: surrogates, overlong forms and stray bytes are all rejected).
    #[error("not UTF-8: {0}")]
    Utf8(#[from] std::str::Utf8Error),
    /// UTF-8, but not JSON.
    #[error("not JSON: {0}")]
    Json(#[from] JsonError),
    /// JSON, but not an object (ERR-28).
    #[error("expected an object, got {found}")]
    NotAnObject {
        /// The JSON type found.
        found: &'static str,
    },
}

/// Decodes a key: strict UTF-8; an absent key is `""` (INV-01).
pub fn decode_key(key: Option<&[u8]>) -> Result<String, DecodeError> {
    match key {
        None => Ok(String::new()),
        Some(bytes) => Ok(std::str::from_utf8(bytes)?.to_owned()),
    }
}

/// Decodes a value: strict UTF-8, then JSON, then an object. An empty or absent value is the
/// empty object, never an error (INV-02).
pub fn decode_value(value: Option<&[u8]>) -> Result<Map, DecodeError> {
    let bytes = match value {
        None | Some(b"") => return Ok(Map::new()),
        Some(bytes) => bytes,
    };
    match json::parse(std::str::from_utf8(bytes)?)? {
        Value::Object(map) => Ok(map),
        other => Err(DecodeError::NotAnObject { found: other.type_name() }),
    }
}

/// Which side of a record failed to decode.
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
    pub fn part(&self) -> Part {
        self.part
    }
    /// Topic of the record.
    pub fn topic(&self) -> &str {
        &self.topic
    }
    /// Partition of the record.
    pub fn partition(&self) -> i32 {
        self.partition
    }
    /// Offset of the record.
    pub fn offset(&self) -> i64 {
        self.offset
    }
    /// The raw key bytes.
    pub fn key(&self) -> Option<&Bytes> {
        self.key.as_ref()
    }
    /// The raw value bytes.
    pub fn value(&self) -> Option<&Bytes> {
        self.value.as_ref()
    }
    /// The decode error.
    pub fn decode_error(&self) -> &DecodeError {
        &self.source
    }
}

/// What `on_invalid_message` decides for one undecodable record (INV-11..13).
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
pub trait InvalidMessagePolicy: Send + Sync {
    /// Decides what happens to an undecodable record.
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
#[derive(Clone, Copy, Debug, Default)]
pub struct RaisePolicy;

impl InvalidMessagePolicy for RaisePolicy {
    fn on_invalid_message(&self, _error: &InvalidMessageError) -> InvalidMessageAction {
        InvalidMessageAction::Raise
    }
}

/// A record the policy refused, or a decision that cannot be carried out.
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
    pub fn substitute_not_encodable(record: &RawRecord, source: crate::json::EncodeError) -> Self {
        PolicyError::SubstituteNotEncodable {
            topic: Arc::clone(&record.topic),
            partition: record.partition,
            offset: record.offset,
            source,
        }
    }
}

/// Asks the policy about `error`, counts the outcome, and carries it out: `Ok(None)` skip,
/// `Ok(Some(record))` substitute, `Err` raise.
pub fn mediate(
    policy: &dyn InvalidMessagePolicy,
    observer: &dyn Observer,
    error: InvalidMessageError,
) -> Result<Option<Record>, PolicyError> {
    let action = policy.on_invalid_message(&error);
    let topic = Arc::clone(&error.topic);
    let (outcome, result) = match action {
        InvalidMessageAction::Raise => (InvalidOutcome::Raised, Err(PolicyError::Raised(error))),
        InvalidMessageAction::Skip => (InvalidOutcome::Skipped, Ok(None)),
        InvalidMessageAction::Substitute(_) if error.part == Part::Key => {
            (InvalidOutcome::Raised, Err(PolicyError::KeySubstitution(error)))
        }
        InvalidMessageAction::Substitute(record) => (InvalidOutcome::Substituted, Ok(Some(record))),
    };
    observer.message_invalid(&topic, outcome);
    result
}

/// Decodes a record's key through the policy: `Ok(None)` when the policy skipped it.
pub fn decode_key_with(
    record: &RawRecord,
    policy: &dyn InvalidMessagePolicy,
    observer: &dyn Observer,
) -> Result<Option<String>, PolicyError> {
    match decode_key(record.key.as_deref()) {
        Ok(key) => Ok(Some(key)),
        Err(source) => mediate(policy, observer, InvalidMessageError::new(Part::Key, record, source)).map(|skipped| {
            debug_assert!(skipped.is_none(), "a key is never substituted");
            None
        }),
    }
}

/// Decodes a record's value through the policy: `Ok(None)` when the policy skipped it, the
/// substitute's content when it substituted.
pub fn decode_value_with(
    record: &RawRecord,
    policy: &dyn InvalidMessagePolicy,
    observer: &dyn Observer,
) -> Result<Option<Map>, PolicyError> {
    match decode_value(record.value.as_deref()) {
        Ok(map) => Ok(Some(map)),
        Err(source) => {
            Ok(mediate(policy, observer, InvalidMessageError::new(Part::Value, record, source))?.map(Record::into_raw))
        }
    }
}

/// Decodes an input record (key first: a key failure short-circuits, INV-16). `Ok(None)`: the
/// policy skipped it. Input records are not tombstone-filtered (TRX-07).
pub fn decode_input(
    record: &RawRecord,
    policy: &dyn InvalidMessagePolicy,
    observer: &dyn Observer,
) -> Result<Option<IncomingMessage>, PolicyError> {
    let Some(key) = decode_key_with(record, policy, observer)? else {
        return Ok(None);
    };
    let Some(value) = decode_value_with(record, policy, observer)? else {
        return Ok(None);
    };
    Ok(Some(IncomingMessage {
        key,
        value: Event::wrap(value),
        topic: record.topic.to_string(),
        partition: record.partition,
        offset: record.offset,
        timestamp: timestamp_from_ms(record.timestamp_ms),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observer::NoopObserver;

    /// INV-30/INV-31: the error carries the bytes but its message (and its source chain) never
    /// prints them; it names the part and `topic/partition/offset`.
    #[test]
    fn inv_31_error_text_names_the_record_not_its_bytes() {
        let key = b"distinctive-key-\xe2\x98\x83".to_vec();
        let mut value = b"{\"secret\":\"hunter2".to_vec();
        value.extend(std::iter::repeat_n(b'x', 4096));
        let record = RawRecord {
            topic: Arc::from("my-topic"),
            partition: 3,
            offset: 4711,
            timestamp_ms: None,
            key: Some(Bytes::from(key.clone())),
            value: Some(Bytes::from(value.clone())),
            headers: Vec::new(),
        };
        let Err(PolicyError::Raised(error)) = decode_input(&record, &RaisePolicy, &NoopObserver) else {
            panic!("a truncated value raises")
        };
        assert_eq!(
            (error.part(), error.topic(), error.partition(), error.offset()),
            (Part::Value, "my-topic", 3, 4711)
        );
        assert_eq!(error.key().map(|b| b.to_vec()), Some(key));
        assert_eq!(error.value().map(|b| b.to_vec()), Some(value));
        let mut text = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        assert!(
            text.contains("value") && text.contains("my-topic/3/4711") && text.contains("on_invalid_message"),
            "{text}"
        );
        for leak in ["distinctive", "secret", "hunter2", "xxxx"] {
            assert!(!text.contains(leak), "{leak:?} leaked into {text:?}");
        }
    }
}
