//! The config store: every config topic, compacted by wire key, in one process-wide lookup table
//! (Kafka Streams' GlobalKTable, specialised to configuration; CFG-01..23).
//!
//! The store holds canonical JSON bytes, not parsed values, and decodes on every [`get`]
//! (a fresh [`Config`] each time, CFG-02): a stage can never mutate the table through a value it
//! read, and the memory cost is the wire size, not a parsed tree.
//!
//! ## Designed for size
//!
//! The whole table lives in RAM in every instance and is re-read in full on every boot, so its
//! footprint is the product's size contract. The Python store (a dict of bytes) measured 337 MiB
//! RSS for 191 MiB of wire bytes, and its bootstrap peaked near 755 MiB because it retained every
//! record before applying any. This store keeps keys and values back to back in a log of
//! [`CHUNK_BYTES`] chunks, indexed by an open-addressing table of 8-byte positions (no per-entry
//! allocation, no stored hash), and the bootstrap compacts while it reads: a superseded record's
//! bytes become garbage that compaction reclaims chunk by chunk, and a chunk whose records are
//! all dead is returned to the allocator at once. `docs/performance.md` has the measured figures.
//!
//! [`get`]: ConfigStore::get

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::Arc;

use bytes::Bytes;
use foldhash::fast::FixedState;
use hashbrown::HashTable;
use memmap2::MmapMut;

use crate::json::{self, EncodeError, Map};
use crate::observer::Observer;
use crate::record::Config;
use crate::wire::{self, DecodeError, InvalidMessageError, InvalidMessagePolicy, Part, PolicyError, RawRecord};

/// Largest arena chunk. Each chunk is its own memory map, so a freed chunk leaves the process at
/// once.
///
/// By default chunks grow with the store (1/64 of its live bytes, rounded up to a power of two,
/// between [`MIN_CHUNK_BYTES`] and this): a chunk's worth of slack stays a small fraction of a
/// small store. (Transparent huge pages, with 2 MiB chunks, saved another 4 % of a 1M-entry
/// bootstrap but cost 1 % of resident memory: the tail chunk is resident in full.)
pub const CHUNK_BYTES: usize = 1 << 20;

/// Smallest arena chunk of a default store.
pub const MIN_CHUNK_BYTES: usize = 64 << 10;

/// Compaction runs once garbage exceeds 1/`GARBAGE_RATIO_MAX` of live bytes (and one chunk, so
/// small stores never churn). Each run copies the live bytes once, so the amortised cost is
/// `GARBAGE_RATIO_MAX` bytes copied per byte of garbage reclaimed.
const GARBAGE_RATIO_MAX: usize = 10; // garbage > live / 10

/// Records moved per pass over the index during compaction: the batch's old and new positions
/// (16 bytes a record) stay cache-sized, and a 1M-entry store takes a handful of passes.
const COMPACTION_BATCH_RECORDS: usize = 1 << 16;

/// Seed of the index hash. Fixed so that nothing about the table depends on process randomness
/// (simulations replay byte for byte); nothing observable iterates the table unsorted.
const INDEX_SEED: u64 = 0x666c_6563_6874_7765;

/// A corrupt stored value: a framework bug, never degraded to an empty config (CFG-04).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("config store holds an undecodable value for key {key:?}: {source}")]
pub struct ConfigStoreError {
    key: String,
    source: DecodeError,
}

/// Position of a record in the arena: absolute chunk number in the high 32 bits, byte offset in
/// the low 32.
type Pos = u64;

fn pos_of(chunk: u64, offset: usize) -> Pos {
    debug_assert!(offset < (1 << 32) && chunk < (1 << 32));
    (chunk << 32) | offset as u64
}

const KIND_LIVE: u8 = 0;
const KIND_PENDING: u8 = 1;
/// Set on the kind byte of a killed record: walks (compaction, the bootstrap cursor) tell dead
/// from live without a table lookup. The low bits keep the layout, so a dead record can still
/// be stepped over.
const DEAD_BIT: u8 = 0x80;

/// Where a pending (bootstrap) record came from: enough to name it in an
/// [`InvalidMessageError`](crate::wire::InvalidMessageError).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Origin {
    topic: u32,
    partition: i32,
    offset: i64,
    timestamp_ms: Option<i64>,
}

/// One decoded record.
struct View<'a> {
    kind: u8,
    key: &'a [u8],
    value: &'a [u8],
    origin: Option<Origin>,
    len: usize,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn get_varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = bytes[*at];
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A record's layout is `[kind][key len][value len][key][value][origin, if pending]`. The
/// origin goes last so that reading a key (every hash probe) never parses it.
///
/// Writes the header (`[kind][key len][value len]`) of a record.
fn encode_header(out: &mut Vec<u8>, kind: u8, key: &[u8], value: &[u8]) {
    out.push(kind);
    put_varint(out, key.len() as u64);
    put_varint(out, value.len() as u64);
}

/// The trailer of a pending record: its origin.
fn encode_origin(out: &mut Vec<u8>, o: Origin) {
    put_varint(out, u64::from(o.topic));
    put_varint(out, zigzag(i64::from(o.partition)));
    put_varint(out, zigzag(o.offset));
    put_varint(out, o.timestamp_ms.map_or(0, |t| zigzag(t) + 1));
}

/// The key and value of the record at `at`, and where the value ends.
#[inline]
fn key_value_at(bytes: &[u8], at: usize) -> (&[u8], &[u8], usize) {
    let mut i = at + 1;
    let key_len = get_varint(bytes, &mut i) as usize;
    let value_len = get_varint(bytes, &mut i) as usize;
    let value_end = i + key_len + value_len;
    (&bytes[i..i + key_len], &bytes[i + key_len..value_end], value_end)
}

fn decode_record(bytes: &[u8], at: usize) -> View<'_> {
    let kind = bytes[at];
    let (key, value, mut i) = key_value_at(bytes, at);
    let origin = (kind & !DEAD_BIT == KIND_PENDING).then(|| {
        let topic = get_varint(bytes, &mut i) as u32;
        let partition = unzigzag(get_varint(bytes, &mut i)) as i32;
        let offset = unzigzag(get_varint(bytes, &mut i));
        let ts = get_varint(bytes, &mut i);
        Origin { topic, partition, offset, timestamp_ms: (ts > 0).then(|| unzigzag(ts - 1)) }
    });
    View { kind, key, value, origin, len: i - at }
}

/// One arena chunk: an anonymous memory map, so a freed chunk returns to the OS at once. (Heap
/// chunks would not: glibc raises its mmap threshold after the first large free, serves later
/// chunks from the heap, and keeps freed heap memory resident, so RSS would stay at the peak.)
struct Chunk {
    map: Option<MmapMut>,
    filled: usize,
    live_bytes: usize,
}

impl Chunk {
    /// A chunk of `capacity` bytes: the spare map when it is large enough (its pages are resident
    /// already: no page faults), else a fresh map.
    fn new(capacity: usize, spare: &mut Option<MmapMut>) -> Self {
        let map = match spare.take() {
            Some(map) if map.len() >= capacity => map,
            _ => MmapMut::map_anon(capacity).expect("the config store could not map a chunk of memory"),
        };
        Chunk { map: Some(map), filled: 0, live_bytes: 0 }
    }

    /// The written part.
    fn data(&self) -> &[u8] {
        self.map.as_deref().map_or(&[], |map| &map[..self.filled])
    }

    fn room(&self) -> usize {
        self.map.as_ref().map_or(0, |map| map.len() - self.filled)
    }

    fn push(&mut self, bytes: &[u8]) {
        let map = self.map.as_mut().expect("appends go to a mapped chunk");
        map[self.filled..self.filled + bytes.len()].copy_from_slice(bytes);
        self.filled += bytes.len();
    }

    fn is_freed(&self) -> bool {
        self.map.is_none()
    }

    fn mark_dead(&mut self, offset: usize) {
        let map = self.map.as_mut().expect("records live in mapped chunks");
        debug_assert_eq!(map[offset] & DEAD_BIT, 0, "killed twice");
        map[offset] |= DEAD_BIT;
    }

    /// Takes the chunk's map away (to unmap or to reuse). The chunk reads as empty afterwards,
    /// so a walk over it (compaction, the bootstrap cursor) steps past it.
    fn free(&mut self) -> Option<MmapMut> {
        self.filled = 0;
        self.map.take()
    }
}

/// An append-only log of records in chunks, with per-chunk live accounting.
struct Arena {
    /// A fixed chunk size, or `None`: chunks grow with the store (see [`CHUNK_BYTES`]).
    fixed_chunk_bytes: Option<usize>,
    chunks: VecDeque<Chunk>,
    /// Absolute number of `chunks[0]`.
    first: u64,
    live_bytes: usize,
    /// Bytes held by dead records in chunks not yet freed.
    dead_bytes: usize,
    /// Reused buffer for encoding one record.
    scratch: Vec<u8>,
    /// While compacting: a freed chunk's map kept for the next new chunk, so moving records
    /// reuses resident pages instead of faulting fresh ones in. Released when compaction ends.
    spare: Option<MmapMut>,
    recycle: bool,
}

impl Arena {
    fn new(fixed_chunk_bytes: Option<usize>) -> Self {
        Arena {
            fixed_chunk_bytes,
            chunks: VecDeque::new(),
            first: 0,
            live_bytes: 0,
            dead_bytes: 0,
            scratch: Vec::new(),
            spare: None,
            recycle: false,
        }
    }

    /// The chunk with absolute number `number`, unless it was popped.
    fn chunk_by_number(&self, number: u64) -> Option<&Chunk> {
        number.checked_sub(self.first).and_then(|i| self.chunks.get(i as usize))
    }

    fn chunk(&self, pos: Pos) -> &Chunk {
        &self.chunks[((pos >> 32) - self.first) as usize]
    }

    fn view(&self, pos: Pos) -> View<'_> {
        decode_record(self.chunk(pos).data(), (pos & 0xffff_ffff) as usize)
    }

    fn key(&self, pos: Pos) -> &[u8] {
        key_value_at(self.chunk(pos).data(), (pos & 0xffff_ffff) as usize).0
    }

    /// Makes room for a record of `len` bytes in the last chunk and accounts it live; returns
    /// its position.
    fn reserve(&mut self, len: usize) -> Pos {
        let fits = self.chunks.back().is_some_and(|c| c.room() >= len);
        if !fits {
            self.chunks.push_back(Chunk::new(self.chunk_bytes().max(len), &mut self.spare));
        }
        let number = self.first + self.chunks.len() as u64 - 1;
        let chunk = self.chunks.back_mut().expect("a chunk was just ensured");
        chunk.live_bytes += len;
        self.live_bytes += len;
        pos_of(number, chunk.filled)
    }

    /// Appends an encoded record and returns its position.
    fn append_encoded(&mut self, record: &[u8]) -> Pos {
        let pos = self.reserve(record.len());
        self.chunks.back_mut().expect("reserved").push(record);
        pos
    }

    /// Appends a record, written straight into the chunk, and returns its position.
    fn append(&mut self, key: &[u8], value: &[u8], origin: Option<Origin>) -> Pos {
        let mut head = std::mem::take(&mut self.scratch);
        head.clear();
        encode_header(&mut head, if origin.is_some() { KIND_PENDING } else { KIND_LIVE }, key, value);
        let header_len = head.len();
        if let Some(origin) = origin {
            encode_origin(&mut head, origin);
        }
        let pos = self.reserve(head.len() + key.len() + value.len());
        let chunk = self.chunks.back_mut().expect("reserved");
        chunk.push(&head[..header_len]);
        chunk.push(key);
        chunk.push(value);
        chunk.push(&head[header_len..]);
        self.scratch = head;
        pos
    }

    /// Marks the record at `pos` dead and returns its kind; frees its chunk when nothing in it
    /// is live any more.
    fn kill(&mut self, pos: Pos) -> u8 {
        let View { kind, len, .. } = self.view(pos);
        let index = ((pos >> 32) - self.first) as usize;
        let chunk = &mut self.chunks[index];
        chunk.mark_dead((pos & 0xffff_ffff) as usize);
        debug_assert!(chunk.live_bytes >= len);
        chunk.live_bytes -= len;
        self.live_bytes -= len;
        self.dead_bytes += len;
        if chunk.live_bytes == 0 {
            // Everything written to this chunk is garbage now: give its memory back.
            self.dead_bytes -= chunk.filled;
            let map = chunk.free();
            if self.recycle && self.spare.is_none() {
                self.spare = map; // compaction is about to need a chunk
            }
            while self.chunks.front().is_some_and(Chunk::is_freed) {
                self.chunks.pop_front();
                self.first += 1;
            }
        }
        kind
    }

    /// The size of the next chunk.
    fn chunk_bytes(&self) -> usize {
        self.fixed_chunk_bytes
            .unwrap_or_else(|| (self.live_bytes / 64).next_power_of_two().clamp(MIN_CHUNK_BYTES, CHUNK_BYTES))
    }

    fn needs_compaction(&self) -> bool {
        self.dead_bytes > self.chunk_bytes() && self.dead_bytes > self.live_bytes / GARBAGE_RATIO_MAX
    }

    /// Bytes written to chunks still mapped (untouched capacity is not resident).
    fn memory_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.filled).sum::<usize>() + self.chunks.capacity() * std::mem::size_of::<Chunk>()
    }
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
    table: HashTable<Pos>,
    arena: Arena,
    hasher: FixedState,
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
    pub fn new() -> Self {
        Self::with_arena(Arena::new(None))
    }

    /// An empty store whose arena grows in chunks of a fixed `chunk_bytes` (by default chunks
    /// grow with the store, see [`CHUNK_BYTES`]). Tiny chunks make compaction observable in
    /// tests; each chunk is a memory map of its own, so a size below the page size wastes memory.
    pub fn with_chunk_bytes(chunk_bytes: usize) -> Self {
        assert!(chunk_bytes >= 64, "a chunk must hold at least a small record");
        Self::with_arena(Arena::new(Some(chunk_bytes)))
    }

    fn with_arena(arena: Arena) -> Self {
        ConfigStore { table: HashTable::new(), arena, hasher: FixedState::with_seed(INDEX_SEED) }
    }

    /// A pre-seeded store (CFG-05): the test entry point.
    pub fn of<K: Into<String>>(entries: impl IntoIterator<Item = (K, Config)>) -> Result<Self, EncodeError> {
        let mut store = ConfigStore::new();
        for (key, config) in entries {
            store.put(&key.into(), &config)?;
        }
        Ok(store)
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    fn find(&self, key: &[u8]) -> Option<Pos> {
        let arena = &self.arena;
        self.table.find(self.hash(key), |&pos| arena.key(pos) == key).copied()
    }

    /// The config for `key`, freshly decoded: mutating it never touches the store (CFG-02).
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
    pub fn get_bytes(&self, key: &str) -> Option<&[u8]> {
        let pos = self.find(key.as_bytes())?;
        let view = self.arena.view(pos);
        debug_assert_eq!(view.kind, KIND_LIVE, "pending entries never escape the bootstrap");
        Some(view.value)
    }

    /// Whether `key` has a config.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key.as_bytes()).is_some()
    }

    /// Number of configs.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// True when the store is empty.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Every key, sorted (deterministic, whatever the table layout).
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> =
            self.table.iter().map(|&pos| String::from_utf8_lossy(self.arena.key(pos)).into_owned()).collect();
        keys.sort_unstable();
        keys
    }

    /// Heap bytes held by the store (arena chunks and index), for the size contract.
    pub fn memory_bytes(&self) -> usize {
        self.arena.memory_bytes() + self.table.allocation_size()
    }

    /// Stores `config` under `key`, re-encoded to canonical JSON (CFG-03). The config machinery
    /// calls this; a stage holds the store read-only.
    pub fn put(&mut self, key: &str, config: &Config) -> Result<(), EncodeError> {
        let mut bytes = Vec::with_capacity(128);
        json::write_object(config.raw(), &mut bytes)?;
        self.insert(key.as_bytes(), &bytes, None);
        Ok(())
    }

    /// Stores bytes already known to be a canonical JSON object.
    fn put_canonical(&mut self, key: &str, bytes: &[u8]) {
        debug_assert_eq!(json::check_canonical_object(bytes), Ok(true));
        self.insert(key.as_bytes(), bytes, None);
    }

    /// Stores a raw value: canonical bytes as they are (the fast path: nothing is parsed),
    /// anything else parsed and re-encoded. Errors when the bytes are not a JSON object.
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
    pub fn delete(&mut self, key: &str) -> bool {
        self.remove(key.as_bytes()).is_some()
    }

    /// Removes `key`; returns the kind of the removed record.
    fn remove(&mut self, key: &[u8]) -> Option<u8> {
        let hash = self.hash(key);
        let arena = &self.arena;
        let (pos, _) = self.table.find_entry(hash, |&pos| arena.key(pos) == key).ok()?.remove();
        let kind = self.arena.kill(pos);
        self.maybe_compact();
        Some(kind)
    }

    /// Inserts or replaces; returns the kind of the replaced record, if any. One probe.
    fn insert(&mut self, key: &[u8], value: &[u8], origin: Option<Origin>) -> Option<u8> {
        let new = self.arena.append(key, value, origin);
        let hash = self.hash(key);
        let arena = &self.arena;
        let hasher = &self.hasher;
        let old = match self.table.entry(hash, |&pos| arena.key(pos) == key, |&pos| hasher.hash_one(arena.key(pos))) {
            hashbrown::hash_table::Entry::Occupied(mut slot) => Some(std::mem::replace(slot.get_mut(), new)),
            hashbrown::hash_table::Entry::Vacant(slot) => {
                slot.insert(new);
                None
            }
        };
        let replaced = old.map(|old| self.arena.kill(old));
        self.maybe_compact();
        replaced
    }

    /// Rewrites the record at `pos` (which the table holds for its key) as a live record with
    /// the same key and value: a pending bootstrap record becomes a stored entry.
    fn promote(&mut self, pos: Pos, scratch: &mut Vec<u8>) {
        let view = self.arena.view(pos);
        let hash = self.hash(view.key);
        let key_len = view.key.len();
        scratch.clear();
        scratch.extend_from_slice(view.key);
        scratch.extend_from_slice(view.value);
        let new = self.arena.append(&scratch[..key_len], &scratch[key_len..], None);
        *self.table.find_mut(hash, |&p| p == pos).expect("a promoted record is in the table") = new;
        self.arena.kill(pos);
        self.maybe_compact();
    }

    /// Rewrites live records into fresh chunks once garbage is large, freeing each old chunk as
    /// soon as it has been walked, so the peak stays one chunk above the live size.
    ///
    /// Records move in batches of old chunks. A batch is copied in log order, which makes the
    /// list of old positions sorted; one sequential pass over the index then repoints every slot
    /// of the batch through a binary search of that (cache-sized) list. Looking each moved key
    /// up in the index instead costs two cache misses per record, which is what dominated.
    fn maybe_compact(&mut self) {
        if !self.arena.needs_compaction() {
            return;
        }
        let first = self.arena.first;
        let end = first + self.arena.chunks.len() as u64;
        // Seal the current tail so moved records land in new chunks, after `end`.
        self.arena.chunks.push_back(Chunk { map: None, filled: 0, live_bytes: 0 });
        self.arena.recycle = true;
        let mut record = Vec::new();
        let mut moved_from: Vec<Pos> = Vec::new();
        let mut moved_to: Vec<Pos> = Vec::new();
        let mut number = first;
        while number < end {
            let batch_first = number;
            moved_from.clear();
            moved_to.clear();
            while number < end && moved_from.len() < COMPACTION_BATCH_RECORDS {
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
                    record.extend_from_slice(&chunk.data()[(pos & 0xffff_ffff) as usize..offset]);
                    moved_from.push(pos);
                    moved_to.push(self.arena.append_encoded(&record));
                    self.arena.kill(pos);
                }
                number += 1;
            }
            let batch = batch_first..number;
            let mut repointed = 0;
            for slot in self.table.iter_mut() {
                if batch.contains(&(*slot >> 32)) {
                    let i = moved_from.binary_search(slot).expect("every live record of a batch moved");
                    *slot = moved_to[i];
                    repointed += 1;
                }
            }
            assert_eq!(repointed, moved_from.len(), "the index holds exactly the live records");
        }
        self.arena.recycle = false;
        self.arena.spare = None;
        debug_assert!(self.arena.dead_bytes <= self.arena.chunk_bytes().max(self.arena.live_bytes));
    }
}

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
#[derive(Clone, Debug)]
pub struct Survivor {
    /// The decoded wire key.
    pub key: String,
    /// The record as it was read (key and value bytes, position, timestamp).
    pub record: RawRecord,
}

impl ConfigBootstrap {
    /// An empty bootstrap.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty bootstrap building a store with the given chunk size
    /// (see [`ConfigStore::with_chunk_bytes`]).
    pub fn with_chunk_bytes(chunk_bytes: usize) -> Self {
        ConfigBootstrap { store: ConfigStore::with_chunk_bytes(chunk_bytes), ..Self::default() }
    }

    /// This bootstrap for a stage that does not enrich: canonical values are stored as they
    /// are offered, and [`next_survivor`](Self::next_survivor) yields only the survivors whose
    /// values still need a decision (not canonical: parse, re-encode, or the policy).
    ///
    /// # Panics
    /// When records were already offered.
    pub fn without_enrichment(mut self) -> Self {
        assert!(self.store.is_empty(), "choose the mode before offering records");
        self.settle_canonical = true;
        self
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
    pub fn offer(
        &mut self,
        record: &RawRecord,
        policy: &dyn InvalidMessagePolicy,
        observer: &dyn Observer,
    ) -> Result<(), PolicyError> {
        let key = match std::str::from_utf8(record.key.as_deref().unwrap_or_default()) {
            Ok(key) => key,
            Err(source) => {
                // Skipped (or raised): not applied, not even as a deletion (INV-17).
                let error = InvalidMessageError::new(Part::Key, record, source.into());
                return wire::mediate(policy, observer, error).map(|_| ());
            }
        };
        if record.key.is_none() {
            tracing::warn!(topic = %record.topic, partition = record.partition, offset = record.offset,
                "config record without a key: applied under the empty key");
        }
        if wire::is_tombstone(record.value.as_deref()) {
            if self.store.remove(key.as_bytes()).is_some_and(|kind| kind == KIND_PENDING) {
                self.pending -= 1;
            }
            return Ok(());
        }
        let value = record.value.as_deref().expect("not a tombstone, so a value is present");
        let origin = if self.settle_canonical && json::check_canonical_object(value) == Ok(true) {
            None
        } else {
            Some(Origin {
                topic: self.topic_index(&record.topic),
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
    pub fn put(&mut self, key: &str, config: &Config) -> Result<(), EncodeError> {
        self.store.put(key, config)
    }

    /// Stores a survivor's value bytes, canonicalised (see [`ConfigStore::put_bytes`]).
    pub fn put_bytes(&mut self, key: &str, value: &[u8]) -> Result<(), DecodeError> {
        self.store.put_bytes(key, value)
    }

    /// Decides a survivor without enrichment: the value through the policy (skip leaves the key
    /// absent, substitute stores the substitute), the fast path for canonical bytes. Returns
    /// whether the key was stored.
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
        match wire::decode_value_with(&survivor.record, policy, observer)? {
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
    pub fn finish(self) -> ConfigStore {
        assert_eq!(self.pending, 0, "bootstrap finished with undecided survivors");
        self.store
    }

    /// Heap bytes held so far.
    pub fn memory_bytes(&self) -> usize {
        self.store.memory_bytes()
    }
}

/// Decodes a drained config record (CFG-20): `None` when the policy skipped it, the key with no
/// value for a tombstone, else the key and the decoded (or substituted) value.
pub fn decode_config_update(
    record: &RawRecord,
    policy: &dyn InvalidMessagePolicy,
    observer: &dyn Observer,
) -> Result<Option<(String, Option<Map>)>, PolicyError> {
    let Some(key) = wire::decode_key_with(record, policy, observer)? else {
        return Ok(None);
    };
    if record.key.is_none() {
        tracing::warn!(topic = %record.topic, partition = record.partition, offset = record.offset,
            "config record without a key: applied under the empty key");
    }
    if wire::is_tombstone(record.value.as_deref()) {
        return Ok(Some((key, None)));
    }
    Ok(wire::decode_value_with(record, policy, observer)?.map(|map| (key, Some(map))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observer::{InvalidOutcome, NoopObserver, Observed, RecordingObserver};
    use crate::wire::{InvalidMessageAction, InvalidMessageError, Part, RaisePolicy};

    fn record(topic: &str, offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> RawRecord {
        RawRecord {
            topic: Arc::from(topic),
            partition: 0,
            offset,
            timestamp_ms: Some(offset),
            key: key.map(Bytes::copy_from_slice),
            value: value.map(Bytes::copy_from_slice),
            headers: Vec::new(),
        }
    }

    fn bootstrap(
        records: &[RawRecord],
        policy: &dyn InvalidMessagePolicy,
        observer: &dyn Observer,
    ) -> Result<(ConfigStore, Vec<Survivor>), PolicyError> {
        let mut b = ConfigBootstrap::new();
        for r in records {
            b.offer(r, policy, observer)?;
        }
        let mut survivors = Vec::new();
        while let Some(s) = b.next_survivor() {
            b.apply_unenriched(&s, policy, observer)?;
            survivors.push(s);
        }
        let store = b.finish();
        // The in-place fast path decides the same way.
        let mut fast = ConfigBootstrap::with_chunk_bytes(64);
        for r in records {
            fast.offer(r, policy, observer)?;
        }
        let fast = fast.finish_unenriched(policy, observer)?;
        // And so does a bootstrap that settles canonical values as they are offered.
        let mut settled = ConfigBootstrap::with_chunk_bytes(64).without_enrichment();
        for r in records {
            settled.offer(r, policy, observer)?;
        }
        let settled = settled.finish_unenriched(policy, observer)?;
        for other in [&fast, &settled] {
            assert_eq!(other.keys(), store.keys());
            for k in store.keys() {
                assert_eq!(other.get_bytes(&k), store.get_bytes(&k));
            }
        }
        Ok((store, survivors))
    }

    #[test]
    fn cfg_01_one_key_space_across_topics_and_cfg_12_compaction() {
        let records = [
            record("a", 0, Some(b"gone"), Some(br#"{"n":1}"#)),
            record("a", 1, Some(b"kept"), Some(br#"{"n":2}"#)),
            record("a", 2, Some(b"gone"), None),
            record("b", 0, Some(b"far"), Some(br#"{ "n" : 3 }"#)),
            record("b", 1, Some(b"k1"), Some(br#"{"a":1}"#)),
            record("b", 2, Some(b"k1"), Some(br#"{"a":2}"#)),
            record("b", 3, Some(b"empty"), Some(br#"{"x":1}"#)),
            record("b", 4, Some(b"empty"), Some(b"")),
            record("b", 5, Some(b"braces"), Some(br#"{"x":1}"#)),
            record("b", 6, Some(b"braces"), Some(b"{}")),
            record("b", 7, Some(b"spaced"), Some(b"{ }")),
        ];
        let (store, survivors) = bootstrap(&records, &RaisePolicy, &RecordingObserver::default()).unwrap();
        assert_eq!(store.keys(), ["far", "k1", "kept", "spaced"]);
        assert_eq!(store.get_bytes("far"), Some(&br#"{"n":3}"#[..]));
        assert_eq!(store.get_bytes("k1"), Some(&br#"{"a":2}"#[..]));
        // `{ }` is not a tombstone (exact bytes), and stores as `{}` (what Python stores too).
        assert_eq!(store.get_bytes("spaced"), Some(&b"{}"[..]));
        // CFG-14: the surviving record, with its position.
        let k1 = survivors.iter().find(|s| s.key == "k1").unwrap();
        assert_eq!((&*k1.record.topic, k1.record.offset, k1.record.timestamp_ms), ("b", 2, Some(2)));
    }

    #[test]
    fn inv_19_only_the_survivor_value_is_decoded() {
        let observer = RecordingObserver::default();
        let records =
            [record("c", 0, Some(b"k"), Some(b"{not json")), record("c", 1, Some(b"k"), Some(br#"{"ok":1}"#))];
        let (store, _) = bootstrap(&records, &RaisePolicy, &observer).unwrap();
        assert_eq!(store.get_bytes("k"), Some(&br#"{"ok":1}"#[..]));
        assert!(observer.events().is_empty());
        let records =
            [record("c", 0, Some(b"k"), Some(br#"{"ok":1}"#)), record("c", 1, Some(b"k"), Some(b"{not json"))];
        let err = bootstrap(&records, &RaisePolicy, &observer).unwrap_err();
        let PolicyError::Raised(e) = err else { panic!("raised") };
        assert_eq!((e.part(), e.offset()), (Part::Value, 1));
        assert_eq!(
            observer.events(),
            [Observed::MessageInvalid { topic: "c".into(), outcome: InvalidOutcome::Raised }]
        );
    }

    #[test]
    fn inv_19_every_key_is_decoded_and_inv_17_skipped_tombstone_is_not_applied() {
        let seen = std::sync::Mutex::new(Vec::new());
        let skip = |e: &InvalidMessageError| {
            seen.lock().unwrap().push((e.part(), e.offset()));
            InvalidMessageAction::Skip
        };
        let records = [
            record("c", 0, Some(b"\xff\xfe"), Some(br#"{"a":1}"#)),
            record("c", 1, Some(b"k"), Some(br#"{"a":1}"#)),
            record("c", 2, Some(b"\xff"), None),
            record("c", 3, Some(b"v"), Some(b"[1]")),
        ];
        let (store, _) = bootstrap(&records, &skip, &RecordingObserver::default()).unwrap();
        assert_eq!(store.keys(), ["k"]);
        // All three bootstrap paths (see `bootstrap`) asked the policy the same questions.
        let seen = seen.lock().unwrap();
        assert_eq!(seen[..3], [(Part::Key, 0), (Part::Key, 2), (Part::Value, 3)]);
        assert_eq!(seen.len(), 9);
        assert_eq!(seen[3..6], seen[..3]);
        assert_eq!(seen[6..], seen[..3]);
    }

    #[test]
    fn inv_13_substitute_and_inv_14_key_substitution_is_refused() {
        let observer = RecordingObserver::default();
        let substitute = |_: &InvalidMessageError| {
            let crate::json::Value::Object(map) = crate::json::parse(r#"{"id":"recovered"}"#).unwrap() else {
                unreachable!()
            };
            InvalidMessageAction::Substitute(crate::Record::wrap(map))
        };
        let (store, _) = bootstrap(&[record("c", 0, Some(b"k"), Some(b"42"))], &substitute, &observer).unwrap();
        assert_eq!(store.get_bytes("k"), Some(&br#"{"id":"recovered"}"#[..]));
        let err = bootstrap(&[record("c", 5, Some(b"\xff"), Some(b"{}"))], &substitute, &observer).unwrap_err();
        assert!(matches!(err, PolicyError::KeySubstitution(_)));
        assert!(err.to_string().contains("state identity") && err.to_string().contains("c/0/5"), "{err}");
    }

    #[test]
    fn settled_bootstrap_leaves_only_non_canonical_survivors_pending() {
        let records = [
            record("c", 0, Some(b"a"), Some(br#"{"v":1}"#)), // canonical, superseded below
            record("c", 1, Some(b"a"), Some(br#"{ "v": 2 }"#)), // pending survivor
            record("c", 2, Some(b"b"), Some(br#"{ "v": 3 }"#)), // pending, then settled over
            record("c", 3, Some(b"b"), Some(br#"{"v":4}"#)),
            record("c", 4, Some(b"c"), Some(br#"{ "v": 5 }"#)), // pending, then deleted
            record("c", 5, Some(b"c"), Some(b"")),
            record("c", 6, Some(b"d"), Some(br#"{"v":6}"#)), // canonical, deleted
            record("c", 7, Some(b"d"), None),
        ];
        let mut b = ConfigBootstrap::with_chunk_bytes(64).without_enrichment();
        for r in &records {
            b.offer(r, &RaisePolicy, &NoopObserver).unwrap();
        }
        let survivor = b.next_survivor().expect("one undecided survivor");
        assert_eq!((survivor.key.as_str(), survivor.record.offset), ("a", 1));
        assert!(b.apply_unenriched(&survivor, &RaisePolicy, &NoopObserver).unwrap());
        assert!(b.next_survivor().is_none());
        let store = b.finish();
        assert_eq!(store.keys(), ["a", "b"]);
        assert_eq!(store.get_bytes("a"), Some(&br#"{"v":2}"#[..]));
        assert_eq!(store.get_bytes("b"), Some(&br#"{"v":4}"#[..]));
    }

    #[test]
    fn cfg_02_to_05_store_semantics() {
        let mut store = ConfigStore::of([("a", Config::new())]).unwrap();
        assert!(store.contains_key("a") && store.len() == 1);
        store.put_bytes("a", br#"{"v":1}"#).unwrap();
        store.put_bytes("a", br#"{"v":2}"#).unwrap();
        assert_eq!(store.get_bytes("a"), Some(&br#"{"v":2}"#[..]));
        assert!(store.delete("a"));
        assert!(!store.delete("a"));
        assert!(store.is_empty());
        assert!(store.put_bytes("b", b"[1]").is_err());
        // CFG-04: a corrupt stored value is an error, never an empty config.
        store.insert(b"bad", b"{not json", None);
        assert!(store.get("bad").is_err());
    }

    #[test]
    fn compaction_reclaims_garbage_and_keeps_every_entry() {
        let mut store = ConfigStore::new();
        let value = format!(r#"{{"pad":"{}"}}"#, "x".repeat(500));
        for round in 0..10 {
            for k in 0..10_000 {
                store.put_bytes(&format!("key-{k}"), value.replace('x', &(round % 10).to_string()).as_bytes()).unwrap();
            }
        }
        assert_eq!(store.len(), 10_000);
        let live = 10_000 * (value.len() + 12);
        assert!(
            store.arena.dead_bytes <= CHUNK_BYTES.max(live / 4) + CHUNK_BYTES,
            "garbage {}",
            store.arena.dead_bytes
        );
        // Live bytes, at most a quarter more of garbage, a chunk of slack, and the index.
        assert!(
            store.memory_bytes() < live + live / 4 + 3 * CHUNK_BYTES,
            "memory {} for {live} live",
            store.memory_bytes()
        );
        for k in 0..10_000 {
            let got = store.get_bytes(&format!("key-{k}")).unwrap();
            assert_eq!(got, value.replace('x', "9").as_bytes());
        }
    }
}
