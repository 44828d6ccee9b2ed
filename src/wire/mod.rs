//! Strict decoding of Kafka records and the invalid-message policy (INV-01..43).
//!
//! Every record a stage reads crosses the JSON boundary: the key is UTF-8 text, the value a JSON
//! object. Decoding is strict (no replacement characters, no lenient fallbacks), and the decision
//! about an undecodable record belongs to exactly one hook, `on_invalid_message`: raise (the
//! default), skip, or substitute a value. Every decision is counted through the
//! [`Observer`](crate::observer::Observer); the framework logs nothing for it.

//!
//! This module is the wire model only (records as bytes, the decode rules, the policy's types):
//! it depends on nothing but JSON and records. Carrying a policy decision out, and counting it,
//! is the mediation layer's job, one layer up.

mod decode;
mod policy;

use std::sync::Arc;

use bytes::Bytes;

pub(crate) use decode::decode_key_str;
pub use decode::{decode_key, decode_value, DecodeError};
pub use policy::{InvalidMessageAction, InvalidMessageError, InvalidMessagePolicy, Part, PolicyError, RaisePolicy};

/// One record header.
///
/// ```
/// use flechtwerk::wire::Header;
///
/// let header = Header { key: "trace-id".into(), value: Some("abc".into()) };
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Header name.
    pub key: String,
    /// Header value (`None` is a null header).
    pub value: Option<Bytes>,
}

/// A record as read from Kafka, before any decoding.
///
/// Tests read them with `testing::read_topic` (feature `testing`) and decode them
/// with [`decode_key`] and [`decode_value`]:
///
/// ```
/// use flechtwerk::wire::{self, RawRecord};
/// use flechtwerk::Event;
///
/// let record = RawRecord {
///     topic: "counts".into(),
///     partition: 0,
///     offset: 7,
///     timestamp_ms: None,
///     key: Some("ada".into()),
///     value: Some(r#"{"count":2}"#.into()),
///     headers: Vec::new(),
/// };
/// assert_eq!(wire::decode_key(record.key.as_deref())?, "ada");
/// let value = Event::wrap(wire::decode_value(record.value.as_deref())?);
/// # Ok::<(), wire::DecodeError>(())
/// ```
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
    ///
    /// ```
    /// # use flechtwerk::wire::RawRecord;
    /// let record = RawRecord {
    ///     topic: "t".into(), partition: 0, offset: 0, timestamp_ms: None,
    ///     key: Some("ab".into()), value: Some("{}".into()), headers: Vec::new(),
    /// };
    /// assert_eq!(record.size_bytes(), 4);
    /// ```
    pub fn size_bytes(&self) -> usize {
        self.key.as_ref().map_or(0, Bytes::len) + self.value.as_ref().map_or(0, Bytes::len)
    }

    /// This record by reference (without its headers): what a reader that looks at each record
    /// once is handed by [`Consumer::poll_borrowed`](crate::kafka::Consumer::poll_borrowed).
    ///
    /// ```
    /// # use flechtwerk::wire::RawRecord;
    /// let record = RawRecord {
    ///     topic: "t".into(), partition: 3, offset: 7, timestamp_ms: None,
    ///     key: Some("ab".into()), value: None, headers: Vec::new(),
    /// };
    /// let borrowed = record.borrowed();
    /// assert_eq!((borrowed.offset, borrowed.key, borrowed.value), (7, Some(&b"ab"[..]), None));
    /// assert_eq!(borrowed.to_raw(), record);
    /// ```
    pub fn borrowed(&self) -> RecordRef<'_> {
        RecordRef {
            topic: &self.topic,
            partition: self.partition,
            offset: self.offset,
            timestamp_ms: self.timestamp_ms,
            key: self.key.as_deref(),
            value: self.value.as_deref(),
        }
    }
}

/// A consumed record by reference: key and value borrowed from wherever the client holds them
/// (librdkafka's own message buffers, for the rdkafka adapter), valid while the reader's
/// callback runs. Headers are left out: the readers that take records this way (the config
/// bootstrap) never look at them.
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::wire::RecordRef;
/// let topic: Arc<str> = Arc::from("configs");
/// let record = RecordRef {
///     topic: &topic, partition: 0, offset: 5, timestamp_ms: None, key: Some(&b"ada"[..]), value: Some(&b"{}"[..]),
/// };
/// let owned = record.to_raw(); // copies key and value
/// assert_eq!((owned.offset, owned.key.as_deref()), (5, Some(&b"ada"[..])));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Topic.
    pub topic: &'a Arc<str>,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Timestamp in epoch milliseconds, if the record has one.
    pub timestamp_ms: Option<i64>,
    /// Key bytes (`None`: no key).
    pub key: Option<&'a [u8]>,
    /// Value bytes (`None`: a Kafka tombstone).
    pub value: Option<&'a [u8]>,
}

impl RecordRef<'_> {
    /// An owned copy of the record (with no headers).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flechtwerk::wire::RecordRef;
    ///
    /// let topic: Arc<str> = Arc::from("configs");
    /// let value = br#"{"unit":"C"}"#.to_vec();
    /// let record = RecordRef { topic: &topic, partition: 2, offset: 9, timestamp_ms: Some(1), key: None, value: Some(&value) };
    /// let owned = record.to_raw();
    /// drop(value); // the copy does not borrow the buffer
    /// assert_eq!(owned.value.as_deref(), Some(&br#"{"unit":"C"}"#[..]));
    /// assert!(owned.key.is_none() && owned.headers.is_empty() && owned.partition == 2);
    /// ```
    pub fn to_raw(&self) -> RawRecord {
        RawRecord {
            topic: Arc::clone(self.topic),
            partition: self.partition,
            offset: self.offset,
            timestamp_ms: self.timestamp_ms,
            key: self.key.map(Bytes::copy_from_slice),
            value: self.value.map(Bytes::copy_from_slice),
            headers: Vec::new(),
        }
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
