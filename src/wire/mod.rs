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

pub use decode::{decode_key, decode_value, DecodeError};
pub use policy::{InvalidMessageAction, InvalidMessageError, InvalidMessagePolicy, Part, PolicyError, RaisePolicy};

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
