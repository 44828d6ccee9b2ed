//! The lookup table: an open-addressing index over the arena.

#![allow(unused_imports)]
use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::Arc;

use bytes::Bytes;
use foldhash::fast::FixedState;
use hashbrown::HashTable;
use memmap2::MmapMut;

use super::arena::*;
use super::index::{Index, Moved, Narrow};
use crate::json::{self, EncodeError, Map};
use crate::observer::Observer;
use crate::record::Config;
use crate::wire::{self, DecodeError, InvalidMessageError, InvalidMessagePolicy, Part, PolicyError, RawRecord};

/// A corrupt stored value: a framework bug, never degraded to an empty config (CFG-04).
///
/// ```
/// use flechtwerk::{ConfigStore, ConfigStoreError};
/// // `get` fails only when a stored value no longer decodes, a framework bug; a stage passes
/// // the error on (`?`) rather than treating the key as unconfigured.
/// fn plan(store: &ConfigStore, key: &str) -> Result<bool, ConfigStoreError> {
///     Ok(store.get(key)?.is_some())
/// }
/// let mut store = ConfigStore::new();
/// store.put_bytes("ada", br#"{"plan":"pro"}"#)?;
/// assert!(plan(&store, "ada")?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("config store holds an undecodable value for key {key:?}: {source}")]
pub struct ConfigStoreError {
    pub(super) key: String,
    pub(super) source: DecodeError,
}

/// The config lookup table: latest config per wire key across every config topic (CFG-01).
///
/// Stages see it read-only (through a shared reference); the config machinery writes it.
///
/// ```
/// use flechtwerk::{attribute::{Attribute, STR}, Config, ConfigStore};
/// const URL: Attribute<String> = Attribute::new("url", &STR);
///
/// let mut store = ConfigStore::new();
/// store.put("tenant-a", &Config::new().with(&URL, "https://a".to_owned())?)?;
/// let mut config = store.get("tenant-a")?.expect("present");
/// config.set(&URL, "changed".to_owned())?; // a private copy (CFG-02)
/// assert_eq!(store.get("tenant-a")?.unwrap().get(&URL)?, Some("https://a".to_owned()));
/// assert_eq!(store.get_bytes("tenant-a"), Some(&br#"{"url":"https://a"}"#[..]));
/// assert!(store.get("missing")?.is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ConfigStore {
    pub(super) table: Index,
    pub(super) arena: Arena,
    /// UTF-8 key bytes plus value bytes of every record the index holds, kept as records come
    /// and go (the wire footprint, `flechtwerk_config_store_bytes`).
    pub(super) wire_bytes: usize,
}

impl Default for ConfigStore {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ConfigStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigStore").field("entries", &self.len()).finish_non_exhaustive()
    }
}

impl ConfigStore {
    /// An empty store.
    ///
    /// ```
    /// let store = flechtwerk::ConfigStore::new();
    /// assert!(store.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_arena(Arena::new(None))
    }

    /// An empty store whose arena grows in chunks of a fixed `chunk_bytes` (by default chunks
    /// grow with the store up to 1 MiB). Tiny chunks make compaction observable in
    /// tests; each chunk is a memory map of its own, so a size below the page size wastes memory.
    ///
    /// ```
    /// use flechtwerk::ConfigStore;
    /// let mut store = ConfigStore::with_chunk_bytes(4096);
    /// for tenant in 0..1000 {
    ///     store.put_bytes(&format!("tenant-{tenant}"), br#"{"url":"https://example.org"}"#)?;
    /// }
    /// assert_eq!(store.len(), 1000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_chunk_bytes(chunk_bytes: usize) -> Self {
        assert!(chunk_bytes >= 64, "a chunk must hold at least a small record");
        Self::with_arena(Arena::new(Some(chunk_bytes)))
    }

    pub(super) fn with_arena(arena: Arena) -> Self {
        Self::with_arena_and_chunk_bits(arena, 32)
    }

    /// A store whose narrow index has at most `chunk_bits` bits for the chunk number (tests use
    /// a few, so the chunk numbers wrap and the index widens within a small store).
    pub(super) fn with_arena_and_chunk_bits(arena: Arena, chunk_bits: u32) -> Self {
        let narrow = Narrow::for_chunks(arena.max_chunk_bytes(), chunk_bits);
        ConfigStore { table: Index::new(narrow, FixedState::with_seed(INDEX_SEED)), arena, wire_bytes: 0 }
    }

    /// A pre-seeded store (CFG-05): the test entry point.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, STR};
    /// use flechtwerk::{Config, ConfigStore};
    /// const PLAN: Attribute<String> = Attribute::new("plan", &STR);
    /// // A store for a unit test of a stage's config join.
    /// let store = ConfigStore::of([("ada", Config::new().with(&PLAN, "pro".to_owned())?)])?;
    /// assert_eq!(store.get("ada")?.unwrap().get(&PLAN)?.as_deref(), Some("pro"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn of<K: Into<String>>(entries: impl IntoIterator<Item = (K, Config)>) -> Result<Self, EncodeError> {
        let mut store = ConfigStore::new();
        for (key, config) in entries {
            store.put(&key.into(), &config)?;
        }
        Ok(store)
    }

    /// Makes room in the index for `additional` more keys.
    pub(super) fn reserve(&mut self, additional: usize) {
        self.table.reserve(&self.arena, additional);
    }

    pub(super) fn hash(&self, key: &[u8]) -> u64 {
        self.table.hasher.hash_one(key)
    }

    pub(super) fn find(&self, key: &[u8]) -> Option<Pos> {
        self.table.find(&self.arena, self.hash(key), key)
    }

    /// The config for `key`, freshly decoded: mutating it never touches the store (CFG-02).
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, INT};
    /// use flechtwerk::ConfigStore;
    /// const LIMIT: Attribute<i64> = Attribute::new("limit", &INT);
    /// let mut store = ConfigStore::new();
    /// store.put_bytes("ada", br#"{"limit":10}"#)?;
    /// assert_eq!(store.get("ada")?.unwrap().require(&LIMIT)?, 10);
    /// assert!(store.get("bob")?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get(&self, key: &str) -> Result<Option<Config>, ConfigStoreError> {
        let Some(bytes) = self.get_bytes(key) else {
            return Ok(None);
        };
        match wire::decode_value(Some(bytes)) {
            Ok(map) => Ok(Some(Config::wrap(map))),
            Err(source) => Err(ConfigStoreError { key: key.to_owned(), source }),
        }
    }

    /// The stored canonical JSON bytes for `key`.
    ///
    /// ```
    /// let mut store = flechtwerk::ConfigStore::new();
    /// store.put_bytes("ada", br#"{ "limit": 10 }"#)?;
    /// assert_eq!(store.get_bytes("ada"), Some(&br#"{"limit":10}"#[..])); // canonical JSON
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_bytes(&self, key: &str) -> Option<&[u8]> {
        let pos = self.find(key.as_bytes())?;
        let view = self.arena.view(pos);
        debug_assert_eq!(view.kind, KIND_LIVE, "pending entries never escape the bootstrap");
        Some(view.value)
    }

    /// Whether `key` has a config.
    ///
    /// ```
    /// let mut store = flechtwerk::ConfigStore::new();
    /// store.put_bytes("ada", b"{}")?;
    /// assert!(store.contains_key("ada"));
    /// assert!(!store.contains_key("bob"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key.as_bytes()).is_some()
    }

    /// Number of configs.
    ///
    /// ```
    /// let mut store = flechtwerk::ConfigStore::new();
    /// store.put_bytes("ada", b"{}")?;
    /// store.put_bytes("ada", br#"{"plan":"pro"}"#)?; // the latest value per key
    /// assert_eq!(store.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// True when the store is empty.
    ///
    /// ```
    /// let mut store = flechtwerk::ConfigStore::new();
    /// store.put_bytes("ada", b"{}")?;
    /// store.delete("ada");
    /// assert!(store.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Every key, sorted (deterministic, whatever the table layout).
    ///
    /// ```
    /// let mut store = flechtwerk::ConfigStore::new();
    /// for key in ["carol", "ada", "bob"] {
    ///     store.put_bytes(key, b"{}")?;
    /// }
    /// assert_eq!(store.keys(), ["ada", "bob", "carol"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keys(&self) -> Vec<String> {
        let mut keys = Vec::with_capacity(self.len());
        self.table.for_each(&self.arena, |pos| keys.push(String::from_utf8_lossy(self.arena.key(pos)).into_owned()));
        keys.sort_unstable();
        keys
    }

    /// Heap bytes held by the store (arena chunks and index), for the size contract.
    ///
    /// ```
    /// let mut store = flechtwerk::ConfigStore::new();
    /// store.put_bytes("ada", br#"{"plan":"pro"}"#)?;
    /// // What the process holds (arena and index) is at least the wire footprint.
    /// assert!(store.memory_bytes() >= store.wire_bytes());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn memory_bytes(&self) -> usize {
        self.arena.memory_bytes() + self.table.allocation_size()
    }

    /// The wire footprint: the UTF-8 keys plus the canonical JSON values, summed over every
    /// entry. Tracked as entries come and go, so reading it is O(1). This is what the Python
    /// implementation's `ConfigStore.nbytes` weighs (`flechtwerk_config_store_bytes`); what the
    /// process really holds is [`memory_bytes`](Self::memory_bytes).
    ///
    /// ```
    /// use flechtwerk::{Config, ConfigStore};
    /// let mut store = ConfigStore::new();
    /// store.put("tenant-a", &Config::new())?; // "tenant-a" + "{}"
    /// assert_eq!(store.wire_bytes(), 10);
    /// store.delete("tenant-a");
    /// assert_eq!(store.wire_bytes(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wire_bytes(&self) -> usize {
        self.wire_bytes
    }

    /// Key plus value bytes of the record at `pos`.
    fn weigh(&self, pos: Pos) -> usize {
        let view = self.arena.view(pos);
        view.key.len() + view.value.len()
    }

    /// Stores `config` under `key`, re-encoded to canonical JSON (CFG-03). The config machinery
    /// calls this; a stage holds the store read-only.
    ///
    /// ```
    /// use flechtwerk::attribute::{Attribute, STR};
    /// use flechtwerk::{Config, ConfigStore};
    /// const PLAN: Attribute<String> = Attribute::new("plan", &STR);
    /// let mut store = ConfigStore::new();
    /// store.put("ada", &Config::new().with(&PLAN, "pro".to_owned())?)?;
    /// assert_eq!(store.get_bytes("ada"), Some(&br#"{"plan":"pro"}"#[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn put(&mut self, key: &str, config: &Config) -> Result<(), EncodeError> {
        let mut bytes = Vec::with_capacity(128);
        json::write_object(config.raw(), &mut bytes)?;
        self.insert(key.as_bytes(), &bytes, None);
        Ok(())
    }

    /// Stores bytes already known to be a canonical JSON object.
    pub(super) fn put_canonical(&mut self, key: &str, bytes: &[u8]) {
        debug_assert_eq!(json::check_canonical_object(bytes), Ok(true));
        self.insert(key.as_bytes(), bytes, None);
    }

    /// Stores a raw value: canonical bytes as they are (the fast path: nothing is parsed),
    /// anything else parsed and re-encoded. Errors when the bytes are not a JSON object.
    ///
    /// ```
    /// let mut store = flechtwerk::ConfigStore::new();
    /// store.put_bytes("ada", br#"{"b":1,"a":2}"#)?; // not canonical: parsed and re-encoded
    /// assert_eq!(store.get_bytes("ada"), Some(&br#"{"a":2,"b":1}"#[..]));
    /// assert!(store.put_bytes("bob", b"[1, 2]").is_err()); // not a JSON object
    /// assert!(!store.contains_key("bob"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn put_bytes(&mut self, key: &str, value: &[u8]) -> Result<(), DecodeError> {
        match json::check_canonical_object(value) {
            Ok(true) => {
                self.put_canonical(key, value);
                Ok(())
            }
            _ => {
                let map = wire::decode_value(Some(value))?;
                self.put(key, &Config::wrap(map)).expect("a parsed value is finite and encodes");
                Ok(())
            }
        }
    }

    /// Removes `key`; removing a missing key is a no-op (CFG-03). Returns whether it was there.
    ///
    /// ```
    /// let mut store = flechtwerk::ConfigStore::new();
    /// store.put_bytes("ada", b"{}")?;
    /// assert!(store.delete("ada"));
    /// assert!(!store.delete("ada")); // already gone: a no-op
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete(&mut self, key: &str) -> bool {
        self.remove(key.as_bytes()).is_some()
    }

    /// Removes `key`; returns the kind of the removed record.
    pub(super) fn remove(&mut self, key: &[u8]) -> Option<u8> {
        let hash = self.hash(key);
        let pos = self.table.remove(&self.arena, hash, key)?;
        self.wire_bytes -= self.weigh(pos);
        let kind = self.arena.kill(pos);
        self.maybe_compact();
        Some(kind)
    }

    /// Inserts or replaces; returns the kind of the replaced record, if any. A replacing record
    /// no longer than the one it replaces is written over it ([`Arena::overwrite`]): a key
    /// updated to a value of about the same size makes (almost) no garbage, so a config topic's
    /// rewrites cost no compaction.
    pub(super) fn insert(&mut self, key: &[u8], value: &[u8], origin: Option<Origin>) -> Option<u8> {
        let hash = self.hash(key);
        self.wire_bytes += key.len() + value.len();
        let Some(old) = self.table.find(&self.arena, hash, key) else {
            let new = self.arena.append(key, value, origin);
            self.table.insert_new(&self.arena, hash, new);
            self.maybe_compact();
            return None;
        };
        self.wire_bytes -= self.weigh(old);
        let replaced = match self.arena.overwrite(old, key, value, origin) {
            Some(kind) => kind,
            None => {
                let new = self.arena.append(key, value, origin);
                self.table.replace(&self.arena, hash, old, new);
                self.arena.kill(old)
            }
        };
        self.maybe_compact();
        Some(replaced)
    }

    /// Rewrites the record at `pos` (which the table holds for its key) as a live record with
    /// the same key and value, in place (a live record is shorter than the pending one, which
    /// carries its origin): a pending bootstrap record becomes a stored entry.
    pub(super) fn promote(&mut self, pos: Pos, scratch: &mut Vec<u8>) {
        let view = self.arena.view(pos);
        let key_len = view.key.len();
        scratch.clear();
        scratch.extend_from_slice(view.key);
        scratch.extend_from_slice(view.value);
        let replaced = self.arena.overwrite(pos, &scratch[..key_len], &scratch[key_len..], None);
        debug_assert_eq!(replaced, Some(KIND_PENDING), "a pending record is promoted in place");
        self.maybe_compact();
    }

    /// Rewrites live records into fresh chunks once garbage is large, freeing each old chunk as
    /// soon as it has been walked, so the peak stays one chunk above the live size.
    ///
    /// Records move in batches of old chunks. A batch is copied in log order, which makes the
    /// list of old positions sorted; one sequential pass over the index then repoints every slot
    /// of the batch through a binary search of that (cache-sized) list. Looking each moved key
    /// up in the index instead costs two cache misses per record, which is what dominated.
    pub(super) fn maybe_compact(&mut self) {
        if !self.arena.needs_compaction() {
            return;
        }
        let first = self.arena.first;
        let end = first + self.arena.chunks.len() as u64;
        // Seal the current tail so moved records land in new chunks, after `end`.
        self.arena.chunks.push_back(Chunk { map: None, capacity: 0, filled: 0, live_bytes: 0 });
        self.arena.recycle = true;
        let mut record = Vec::new();
        let mut moved_from: Vec<Pos> = Vec::new();
        let mut moved_to: Vec<Pos> = Vec::new();
        // Per chunk of a batch: where its records start in `moved_from`, and its written size.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut number = first;
        while number < end {
            let batch_first = number;
            moved_from.clear();
            moved_to.clear();
            runs.clear();
            while number < end && moved_from.len() < COMPACTION_BATCH_RECORDS {
                runs.push((moved_from.len(), self.arena.chunk_by_number(number).map_or(0, |c| c.filled)));
                let mut offset = 0;
                // A chunk freed and popped meanwhile had nothing live left in it.
                while let Some(chunk) = self.arena.chunk_by_number(number).filter(|c| offset < c.filled) {
                    let pos = pos_of(number, offset);
                    let view = decode_record(chunk.data(), offset);
                    offset += view.len;
                    if view.kind & DEAD_BIT != 0 {
                        continue;
                    }
                    record.clear();
                    record.extend_from_slice(&chunk.data()[pos.offset()..offset]);
                    moved_from.push(pos);
                    moved_to.push(self.arena.append_encoded(&record));
                    self.arena.kill(pos);
                }
                number += 1;
            }
            // The batch's chunks may be popped by now: slots are decoded against its first.
            runs.push((moved_from.len(), 0));
            let moved = Moved { chunks: batch_first..number, from: &moved_from, to: &moved_to, runs: &runs };
            let repointed = self.table.repoint(&self.arena, &moved);
            assert_eq!(repointed, moved_from.len(), "the index holds exactly the live records");
        }
        self.arena.recycle = false;
        self.arena.spare = None;
        debug_assert!(self.arena.dead_bytes <= self.arena.chunk_bytes().max(self.arena.live_bytes));
    }
}

impl crate::observer::ConfigView for ConfigStore {
    fn len(&self) -> usize {
        ConfigStore::len(self)
    }

    fn wire_bytes(&self) -> usize {
        ConfigStore::wire_bytes(self)
    }

    /// In table order, straight off the index: no copy of the keys (a sorted copy of a
    /// million keys would hold ~50 MiB while it is walked).
    fn for_each_entry(&self, f: &mut dyn FnMut(&str, &[u8])) {
        self.table.for_each(&self.arena, |pos| {
            let view = self.arena.view(pos);
            f(std::str::from_utf8(view.key).expect("keys are decoded before they are stored"), view.value);
        });
    }
}
