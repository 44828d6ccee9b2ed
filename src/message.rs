//! Message envelopes: [`IncomingMessage`] (what a stage reads) and [`Message`] (what it emits).

use bytes::Bytes;
use chrono::{DateTime, Utc};

use crate::json::EncodeError;
use crate::record::Event;

/// An outgoing key or value: raw bytes, text, or an [`Event`] (ATTR-41).
///
/// Encoding (ATTR-43): bytes verbatim; text as raw UTF-8, never JSON-quoted (the mirror of key
/// decoding: quoting would change the partition and the state identity of every key); an event
/// as canonical JSON.
///
/// ```
/// use flechtwerk::{Event, Message, Payload};
/// let message = Message::new("out", "Müller", Event::new());
/// assert_eq!(message.key(), &Payload::Str("Müller".into())); // raw UTF-8 on the wire, never quoted
/// assert!(matches!(message.value(), Some(Payload::Event(_))));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// Pre-encoded bytes, written verbatim (foreign formats go here, ATTR-45).
    Bytes(Bytes),
    /// Text, written as raw UTF-8.
    Str(String),
    /// A record, written as canonical JSON.
    Event(Event),
}

impl Payload {
    /// The wire bytes.
    ///
    /// ```
    /// use flechtwerk::Payload;
    /// assert_eq!(&Payload::Str("k1".into()).encode().unwrap()[..], b"k1");
    /// assert_eq!(&Payload::Event(flechtwerk::Event::new()).encode().unwrap()[..], b"{}");
    /// ```
    pub fn encode(&self) -> Result<Bytes, EncodeError> {
        match self {
            Payload::Bytes(b) => Ok(b.clone()),
            Payload::Str(s) => Ok(Bytes::copy_from_slice(s.as_bytes())),
            Payload::Event(e) => Ok(Bytes::from(e.encode()?)),
        }
    }
}

/// Conversion into a [`Payload`]: implemented for bytes, text and [`Event`] only.
///
/// Python validated a payload when a `Message` was built; here the compiler does, and its
/// message teaches the same lessons (ERR-18..21).
///
/// ```
/// use flechtwerk::{Event, IntoPayload, Payload};
/// assert_eq!("k".into_payload(), Payload::Str("k".into()));
/// assert_eq!(vec![0u8, 1].into_payload(), Payload::Bytes(vec![0u8, 1].into()));
/// assert_eq!(Event::new().into_payload(), Payload::Event(Event::new()));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a Message key or value: a Payload is bytes | str | Event",
    label = "not bytes | str | Event",
    note = "a State is emitted, not persisted: set it through the output handle instead of sending it",
    note = "a Config travels as data: wrap it as `Event::from(config.into_record())`",
    note = "a raw JSON map must be wrapped: `Event::wrap(map)`"
)]
pub trait IntoPayload {
    /// Converts into a payload.
    ///
    /// ```
    /// use flechtwerk::{Event, IntoPayload, Payload};
    /// assert_eq!("ada".into_payload(), Payload::Str("ada".into()));
    /// assert_eq!(Event::new().into_payload(), Payload::Event(Event::new()));
    /// ```
    fn into_payload(self) -> Payload;
}

impl IntoPayload for Payload {
    fn into_payload(self) -> Payload {
        self
    }
}
impl IntoPayload for Bytes {
    fn into_payload(self) -> Payload {
        Payload::Bytes(self)
    }
}
impl IntoPayload for Vec<u8> {
    fn into_payload(self) -> Payload {
        Payload::Bytes(Bytes::from(self))
    }
}
impl IntoPayload for &[u8] {
    fn into_payload(self) -> Payload {
        Payload::Bytes(Bytes::copy_from_slice(self))
    }
}
impl<const N: usize> IntoPayload for &[u8; N] {
    fn into_payload(self) -> Payload {
        Payload::Bytes(Bytes::copy_from_slice(self))
    }
}
impl IntoPayload for String {
    fn into_payload(self) -> Payload {
        Payload::Str(self)
    }
}
impl IntoPayload for &str {
    fn into_payload(self) -> Payload {
        Payload::Str(self.to_owned())
    }
}
impl IntoPayload for &String {
    fn into_payload(self) -> Payload {
        Payload::Str(self.clone())
    }
}
impl IntoPayload for Event {
    fn into_payload(self) -> Payload {
        Payload::Event(self)
    }
}

/// What a [`Message`]'s value may be: any payload, or an optional one (`None` is a tombstone).
///
/// ```
/// use flechtwerk::{Event, IntoValue};
/// assert!(Event::new().into_value().is_some());
/// assert!(None::<Event>.into_value().is_none()); // a tombstone
/// assert!(Some("text").into_value().is_some());
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a Message value: a value is bytes | str | Event, or an Option of one",
    note = "a State is emitted, not persisted: set it through the output handle instead of sending it",
    note = "a Config travels as data: wrap it as `Event::from(config.into_record())`",
    note = "a raw JSON map must be wrapped: `Event::wrap(map)`"
)]
pub trait IntoValue {
    /// The payload, or `None` for a tombstone.
    ///
    /// ```
    /// use flechtwerk::{IntoValue, Payload};
    /// assert_eq!("{}".into_value(), Some(Payload::Str("{}".into())));
    /// assert_eq!(None::<&str>.into_value(), None); // a tombstone
    /// ```
    fn into_value(self) -> Option<Payload>;
}

impl<T: IntoPayload> IntoValue for T {
    fn into_value(self) -> Option<Payload> {
        Some(self.into_payload())
    }
}

impl<T: IntoPayload> IntoValue for Option<T> {
    fn into_value(self) -> Option<Payload> {
        self.map(IntoPayload::into_payload)
    }
}

/// A record to produce (ATTR-41): topic, key, value (`None` is a tombstone), optional
/// timestamp.
///
/// ```
/// use flechtwerk::{Event, Message};
/// let m = Message::new("out", "k1", Event::new());
/// assert_eq!(m.encode_value().unwrap().as_deref(), Some(&b"{}"[..]));
/// let t = Message::tombstone("configs", "k1");
/// assert_eq!(t.encode_value().unwrap(), None);
/// ```
///
/// A `State` is not a payload:
///
/// ```compile_fail
/// use flechtwerk::{Message, State};
/// let m = Message::new("out", "k1", State::new());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    topic: String,
    key: Payload,
    value: Option<Payload>,
    timestamp: Option<DateTime<Utc>>,
}

impl Message {
    /// A message with a value — or, for an `Option` that is `None`, a tombstone, as Python's
    /// `Message(value=None)`. Forwarding an input's value keeps a deletion a deletion:
    ///
    /// ```
    /// use flechtwerk::{Event, Message};
    /// # let msg = flechtwerk::IncomingMessage { key: "k".into(), value: None, topic: "in".into(),
    /// #     partition: 0, offset: 0, timestamp: None };
    /// let forwarded = Message::new("out", msg.key.as_str(), msg.value); // an input tombstone
    /// assert_eq!(forwarded.encode_value().unwrap(), None);
    /// let plain = Message::new("out", "k", Event::new());
    /// assert_eq!(plain.encode_value().unwrap().as_deref(), Some(&b"{}"[..]));
    /// ```
    pub fn new(topic: impl Into<String>, key: impl IntoPayload, value: impl IntoValue) -> Self {
        Message { topic: topic.into(), key: key.into_payload(), value: value.into_value(), timestamp: None }
    }

    /// A tombstone: a record with a null value. On a config topic it deletes the key, and only
    /// a real null lets log compaction remove the key from the topic.
    ///
    /// ```
    /// use flechtwerk::Message;
    /// let delete = Message::tombstone("user-settings", "ada");
    /// assert_eq!(delete.value(), None);
    /// assert_eq!(delete.encode_value().unwrap(), None);
    /// ```
    pub fn tombstone(topic: impl Into<String>, key: impl IntoPayload) -> Self {
        Message { topic: topic.into(), key: key.into_payload(), value: None, timestamp: None }
    }

    /// Sets the record timestamp (absent: the producer or broker assigns one).
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use flechtwerk::{Event, Message};
    /// let at = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
    /// let message = Message::new("out", "k", Event::new()).with_timestamp(at);
    /// assert_eq!(message.timestamp(), Some(at));
    /// ```
    pub fn with_timestamp(mut self, timestamp: DateTime<Utc>) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// The destination topic.
    ///
    /// ```
    /// assert_eq!(flechtwerk::Message::tombstone("configs", "k").topic(), "configs");
    /// ```
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The key payload.
    ///
    /// ```
    /// use flechtwerk::{Message, Payload};
    /// assert_eq!(Message::tombstone("t", "k1").key(), &Payload::Str("k1".into()));
    /// ```
    pub fn key(&self) -> &Payload {
        &self.key
    }

    /// The value payload; `None` for a tombstone.
    ///
    /// ```
    /// use flechtwerk::{Message, Payload};
    /// assert_eq!(Message::new("t", "k", "v").value(), Some(&Payload::Str("v".into())));
    /// assert_eq!(Message::tombstone("t", "k").value(), None);
    /// ```
    pub fn value(&self) -> Option<&Payload> {
        self.value.as_ref()
    }

    /// The timestamp, if set.
    ///
    /// ```
    /// assert_eq!(flechtwerk::Message::new("t", "k", "v").timestamp(), None); // the producer assigns one
    /// ```
    pub fn timestamp(&self) -> Option<DateTime<Utc>> {
        self.timestamp
    }

    /// The timestamp as epoch milliseconds, as it goes on the wire (TRX-13).
    ///
    /// ```
    /// use chrono::DateTime;
    /// let at = DateTime::from_timestamp_millis(1_704_067_200_000).unwrap();
    /// let message = flechtwerk::Message::new("t", "k", "v").with_timestamp(at);
    /// assert_eq!(message.timestamp_ms(), Some(1_704_067_200_000));
    /// ```
    pub fn timestamp_ms(&self) -> Option<i64> {
        self.timestamp.map(|t| t.timestamp_millis())
    }

    /// The key's wire bytes.
    ///
    /// ```
    /// use flechtwerk::{Event, Message};
    /// assert_eq!(&Message::new("t", "Müller", "v").encode_key().unwrap()[..], "Müller".as_bytes());
    /// assert_eq!(&Message::new("t", Event::new(), "v").encode_key().unwrap()[..], b"{}"); // a JSON key
    /// ```
    pub fn encode_key(&self) -> Result<Bytes, EncodeError> {
        self.key.encode()
    }

    /// The value's wire bytes; `None` for a tombstone.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, FLOAT};
    /// use flechtwerk::{Event, Message};
    /// const X: Attribute<f64> = Attribute::new("x", &FLOAT);
    /// let message = Message::new("t", "k", Event::new().with(&X, 0.5).unwrap());
    /// assert_eq!(message.encode_value().unwrap().as_deref(), Some(&br#"{"x":0.5}"#[..]));
    /// ```
    pub fn encode_value(&self) -> Result<Option<Bytes>, EncodeError> {
        self.value.as_ref().map(Payload::encode).transpose()
    }
}

/// A decoded input record (ATTR-40): the key as strict UTF-8 text, the value as an [`Event`]
/// private to the receiver, or `None` for a tombstone.
///
/// As in the Python implementation (0.17: `IncomingMessage.value: Event | None`), a Kafka
/// tombstone (a null value) is not an empty event: it reaches `transform` as `None`, so a stage
/// reading a compacted table sees deletions, and a stage forwarding it writes a tombstone again
/// ([`Message::tombstone`]). An empty value (`b""`) is an ordinary value and reads as an empty
/// event, like `{}`. A tombstone is never decoded, so it never reaches `on_invalid_message`.
///
/// ```
/// use flechtwerk::attribute::{Attribute, INT};
/// use flechtwerk::stage::transformer;
/// use flechtwerk::{IncomingMessage, Message};
///
/// const AMOUNT: Attribute<i64> = Attribute::new("amount", &INT);
///
/// let doubled = transformer(["amounts"]).transform(|msg: IncomingMessage, _state, out| {
///     match msg.value {
///         None => out.send(Message::tombstone("doubled", msg.key.as_str())), // a deletion stays one
///         Some(value) => {
///             let doubled = value.require(&AMOUNT)? * 2;
///             out.send(Message::new("doubled", msg.key.as_str(), value.with(&AMOUNT, doubled)?));
///         }
///     }
///     Ok(())
/// });
/// # let _ = doubled;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncomingMessage {
    /// The wire key ("" when absent).
    pub key: String,
    /// The decoded value; `None` for a tombstone (a null wire value), an empty event for an
    /// empty one.
    pub value: Option<Event>,
    /// Source topic.
    pub topic: String,
    /// Source partition.
    pub partition: i32,
    /// Source offset.
    pub offset: i64,
    /// Record timestamp, from epoch milliseconds.
    pub timestamp: Option<DateTime<Utc>>,
}

/// Converts epoch milliseconds to a UTC timestamp (`None` when out of range).
pub(crate) fn timestamp_from_ms(ms: Option<i64>) -> Option<DateTime<Utc>> {
    ms.and_then(DateTime::from_timestamp_millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    #[test]
    fn attr_43_payload_encodings() {
        let m = Message::new("t", "Müller", &b"\x00raw"[..]);
        assert_eq!(&m.encode_key().unwrap()[..], "Müller".as_bytes());
        assert_eq!(m.encode_value().unwrap().unwrap(), &b"\x00raw"[..]);
        let crate::json::Value::Object(map) = parse(r#"{"b":2,"a":1}"#).unwrap() else { unreachable!() };
        let m = Message::new("t", Event::wrap(map.clone()), Event::wrap(map));
        assert_eq!(&m.encode_key().unwrap()[..], br#"{"a":1,"b":2}"#);
        let mut nan = Event::new();
        nan.raw_mut().insert("x".into(), crate::json::Value::Float(f64::NAN));
        assert!(Message::new("t", "k", nan).encode_value().is_err());
    }

    #[test]
    fn attr_40_timestamp_from_millis() {
        let ts = timestamp_from_ms(Some(1_704_067_200_000)).unwrap();
        assert_eq!(ts.to_rfc3339(), "2024-01-01T00:00:00+00:00");
        let m = Message::new("t", "k", "v").with_timestamp(ts);
        assert_eq!(m.timestamp_ms(), Some(1_704_067_200_000));
    }
}
