//! The records the runners write, made in one place: a stage's output message, a changelog
//! record, their size as the metrics count it, and a stage's panic as an error.

use bytes::Bytes;

use crate::error::{BoxError, Error};
use crate::kafka::ProducerRecord;
use crate::message::Message;

/// A stage's output message as the record to produce: its key and value encoded (a message
/// that cannot be encoded is an [`Error::Encode`] naming its topic), no partition (the producer
/// hashes the key, as Python's does), its own timestamp if it has one.
pub(crate) fn output_record(message: &Message) -> Result<ProducerRecord, Error> {
    let encode_error = |source| Error::Encode { what: format!("a message to topic {:?}", message.topic()), source };
    Ok(ProducerRecord {
        topic: message.topic().to_owned(),
        partition: None,
        key: Some(message.encode_key().map_err(encode_error)?),
        value: message.encode_value().map_err(encode_error)?,
        headers: Vec::new(),
        timestamp_ms: message.timestamp_ms(),
    })
}

/// A changelog record: the state key, the encoded state (`None`: a tombstone, the key's state
/// deleted), on `partition` (a transformer's task partition) or placed by hashing the key (an
/// extractor's, `None`).
pub(crate) fn changelog_record(topic: &str, partition: Option<i32>, key: &str, value: Option<Bytes>) -> ProducerRecord {
    ProducerRecord {
        topic: topic.to_owned(),
        partition,
        key: Some(Bytes::copy_from_slice(key.as_bytes())),
        value,
        headers: Vec::new(),
        timestamp_ms: None,
    }
}

/// A record's key and value bytes, as `messages_out_bytes` counts them.
pub(crate) fn record_bytes(record: &ProducerRecord) -> usize {
    record.key.as_ref().map_or(0, Bytes::len) + record.value.as_ref().map_or(0, Bytes::len)
}

/// A stage's panic as an error (`"{what} panicked: {message}"`), with its message when it has one.
pub(crate) fn panic_error(what: &str, panic: Box<dyn std::any::Any + Send>) -> BoxError {
    let message = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic without a message".to_owned());
    format!("{what} panicked: {message}").into()
}
