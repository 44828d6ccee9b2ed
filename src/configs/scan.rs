//! The scan of config topics for secret values (feature `secrets`; SEC-40): which records hold
//! ciphertext under which kid, which still hold plaintext, which hold a corrupt token.
//!
//! It is the gate before a destructive step (removing an old key, ending plaintext tolerance),
//! so its report is complete or it fails: a missing topic is an error, never an all-clear; a
//! corrupt token or an undecodable record is an entry, never the end of the scan. It has no
//! stage, so no `on_invalid_message` is asked. Nothing is decrypted: the kid is read from the
//! token's header, and no key is needed.

use std::collections::BTreeSet;

use crate::json::Value;
use crate::kafka::read::{read_to_end, ReadError};
use crate::kafka::{Consumer, KafkaError, TopicPartition};
use crate::secrets::{is_encrypted, kid_of};
use crate::wire::{self, RawRecord};

/// One secret value found by [`scan_config_topics`] (Python's `ScanEntry`).
///
/// - ciphertext: `kid` set, `error` none;
/// - plaintext (an unencrypted secret still on the topic): `kid` and `error` none;
/// - a `flenc:` value whose header does not read: `error` set;
/// - a record whose key or value does not decode at all: `attribute` empty, `error` set (and
///   `wire_key` the key's bytes as Python's `repr` writes them, `b'\xff'`, when the key is what
///   failed; N-11).
///
/// An absent or null attribute gives no entry.
///
/// ```
/// use flechtwerk::ScanEntry;
/// let entry = ScanEntry {
///     attribute: "api_key".into(), error: None, kid: None, partition: 0, topic: "vendors".into(), wire_key: "acme".into(),
/// };
/// assert!(entry.is_plaintext());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScanEntry {
    /// The attribute's wire name; empty for a record-level finding.
    pub attribute: String,
    /// Why the value (or the record) could not be classified.
    pub error: Option<String>,
    /// The kid a ciphertext value depends on.
    pub kid: Option<String>,
    /// The record's partition.
    pub partition: i32,
    /// The record's topic.
    pub topic: String,
    /// The record's key (Python's `repr` of its bytes when they are not UTF-8).
    pub wire_key: String,
}

impl ScanEntry {
    /// A value present and unencrypted: what a migration must drive to zero.
    ///
    /// ```
    /// use flechtwerk::ScanEntry;
    /// let entry = ScanEntry {
    ///     attribute: "api_key".into(), error: None, kid: Some("k1".into()), partition: 0, topic: "t".into(), wire_key: "a".into(),
    /// };
    /// assert!(!entry.is_plaintext());
    /// ```
    pub fn is_plaintext(&self) -> bool {
        !self.attribute.is_empty() && self.kid.is_none() && self.error.is_none()
    }
}

/// Why a scan could not give a complete report.
///
/// ```
/// use flechtwerk::ScanError;
/// let error = ScanError::MissingTopics { topics: vec!["vendors".into()] };
/// assert_eq!(error.to_string(), "cannot scan — config topic(s) not found: ['vendors']");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    /// Topics that do not exist (Python raises `SecretError`): never read as "nothing found".
    #[error("cannot scan — config topic(s) not found: [{}]", .topics.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", "))]
    MissingTopics {
        /// The missing topics, sorted.
        topics: Vec<String>,
    },
    /// The consumer failed.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
}

/// Reads each of `topics` to its end on `consumer` (group-less: make it with
/// `ConsumerConfig::groupless`, as the config bootstrap reads) and reports every value of the
/// named `attributes` (their wire names: `API_KEY.name()`), in topic, partition and offset
/// order. Tombstones are skipped. Python's `scan_config_topics`.
///
/// ```
/// use flechtwerk::attribute::{encrypted, Attribute, STR};
/// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord};
/// use flechtwerk::secrets::{with_keyring, Keyring};
/// use flechtwerk::{scan_config_topics, Config};
/// use flechtwerk_sim::cluster::LocalCluster;
///
/// const API_KEY: Attribute<String> = Attribute::new("api_key", &encrypted(STR));
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let kafka = LocalCluster::new();
/// kafka.admin()?.create_topic(&NewTopic::new("vendors", 1)).await?;
/// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
/// let sealed = with_keyring(&keyring, || Config::new().with(&API_KEY, "hunter2".to_owned()))?;
/// let producer = kafka.producer(ProducerConfig::idempotent("writer"))?;
/// producer.send(ProducerRecord::new("vendors", "acme", sealed.encode()?)).await?.await?;
/// producer.send(ProducerRecord::new("vendors", "legacy", r#"{"api_key":"in clear"}"#)).await?.await?;
///
/// let mut consumer = kafka.consumer(ConsumerConfig::groupless("scanner"))?;
/// let found = scan_config_topics(consumer.as_mut(), &["vendors"], &[API_KEY.name()]).await?;
/// assert_eq!(found[0].kid.as_deref(), Some("k1")); // no key needed to read the kid
/// assert!(found[1].is_plaintext() && found[1].wire_key == "legacy");
/// # Ok(())
/// # }
/// ```
pub async fn scan_config_topics(
    consumer: &mut dyn Consumer,
    topics: &[&str],
    attributes: &[&str],
) -> Result<Vec<ScanEntry>, ScanError> {
    let mut partitions = Vec::new();
    let mut missing = BTreeSet::new();
    for topic in topics {
        match consumer.partition_count(topic).await? {
            Some(count) => partitions.extend((0..count as i32).map(|p| TopicPartition::new(*topic, p))),
            None => {
                missing.insert((*topic).to_owned());
            }
        }
    }
    if !missing.is_empty() {
        return Err(ScanError::MissingTopics { topics: missing.into_iter().collect() });
    }
    let mut found: Vec<(String, i32, i64, usize, ScanEntry)> = Vec::new();
    let read = read_to_end(consumer, &partitions, |record| {
        for (i, entry) in scan_record(&record, attributes).into_iter().enumerate() {
            found.push((record.topic.to_string(), record.partition, record.offset, i, entry));
        }
        Ok::<(), std::convert::Infallible>(())
    })
    .await;
    match read {
        Ok(_) => {}
        Err(ReadError::Kafka(error)) => return Err(error.into()),
        Err(ReadError::Callback(never)) => match never {},
    }
    // Topics in the order asked, then partition and offset order.
    let order = |topic: &str| topics.iter().position(|t| *t == topic).unwrap_or(usize::MAX);
    found.sort_by_key(|(topic, partition, offset, i, _)| (order(topic), *partition, *offset, *i));
    Ok(found.into_iter().map(|(.., entry)| entry).collect())
}

/// The entries of one record.
fn scan_record(record: &RawRecord, attributes: &[&str]) -> Vec<ScanEntry> {
    if wire::is_tombstone(record.value.as_deref()) {
        return Vec::new();
    }
    let entry = |attribute: &str, wire_key: String, error: Option<String>, kid: Option<String>| ScanEntry {
        attribute: attribute.to_owned(),
        error,
        kid,
        partition: record.partition,
        topic: record.topic.to_string(),
        wire_key,
    };
    let wire_key = match wire::decode_key(record.key.as_deref()) {
        Ok(key) => key,
        Err(error) => {
            let shown = python_bytes_repr(record.key.as_deref().unwrap_or_default());
            tracing::warn!(topic = %record.topic, offset = record.offset, key = %shown, %error, "undecodable config record");
            return vec![entry("", shown, Some(error.to_string()), None)];
        }
    };
    let value = match wire::decode_value(record.value.as_deref()) {
        Ok(value) => value,
        Err(error) => {
            tracing::warn!(topic = %record.topic, offset = record.offset, key = %wire_key, %error, "undecodable config record");
            return vec![entry("", wire_key, Some(error.to_string()), None)];
        }
    };
    let mut entries = Vec::new();
    for name in attributes {
        let (kid, error) = match value.get(*name) {
            None | Some(Value::Null) => continue,
            Some(Value::Str(token)) if is_encrypted(token) => match kid_of(token) {
                Ok(kid) => (Some(kid), None),
                Err(error) => {
                    tracing::warn!(topic = %record.topic, offset = record.offset, key = %wire_key, %error, "unreadable flenc token");
                    (None, Some(error.to_string()))
                }
            },
            Some(_) => (None, None),
        };
        entries.push(entry(name, wire_key.clone(), error, kid));
    }
    entries
}

/// Python's `repr` of a `bytes` value: `b'...'` (double quotes when the bytes hold a single
/// quote and no double one), printable ASCII as is, `\t`, `\n`, `\r`, `\\`, the quote escaped,
/// every other byte as `\xNN`.
fn python_bytes_repr(bytes: &[u8]) -> String {
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') { '"' } else { '\'' };
    let mut out = String::from("b");
    out.push(quote);
    for &b in bytes {
        match b {
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\\' => out.push_str("\\\\"),
            _ if b as char == quote => {
                out.push('\\');
                out.push(quote);
            }
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_11_undecodable_keys_as_python_writes_bytes() {
        assert_eq!(python_bytes_repr(b"\xff\xfe"), r"b'\xff\xfe'");
        assert_eq!(python_bytes_repr(b"it's"), r#"b"it's""#);
        assert_eq!(python_bytes_repr(b"'\""), r#"b'\'"'"#);
        assert_eq!(python_bytes_repr(b"a\tb\\\n\x7f"), r"b'a\tb\\\n\x7f'");
    }
}
