//! The bootstrap: every config record read once, compacted as it is read (CFG-10..16).

#![allow(unused_imports)]
use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::Arc;

use bytes::Bytes;
use foldhash::fast::FixedState;
use hashbrown::HashTable;
use memmap2::MmapMut;

use super::arena::*;
use super::store::*;
use crate::json::{self, EncodeError, Map};
use crate::observer::Observer;
use crate::record::Config;
use crate::wire::{
    self, DecodeError, InvalidMessageError, InvalidMessagePolicy, Part, PolicyError, RawRecord, RecordRef,
};

/// The largest index reservation a bootstrap makes ahead of its read
/// ([`ConfigBootstrap::reserve`]): 64 M records, 2^27 slots (~0.6 GiB of index with 4-byte slots,
/// ~1.1 GiB once widened to 8-byte ones). A topic that holds more
/// grows its index as it goes.
pub(crate) const RESERVE_HINT_MAX: u64 = 1 << 26;

/// A bootstrap in progress: reads every config record once, compacting as it goes (CFG-10..16).
///
/// Feed the records in read order to [`offer`](Self::offer): keys are decoded for every record
/// (so an undecodable key reaches the policy even when a later record supersedes it, INV-19),
/// tombstones delete, and a later value replaces an earlier one without the earlier one ever
/// being decoded. Then take the survivors one by one with [`next_survivor`](Self::next_survivor),
/// decide each (decode through the policy, enrich) and store the result with
/// [`put`](Self::put) / [`put_bytes`](Self::put_bytes); finally [`finish`](Self::finish).
///
/// A stage that does not enrich configs stores canonical values as they are, so a bootstrap
/// made [`without_enrichment`](Self::without_enrichment) settles every canonical value as it
/// is offered (a cheap scan that never calls the policy, so unobservable) and leaves only the
/// other values pending: the common case then needs no second pass at all.
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::wire::RawRecord;
/// let raw = |offset: i64, key: &str, value: Option<&str>| RawRecord {
///     topic: Arc::from("configs"), partition: 0, offset, timestamp_ms: None,
///     key: Some(key.as_bytes().to_vec().into()), value: value.map(|v| v.as_bytes().to_vec().into()), headers: vec![],
/// };
/// use flechtwerk::testing::{ConfigBootstrap, RecordingObserver};
/// use flechtwerk::wire::RaisePolicy;
///
/// let observer = RecordingObserver::default();
/// let mut bootstrap = ConfigBootstrap::new().without_enrichment();
/// for record in [raw(0, "a", Some(r#"{"v":1}"#)), raw(1, "a", Some(r#"{ "v" : 2 }"#)), raw(2, "b", Some("{}"))] {
///     bootstrap.offer(&record, &RaisePolicy, &observer)?; // last write wins; `{}` deletes
/// }
/// let store = bootstrap.finish_unenriched(&RaisePolicy, &observer)?;
/// assert_eq!(store.keys(), ["a"]);
/// assert_eq!(store.get_bytes("a"), Some(&br#"{"v":2}"#[..])); // re-encoded canonically
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default)]
pub struct ConfigBootstrap {
    store: ConfigStore,
    topics: Vec<Arc<str>>,
    /// Walk position of `next_survivor`: absolute chunk number and byte offset.
    cursor: (u64, usize),
    /// Survivors still to be decided: the pending records the table holds.
    pending: usize,
    /// Canonical values are settled on offer (no enrichment will see them).
    settle_canonical: bool,
}

/// A surviving record of a bootstrap: the latest record of its key, value still undecoded.
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::wire::RawRecord;
/// let raw = |offset: i64, key: &str, value: Option<&str>| RawRecord {
///     topic: Arc::from("configs"), partition: 0, offset, timestamp_ms: None,
///     key: Some(key.as_bytes().to_vec().into()), value: value.map(|v| v.as_bytes().to_vec().into()), headers: vec![],
/// };
/// use flechtwerk::testing::{ConfigBootstrap, RecordingObserver};
/// use flechtwerk::wire::RaisePolicy;
///
/// let mut bootstrap = ConfigBootstrap::new();
/// bootstrap.offer(&raw(0, "a", Some(r#"{"v":1}"#)), &RaisePolicy, &RecordingObserver::default())?;
/// let survivor = bootstrap.next_survivor().expect("one key");
/// assert_eq!((survivor.key.as_str(), survivor.record.offset), ("a", 0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Survivor {
    /// The decoded wire key.
    pub key: String,
    /// The record as it was read (key and value bytes, position, timestamp).
    pub record: RawRecord,
}

impl ConfigBootstrap {
    /// An empty bootstrap.
    ///
    /// ```
    /// use flechtwerk::testing::{ConfigBootstrap, RecordingObserver};
    /// use flechtwerk::wire::RaisePolicy;
    /// let store = ConfigBootstrap::new().finish_unenriched(&RaisePolicy, &RecordingObserver::default())?;
    /// assert!(store.is_empty()); // no records offered, no configs
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty bootstrap building a store with the given chunk size
    /// (see [`ConfigStore::with_chunk_bytes`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let raw = |offset: i64, key: &str, value: &str| RawRecord {
    /// #     topic: Arc::from("configs"), partition: 0, offset, timestamp_ms: None,
    /// #     key: Some(key.as_bytes().to_vec().into()), value: Some(value.as_bytes().to_vec().into()), headers: vec![],
    /// # };
    /// use flechtwerk::testing::{ConfigBootstrap, RecordingObserver};
    /// use flechtwerk::wire::RaisePolicy;
    /// let observer = RecordingObserver::default();
    /// let mut bootstrap = ConfigBootstrap::with_chunk_bytes(4096);
    /// for offset in 0..100 {
    ///     bootstrap.offer(&raw(offset, &format!("k{}", offset % 10), r#"{"v":1}"#), &RaisePolicy, &observer)?;
    /// }
    /// assert_eq!(bootstrap.finish_unenriched(&RaisePolicy, &observer)?.len(), 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg_attr(not(feature = "testing"), allow(dead_code))] // benches and fuzz targets
    pub fn with_chunk_bytes(chunk_bytes: usize) -> Self {
        ConfigBootstrap { store: ConfigStore::with_chunk_bytes(chunk_bytes), ..Self::default() }
    }

    /// An empty bootstrap building into `store` (tests: a store with a small narrow index).
    #[cfg(test)]
    pub(super) fn with_store(store: ConfigStore) -> Self {
        assert!(store.is_empty(), "a bootstrap starts from an empty store");
        ConfigBootstrap { store, ..Self::default() }
    }

    /// This bootstrap for a stage that does not enrich: canonical values are stored as they
    /// are offered, and [`next_survivor`](Self::next_survivor) yields only the survivors whose
    /// values still need a decision (not canonical: parse, re-encode, or the policy).
    ///
    /// # Panics
    /// When records were already offered.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let raw = |offset: i64, key: &str, value: &str| RawRecord {
    /// #     topic: Arc::from("configs"), partition: 0, offset, timestamp_ms: None,
    /// #     key: Some(key.as_bytes().to_vec().into()), value: Some(value.as_bytes().to_vec().into()), headers: vec![],
    /// # };
    /// use flechtwerk::testing::{ConfigBootstrap, RecordingObserver};
    /// use flechtwerk::wire::RaisePolicy;
    /// let observer = RecordingObserver::default();
    /// let mut bootstrap = ConfigBootstrap::new().without_enrichment();
    /// bootstrap.offer(&raw(0, "a", r#"{"v":1}"#), &RaisePolicy, &observer)?; // canonical: settled now
    /// bootstrap.offer(&raw(1, "b", r#"{ "v": 2 }"#), &RaisePolicy, &observer)?; // needs a decision
    /// let survivor = bootstrap.next_survivor().expect("b is pending");
    /// assert_eq!(survivor.key, "b");
    /// assert!(bootstrap.next_survivor().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn without_enrichment(mut self) -> Self {
        assert!(self.store.is_empty(), "choose the mode before offering records");
        self.settle_canonical = true;
        self
    }

    /// Sizes the index ahead for up to `records` more records (the offsets the read will cover),
    /// so it never grows (and rehashes) during the read. An overestimate costs index memory, so
    /// the hint is taken only up to 64 M records (~0.6 GiB of index, ~1.1 GiB once the store
    /// outgrows 4-byte slots); a bigger store grows on.
    ///
    /// ```
    /// use flechtwerk::testing::ConfigBootstrap;
    /// let mut bootstrap = ConfigBootstrap::new();
    /// let empty = bootstrap.memory_bytes();
    /// bootstrap.reserve(1000);
    /// assert!(bootstrap.memory_bytes() > empty); // the index is allocated at once
    /// ```
    pub fn reserve(&mut self, records: u64) {
        self.store.reserve(records.min(RESERVE_HINT_MAX) as usize);
    }

    fn topic_index(&mut self, topic: &Arc<str>) -> u32 {
        // `Arc<str>` equality compares the pointers before the contents.
        match self.topics.iter().position(|t| t == topic) {
            Some(i) => i as u32,
            None => {
                self.topics.push(Arc::clone(topic));
                (self.topics.len() - 1) as u32
            }
        }
    }

    /// Reads one record: its key through the policy, then the tombstone test on the raw value
    /// (INV-17), then last-write-wins by key (CFG-12). A keyless record counts as key `""`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let raw = |offset: i64, key: &[u8], value: &str| RawRecord {
    /// #     topic: Arc::from("configs"), partition: 0, offset, timestamp_ms: None,
    /// #     key: Some(key.to_vec().into()), value: Some(value.as_bytes().to_vec().into()), headers: vec![],
    /// # };
    /// use flechtwerk::testing::{ConfigBootstrap, RecordingObserver};
    /// use flechtwerk::wire::RaisePolicy;
    /// let observer = RecordingObserver::default();
    /// let mut bootstrap = ConfigBootstrap::new();
    /// bootstrap.offer(&raw(0, b"a", r#"{"v":1}"#), &RaisePolicy, &observer)?;
    /// // A key that is not UTF-8 goes to the policy; the default policy raises.
    /// assert!(bootstrap.offer(&raw(1, b"\xff", r#"{"v":1}"#), &RaisePolicy, &observer).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg_attr(not(feature = "testing"), allow(dead_code))] // tests, benches and fuzz targets
    pub fn offer(
        &mut self,
        record: &RawRecord,
        policy: &dyn InvalidMessagePolicy,
        observer: &dyn Observer,
    ) -> Result<(), PolicyError> {
        self.offer_borrowed(record.borrowed(), policy, observer)
    }

    /// [`offer`](Self::offer) for a record by reference (as
    /// [`Consumer::poll_borrowed`](crate::kafka::Consumer::poll_borrowed) hands it): its key and
    /// value are copied once, into the store.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use flechtwerk::testing::{ConfigBootstrap, RecordingObserver};
    /// use flechtwerk::wire::{RaisePolicy, RecordRef};
    /// let topic: Arc<str> = Arc::from("configs");
    /// let record = RecordRef {
    ///     topic: &topic, partition: 0, offset: 0, timestamp_ms: None, key: Some(&b"a"[..]), value: Some(&br#"{"v":1}"#[..]),
    /// };
    /// let mut bootstrap = ConfigBootstrap::new().without_enrichment();
    /// bootstrap.offer_borrowed(record, &RaisePolicy, &RecordingObserver::default())?;
    /// let store = bootstrap.finish_unenriched(&RaisePolicy, &RecordingObserver::default())?;
    /// assert_eq!(store.get_bytes("a"), Some(&br#"{"v":1}"#[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn offer_borrowed(
        &mut self,
        record: RecordRef<'_>,
        policy: &dyn InvalidMessagePolicy,
        observer: &dyn Observer,
    ) -> Result<(), PolicyError> {
        let key = match std::str::from_utf8(record.key.unwrap_or_default()) {
            Ok(key) => key,
            Err(source) => {
                // Skipped (or raised): not applied, not even as a deletion (INV-17).
                let error = InvalidMessageError::new(Part::Key, &record.to_raw(), source.into());
                return crate::mediation::mediate(policy, observer, error).map(|_| ());
            }
        };
        if record.key.is_none() {
            tracing::warn!(topic = %record.topic, partition = record.partition, offset = record.offset,
                "config record without a key: applied under the empty key");
        }
        if wire::is_tombstone(record.value) {
            if self.store.remove(key.as_bytes()).is_some_and(|kind| kind == KIND_PENDING) {
                self.pending -= 1;
            }
            return Ok(());
        }
        let value = record.value.expect("not a tombstone, so a value is present");
        let origin = if self.settle_canonical && json::check_canonical_object(value) == Ok(true) {
            None
        } else {
            Some(Origin {
                topic: self.topic_index(record.topic),
                partition: record.partition,
                offset: record.offset,
                timestamp_ms: record.timestamp_ms,
            })
        };
        let was_pending = self.store.insert(key.as_bytes(), value, origin).is_some_and(|kind| kind == KIND_PENDING);
        self.pending = self.pending + usize::from(origin.is_some()) - usize::from(was_pending);
        Ok(())
    }

    /// The next surviving record, in storage order; `None` when all have been taken. A taken
    /// survivor leaves the table until it is stored again.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let raw = |offset: i64, key: &str, value: &str| RawRecord {
    /// #     topic: Arc::from("configs"), partition: 0, offset, timestamp_ms: None,
    /// #     key: Some(key.as_bytes().to_vec().into()), value: Some(value.as_bytes().to_vec().into()), headers: vec![],
    /// # };
    /// use flechtwerk::testing::{ConfigBootstrap, RecordingObserver};
    /// use flechtwerk::wire::RaisePolicy;
    /// let observer = RecordingObserver::default();
    /// let mut bootstrap = ConfigBootstrap::new();
    /// bootstrap.offer(&raw(0, "a", r#"{"v":1}"#), &RaisePolicy, &observer)?;
    /// bootstrap.offer(&raw(1, "a", r#"{"v":2}"#), &RaisePolicy, &observer)?;
    /// // Decide each survivor (here: keep it as it is), then finish.
    /// while let Some(survivor) = bootstrap.next_survivor() {
    ///     assert_eq!(survivor.record.offset, 1); // the latest record of key a
    ///     bootstrap.put_bytes(&survivor.key, survivor.record.value.as_deref().unwrap())?;
    /// }
    /// assert_eq!(bootstrap.finish().get_bytes("a"), Some(&br#"{"v":2}"#[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_survivor(&mut self) -> Option<Survivor> {
        let pos = self.next_pending()?;
        let view = self.store.arena.view(pos);
        let origin = view.origin.expect("pending records carry their origin");
        let key = String::from_utf8(view.key.to_vec()).expect("keys were decoded on offer");
        let record = RawRecord {
            topic: Arc::clone(&self.topics[origin.topic as usize]),
            partition: origin.partition,
            offset: origin.offset,
            timestamp_ms: origin.timestamp_ms,
            key: Some(Bytes::copy_from_slice(view.key)),
            value: Some(Bytes::copy_from_slice(view.value)),
            headers: Vec::new(),
        };
        self.pending -= 1;
        self.store.delete(&key);
        Some(Survivor { key, record })
    }

    /// Moves the cursor to the next pending record the table still holds.
    fn next_pending(&mut self) -> Option<Pos> {
        while self.pending > 0 {
            let arena = &self.store.arena;
            let (number, offset) = self.cursor;
            let Some(chunk) = arena.chunk_by_number(number) else {
                // The cursor's chunk was freed and popped: resume at the front.
                assert!(number < arena.first, "bootstrap cursor ran past the arena with {} pending", self.pending);
                self.cursor = (arena.first, 0);
                continue;
            };
            if offset >= chunk.filled {
                self.cursor = (number + 1, 0);
                continue;
            }
            let view = decode_record(chunk.data(), offset);
            self.cursor = (number, offset + view.len);
            let pos = pos_of(number, offset);
            if view.kind == KIND_PENDING {
                debug_assert_eq!(self.store.find(view.key), Some(pos), "a live record is in the table");
                return Some(pos);
            }
        }
        None
    }

    /// Decides every survivor without enrichment and returns the store: canonical values are
    /// promoted without being parsed (the fast path; settled on offer already
    /// [`without_enrichment`](Self::without_enrichment)), others go through
    /// [`apply_unenriched`](Self::apply_unenriched).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let raw = |offset: i64, key: &str, value: &str| RawRecord {
    /// #     topic: Arc::from("configs"), partition: 0, offset, timestamp_ms: None,
    /// #     key: Some(key.as_bytes().to_vec().into()), value: Some(value.as_bytes().to_vec().into()), headers: vec![],
    /// # };
    /// use flechtwerk::testing::{ConfigBootstrap, RecordingObserver};
    /// use flechtwerk::wire::RaisePolicy;
    /// let observer = RecordingObserver::default();
    /// let mut bootstrap = ConfigBootstrap::new();
    /// bootstrap.offer(&raw(0, "a", "not json"), &RaisePolicy, &observer)?; // decoded only at the end
    /// assert!(bootstrap.finish_unenriched(&RaisePolicy, &observer).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finish_unenriched(
        mut self,
        policy: &dyn InvalidMessagePolicy,
        observer: &dyn Observer,
    ) -> Result<ConfigStore, PolicyError> {
        let mut scratch = Vec::new();
        while let Some(pos) = self.next_pending() {
            if json::check_canonical_object(self.store.arena.view(pos).value) == Ok(true) {
                self.pending -= 1;
                self.store.promote(pos, &mut scratch);
                continue;
            }
            // Rewind onto this record and take it the slow way.
            let view_len = self.store.arena.view(pos).len;
            self.cursor.1 -= view_len;
            let survivor = self.next_survivor().expect("the record just found is pending");
            self.apply_unenriched(&survivor, policy, observer)?;
        }
        Ok(self.finish())
    }

    /// Stores a decided survivor's config.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT};
    /// use flechtwerk::testing::ConfigBootstrap;
    /// use flechtwerk::Config;
    /// const V: Attribute<i64> = Attribute::new("v", &INT);
    /// let mut bootstrap = ConfigBootstrap::new();
    /// bootstrap.put("a", &Config::new().with(&V, 3)?)?; // e.g. a survivor after enrichment
    /// assert_eq!(bootstrap.finish().get_bytes("a"), Some(&br#"{"v":3}"#[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn put(&mut self, key: &str, config: &Config) -> Result<(), EncodeError> {
        self.store.put(key, config)
    }

    /// Stores a survivor's value bytes, canonicalised (see [`ConfigStore::put_bytes`]).
    ///
    /// ```
    /// use flechtwerk::testing::ConfigBootstrap;
    /// let mut bootstrap = ConfigBootstrap::new();
    /// bootstrap.put_bytes("a", br#"{ "v": 3 }"#)?;
    /// assert_eq!(bootstrap.finish().get_bytes("a"), Some(&br#"{"v":3}"#[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg_attr(not(feature = "testing"), allow(dead_code))] // benches and fuzz targets
    pub fn put_bytes(&mut self, key: &str, value: &[u8]) -> Result<(), DecodeError> {
        self.store.put_bytes(key, value)
    }

    /// Decides a survivor without enrichment: the value through the policy (skip leaves the key
    /// absent, substitute stores the substitute), the fast path for canonical bytes. Returns
    /// whether the key was stored.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::wire::RawRecord;
    /// # let raw = |offset: i64, key: &str, value: &str| RawRecord {
    /// #     topic: Arc::from("configs"), partition: 0, offset, timestamp_ms: None,
    /// #     key: Some(key.as_bytes().to_vec().into()), value: Some(value.as_bytes().to_vec().into()), headers: vec![],
    /// # };
    /// use flechtwerk::testing::{ConfigBootstrap, RecordingObserver};
    /// use flechtwerk::wire::RaisePolicy;
    /// let observer = RecordingObserver::default();
    /// let mut bootstrap = ConfigBootstrap::new();
    /// bootstrap.offer(&raw(0, "a", r#"{ "v": 1 }"#), &RaisePolicy, &observer)?;
    /// let survivor = bootstrap.next_survivor().unwrap();
    /// assert!(bootstrap.apply_unenriched(&survivor, &RaisePolicy, &observer)?); // stored
    /// assert_eq!(bootstrap.finish().get_bytes("a"), Some(&br#"{"v":1}"#[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn apply_unenriched(
        &mut self,
        survivor: &Survivor,
        policy: &dyn InvalidMessagePolicy,
        observer: &dyn Observer,
    ) -> Result<bool, PolicyError> {
        let value = survivor.record.value.as_deref().expect("survivors have values");
        if json::check_canonical_object(value) == Ok(true) {
            self.store.put_canonical(&survivor.key, value);
            return Ok(true);
        }
        match crate::mediation::decode_value_with(&survivor.record, policy, observer)? {
            None => Ok(false),
            Some(map) => {
                self.put(&survivor.key, &Config::wrap(map))
                    .map_err(|e| PolicyError::substitute_not_encodable(&survivor.record, e))?;
                Ok(true)
            }
        }
    }

    /// The store, once every survivor has been taken.
    ///
    /// # Panics
    /// When survivors are left: they would be invisible, undecided entries.
    ///
    /// ```
    /// let store = flechtwerk::testing::ConfigBootstrap::new().finish();
    /// assert!(store.is_empty());
    /// ```
    pub fn finish(self) -> ConfigStore {
        assert_eq!(self.pending, 0, "bootstrap finished with undecided survivors");
        self.store
    }

    /// Where the store's memory is so far, for a log line: (live record bytes, dead bytes not
    /// yet compacted, index bytes).
    pub(crate) fn footprint(&self) -> (usize, usize, usize) {
        let arena = &self.store.arena;
        (arena.live_bytes, arena.dead_bytes, self.store.table.allocation_size())
    }

    /// Heap bytes held so far.
    ///
    /// ```
    /// use flechtwerk::testing::ConfigBootstrap;
    /// let mut bootstrap = ConfigBootstrap::new();
    /// let empty = bootstrap.memory_bytes();
    /// bootstrap.put_bytes("a", br#"{"v":1}"#)?;
    /// assert!(bootstrap.memory_bytes() > empty);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg_attr(not(feature = "testing"), allow(dead_code))] // benches and fuzz targets
    pub fn memory_bytes(&self) -> usize {
        self.store.memory_bytes()
    }
}

/// Decodes a drained config record (CFG-20): `None` when the policy skipped it, the key with no
/// value for a tombstone, else the key and the decoded (or substituted) value.
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::wire::RawRecord;
/// let raw = |offset: i64, key: &str, value: Option<&str>| RawRecord {
///     topic: Arc::from("configs"), partition: 0, offset, timestamp_ms: None,
///     key: Some(key.as_bytes().to_vec().into()), value: value.map(|v| v.as_bytes().to_vec().into()), headers: vec![],
/// };
/// use flechtwerk::testing::{decode_config_update, RecordingObserver};
/// use flechtwerk::wire::RaisePolicy;
///
/// let observer = RecordingObserver::default();
/// let update = decode_config_update(&raw(5, "a", Some(r#"{"v":1}"#)), &RaisePolicy, &observer)?;
/// assert!(matches!(update, Some((key, Some(_))) if key == "a"));
/// let deletion = decode_config_update(&raw(6, "a", None), &RaisePolicy, &observer)?;
/// assert!(matches!(deletion, Some((_, None))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn decode_config_update(
    record: &RawRecord,
    policy: &dyn InvalidMessagePolicy,
    observer: &dyn Observer,
) -> Result<Option<(String, Option<Map>)>, PolicyError> {
    let Some(key) = crate::mediation::decode_key_with(record, policy, observer)? else {
        return Ok(None);
    };
    if record.key.is_none() {
        tracing::warn!(topic = %record.topic, partition = record.partition, offset = record.offset,
            "config record without a key: applied under the empty key");
    }
    if wire::is_tombstone(record.value.as_deref()) {
        return Ok(Some((key, None)));
    }
    Ok(crate::mediation::decode_value_with(record, policy, observer)?.map(|map| (key, Some(map))))
}
