//! Mediation: strict decoding through the one invalid-message hook, every decision counted
//! (INV-10..21).
//!
//! The rules live in [`wire`](crate::wire) (what decodes, what the hook may decide); this is
//! where a decision is carried out and reported to the [`Observer`]. The transformer's input
//! records and every config record (bootstrap and drain) pass through here.

use std::sync::Arc;

use crate::json::Map;
use crate::message::{timestamp_from_ms, IncomingMessage};
use crate::observer::{InvalidOutcome, Observer};
use crate::record::{Event, Record};
use crate::wire::{
    decode_key, decode_value, InvalidMessageAction, InvalidMessageError, InvalidMessagePolicy, Part, PolicyError,
    RawRecord,
};

/// Asks the policy about `error`, counts the outcome, and carries it out: `Ok(None)` skip,
/// `Ok(Some(record))` substitute, `Err` raise.
pub fn mediate(
    policy: &dyn InvalidMessagePolicy,
    observer: &dyn Observer,
    error: InvalidMessageError,
) -> Result<Option<Record>, PolicyError> {
    let action = policy.on_invalid_message(&error);
    let topic = Arc::clone(error.topic_arc());
    let (outcome, result) = match action {
        InvalidMessageAction::Raise => (InvalidOutcome::Raised, Err(PolicyError::Raised(error))),
        InvalidMessageAction::Skip => (InvalidOutcome::Skipped, Ok(None)),
        InvalidMessageAction::Substitute(_) if error.part() == Part::Key => {
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
/// policy skipped it. Input records are not tombstone-filtered (TRX-07): a tombstone (a null
/// value) reaches the transform with `value: None`, undecoded and never through the policy
/// (INV-17), as Python's `parse_message` hands it over; an empty value is an empty event.
pub fn decode_input(
    record: &RawRecord,
    policy: &dyn InvalidMessagePolicy,
    observer: &dyn Observer,
) -> Result<Option<IncomingMessage>, PolicyError> {
    let Some(key) = decode_key_with(record, policy, observer)? else {
        return Ok(None);
    };
    let value = match record.value {
        None => None,
        Some(_) => match decode_value_with(record, policy, observer)? {
            Some(value) => Some(Event::wrap(value)),
            None => return Ok(None),
        },
    };
    Ok(Some(IncomingMessage {
        key,
        value,
        topic: record.topic.to_string(),
        partition: record.partition,
        offset: record.offset,
        timestamp: timestamp_from_ms(record.timestamp_ms),
    }))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::observer::NoopObserver;
    use crate::wire::RaisePolicy;

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
