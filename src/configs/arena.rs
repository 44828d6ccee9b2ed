//! The store's memory: records back to back in chunks of memory maps, and their encoding.

#![allow(unused_imports)]
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
///
/// ```
/// use flechtwerk::testing::{CHUNK_BYTES, MIN_CHUNK_BYTES};
/// assert!(MIN_CHUNK_BYTES < CHUNK_BYTES && CHUNK_BYTES == 1 << 20);
/// ```
pub const CHUNK_BYTES: usize = 1 << 20;

/// Smallest arena chunk of a default store.
///
/// ```
/// // A store that never compacts below a chunk: bootstrap a small store with a small chunk.
/// let bootstrap = flechtwerk::testing::ConfigBootstrap::with_chunk_bytes(flechtwerk::testing::MIN_CHUNK_BYTES);
/// assert_eq!(bootstrap.finish().len(), 0);
/// ```
pub const MIN_CHUNK_BYTES: usize = 64 << 10;

/// Compaction runs once garbage exceeds 1/`GARBAGE_RATIO_MAX` of live bytes (and one chunk, so
/// small stores never churn). Each run copies the live bytes once, so the amortised cost is
/// `GARBAGE_RATIO_MAX` bytes copied per byte of garbage reclaimed.
pub(super) const GARBAGE_RATIO_MAX: usize = 10; // garbage > live / 10

/// Records moved per pass over the index during compaction: the batch's old and new positions
/// (16 bytes a record) stay cache-sized, and a 1M-entry store takes a handful of passes. (Unit
/// tests use a handful of records, so that a compaction of a small store takes several batches.)
pub(super) const COMPACTION_BATCH_RECORDS: usize = if cfg!(test) { 5 } else { 1 << 16 };

/// Seed of the index hash. Fixed so that nothing about the table depends on process randomness
/// (simulations replay byte for byte); nothing observable iterates the table unsorted.
pub(super) const INDEX_SEED: u64 = 0x666c_6563_6874_7765;

/// Position of a record in the arena: its chunk's absolute number and its byte offset in the
/// chunk, packed in one `u64` (chunk in the high 32 bits, offset in the low 32), so that the
/// index stores 8 bytes a record and positions order chunk-major.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Pos(u64);

impl Pos {
    #[inline]
    pub(super) fn new(chunk: u64, offset: usize) -> Pos {
        debug_assert!(offset < (1 << 32) && chunk < (1 << 32), "chunk {chunk}, offset {offset}");
        Pos((chunk << 32) | offset as u64)
    }

    /// The absolute number of the record's chunk.
    #[inline]
    pub(super) fn chunk(self) -> u64 {
        self.0 >> 32
    }

    /// The record's byte offset in its chunk.
    #[inline]
    pub(super) fn offset(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }
}

pub(super) fn pos_of(chunk: u64, offset: usize) -> Pos {
    Pos::new(chunk, offset)
}

pub(super) const KIND_LIVE: u8 = 0;
pub(super) const KIND_PENDING: u8 = 1;
/// Set on the kind byte of a killed record: walks (compaction, the bootstrap cursor) tell dead
/// from live without a table lookup. The low bits keep the layout, so a dead record can still
/// be stepped over.
pub(super) const DEAD_BIT: u8 = 0x80;
/// A one-byte filler (always dead): what is left of a record overwritten in place by a record
/// one or two bytes shorter, too little for a filler record's header.
pub(super) const KIND_PAD: u8 = 2;

/// Where a pending (bootstrap) record came from: enough to name it in an
/// [`InvalidMessageError`](crate::wire::InvalidMessageError).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Origin {
    pub(super) topic: u32,
    pub(super) partition: i32,
    pub(super) offset: i64,
    pub(super) timestamp_ms: Option<i64>,
}

/// One decoded record.
pub(super) struct View<'a> {
    pub(super) kind: u8,
    pub(super) key: &'a [u8],
    pub(super) value: &'a [u8],
    pub(super) origin: Option<Origin>,
    pub(super) len: usize,
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
pub(super) fn get_varint(bytes: &[u8], at: &mut usize) -> u64 {
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

pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(super) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A record's layout is `[kind][key len][value len][key][value][origin, if pending]`. The
/// origin goes last so that reading a key (every hash probe) never parses it.
///
/// Writes the header (`[kind][key len][value len]`) of a record.
pub(super) fn encode_header(out: &mut Vec<u8>, kind: u8, key: &[u8], value: &[u8]) {
    out.push(kind);
    put_varint(out, key.len() as u64);
    put_varint(out, value.len() as u64);
}

/// The trailer of a pending record: its origin.
pub(super) fn encode_origin(out: &mut Vec<u8>, o: Origin) {
    put_varint(out, u64::from(o.topic));
    put_varint(out, zigzag(i64::from(o.partition)));
    put_varint(out, zigzag(o.offset));
    put_varint(out, o.timestamp_ms.map_or(0, |t| zigzag(t) + 1));
}

/// The key and value of the record at `at`, and where the value ends.
#[inline]
pub(super) fn key_value_at(bytes: &[u8], at: usize) -> (&[u8], &[u8], usize) {
    let mut i = at + 1;
    let key_len = get_varint(bytes, &mut i) as usize;
    let value_len = get_varint(bytes, &mut i) as usize;
    let value_end = i + key_len + value_len;
    (&bytes[i..i + key_len], &bytes[i + key_len..value_end], value_end)
}

pub(super) fn decode_record(bytes: &[u8], at: usize) -> View<'_> {
    let kind = bytes[at];
    if kind == KIND_PAD | DEAD_BIT {
        return View { kind, key: &[], value: &[], origin: None, len: 1 };
    }
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

/// Fills `out` with dead bytes a walk steps over: pad bytes when it is too short for a record
/// header (one or two bytes), else one dead record with an empty key whose value covers the
/// rest (its value length written as a varint of whatever width makes the record exactly fill
/// `out`: a varint may carry redundant high groups, which [`get_varint`] reads the same).
pub(super) fn encode_filler(out: &mut [u8]) {
    let n = out.len();
    if n < 3 {
        out.fill(KIND_PAD | DEAD_BIT);
        return;
    }
    // [kind][key len 0][value len: `width` bytes][value]
    let width = (1..=9).find(|&w| (n - 2 - w) >> (7 * w).min(63) == 0).expect("a width always fits");
    let value_len = (n - 2 - width) as u64;
    out[0] = KIND_LIVE | DEAD_BIT;
    out[1] = 0;
    for (i, byte) in out[2..2 + width].iter_mut().enumerate() {
        let group = ((value_len >> (7 * i)) & 0x7f) as u8;
        *byte = if i + 1 < width { group | 0x80 } else { group };
    }
}

/// One arena chunk: an anonymous memory map, so a freed chunk returns to the OS at once. (Heap
/// chunks would not: glibc raises its mmap threshold after the first large free, serves later
/// chunks from the heap, and keeps freed heap memory resident, so RSS would stay at the peak.)
pub(super) struct Chunk {
    pub(super) map: Option<MmapMut>,
    /// Bytes the chunk may hold: at most its map's length (a reused map may be longer). Records
    /// start below it, which bounds the offsets the index packs.
    pub(super) capacity: usize,
    pub(super) filled: usize,
    pub(super) live_bytes: usize,
}

impl Chunk {
    /// A chunk of `capacity` bytes: the spare map when it is large enough (its pages are resident
    /// already: no page faults), else a fresh map.
    pub(super) fn new(capacity: usize, spare: &mut Option<MmapMut>) -> Self {
        let map = match spare.take() {
            Some(map) if map.len() >= capacity => map,
            _ => MmapMut::map_anon(capacity).expect("the config store could not map a chunk of memory"),
        };
        Chunk { map: Some(map), capacity, filled: 0, live_bytes: 0 }
    }

    /// The written part.
    pub(super) fn data(&self) -> &[u8] {
        self.map.as_deref().map_or(&[], |map| &map[..self.filled])
    }

    pub(super) fn room(&self) -> usize {
        if self.map.is_some() {
            self.capacity - self.filled
        } else {
            0
        }
    }

    pub(super) fn push(&mut self, bytes: &[u8]) {
        let map = self.map.as_mut().expect("appends go to a mapped chunk");
        map[self.filled..self.filled + bytes.len()].copy_from_slice(bytes);
        self.filled += bytes.len();
    }

    /// Writes `bytes` over already written bytes at `offset`.
    fn write_at(&mut self, offset: usize, bytes: &[u8]) {
        debug_assert!(offset + bytes.len() <= self.filled);
        let map = self.map.as_mut().expect("records live in mapped chunks");
        map[offset..offset + bytes.len()].copy_from_slice(bytes);
    }

    pub(super) fn is_freed(&self) -> bool {
        self.map.is_none()
    }

    pub(super) fn mark_dead(&mut self, offset: usize) {
        let map = self.map.as_mut().expect("records live in mapped chunks");
        debug_assert_eq!(map[offset] & DEAD_BIT, 0, "killed twice");
        map[offset] |= DEAD_BIT;
    }

    /// Takes the chunk's map away (to unmap or to reuse). The chunk reads as empty afterwards,
    /// so a walk over it (compaction, the bootstrap cursor) steps past it.
    pub(super) fn free(&mut self) -> Option<MmapMut> {
        self.filled = 0;
        self.map.take()
    }
}

/// An append-only log of records in chunks, with per-chunk live accounting.
pub(super) struct Arena {
    /// A fixed chunk size, or `None`: chunks grow with the store (see [`CHUNK_BYTES`]).
    pub(super) fixed_chunk_bytes: Option<usize>,
    pub(super) chunks: VecDeque<Chunk>,
    /// Absolute number of `chunks[0]`.
    pub(super) first: u64,
    pub(super) live_bytes: usize,
    /// Bytes held by dead records in chunks not yet freed.
    pub(super) dead_bytes: usize,
    /// Reused buffer for encoding one record.
    pub(super) scratch: Vec<u8>,
    /// While compacting: a freed chunk's map kept for the next new chunk, so moving records
    /// reuses resident pages instead of faulting fresh ones in. Released when compaction ends.
    pub(super) spare: Option<MmapMut>,
    pub(super) recycle: bool,
}

impl Arena {
    pub(super) fn new(fixed_chunk_bytes: Option<usize>) -> Self {
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
    pub(super) fn chunk_by_number(&self, number: u64) -> Option<&Chunk> {
        number.checked_sub(self.first).and_then(|i| self.chunks.get(i as usize))
    }

    pub(super) fn chunk(&self, pos: Pos) -> &Chunk {
        &self.chunks[(pos.chunk() - self.first) as usize]
    }

    pub(super) fn view(&self, pos: Pos) -> View<'_> {
        decode_record(self.chunk(pos).data(), pos.offset())
    }

    pub(super) fn key(&self, pos: Pos) -> &[u8] {
        key_value_at(self.chunk(pos).data(), pos.offset()).0
    }

    /// Makes room for a record of `len` bytes in the last chunk and accounts it live; returns
    /// its position.
    pub(super) fn reserve(&mut self, len: usize) -> Pos {
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
    pub(super) fn append_encoded(&mut self, record: &[u8]) -> Pos {
        let pos = self.reserve(record.len());
        self.chunks.back_mut().expect("reserved").push(record);
        pos
    }

    /// A record's header and origin trailer, encoded into the reused scratch buffer (taken: give
    /// it back), and the header's length (the trailer follows it in the buffer).
    fn head(&mut self, key: &[u8], value: &[u8], origin: Option<Origin>) -> (Vec<u8>, usize) {
        let mut head = std::mem::take(&mut self.scratch);
        head.clear();
        encode_header(&mut head, if origin.is_some() { KIND_PENDING } else { KIND_LIVE }, key, value);
        let header_len = head.len();
        if let Some(origin) = origin {
            encode_origin(&mut head, origin);
        }
        (head, header_len)
    }

    /// Appends a record, written straight into the chunk, and returns its position.
    pub(super) fn append(&mut self, key: &[u8], value: &[u8], origin: Option<Origin>) -> Pos {
        let (head, header_len) = self.head(key, value, origin);
        let pos = self.reserve(head.len() + key.len() + value.len());
        let chunk = self.chunks.back_mut().expect("reserved");
        chunk.push(&head[..header_len]);
        chunk.push(key);
        chunk.push(value);
        chunk.push(&head[header_len..]);
        self.scratch = head;
        pos
    }

    /// Replaces the record at `pos` (live or pending) by a record of the same key, written where
    /// it is, when the new one is no longer: the bytes left over become a dead filler, so
    /// updating a key to a value of the same size or smaller makes no garbage beyond them and
    /// its position (what the index holds) stays. Returns the kind of the replaced record, or
    /// `None`, changing nothing, when the new record does not fit.
    pub(super) fn overwrite(&mut self, pos: Pos, key: &[u8], value: &[u8], origin: Option<Origin>) -> Option<u8> {
        let View { kind, len: old_len, .. } = self.view(pos);
        debug_assert_eq!(self.key(pos), key, "an overwrite keeps the key");
        let (head, header_len) = self.head(key, value, origin);
        let new_len = head.len() + key.len() + value.len();
        let replaced = (new_len <= old_len).then(|| {
            let index = (pos.chunk() - self.first) as usize;
            let chunk = &mut self.chunks[index];
            let mut at = pos.offset();
            for part in [&head[..header_len], key, value, &head[header_len..]] {
                chunk.write_at(at, part);
                at += part.len();
            }
            let filler = old_len - new_len;
            if filler > 0 {
                let map = chunk.map.as_mut().expect("records live in mapped chunks");
                encode_filler(&mut map[at..at + filler]);
                chunk.live_bytes -= filler;
                self.live_bytes -= filler;
                self.dead_bytes += filler;
            }
            kind
        });
        self.scratch = head;
        replaced
    }

    /// Marks the record at `pos` dead and returns its kind; frees its chunk when nothing in it
    /// is live any more.
    pub(super) fn kill(&mut self, pos: Pos) -> u8 {
        let View { kind, len, .. } = self.view(pos);
        let index = (pos.chunk() - self.first) as usize;
        let chunk = &mut self.chunks[index];
        chunk.mark_dead(pos.offset());
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

    /// The largest offset a record can start at, plus one: chunks are at most this large, except
    /// a chunk made for one record larger than that (which starts at offset 0).
    pub(super) fn max_chunk_bytes(&self) -> usize {
        self.fixed_chunk_bytes.unwrap_or(CHUNK_BYTES)
    }

    /// The size of the next chunk.
    pub(super) fn chunk_bytes(&self) -> usize {
        self.fixed_chunk_bytes
            .unwrap_or_else(|| (self.live_bytes / 64).next_power_of_two().clamp(MIN_CHUNK_BYTES, CHUNK_BYTES))
    }

    pub(super) fn needs_compaction(&self) -> bool {
        self.dead_bytes > self.chunk_bytes() && self.dead_bytes > self.live_bytes / GARBAGE_RATIO_MAX
    }

    /// Bytes written to chunks still mapped (untouched capacity is not resident).
    pub(super) fn memory_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.filled).sum::<usize>() + self.chunks.capacity() * std::mem::size_of::<Chunk>()
    }
}

#[cfg(test)]
impl Arena {
    /// Walks every mapped chunk record by record and checks the accounting: each walk ends
    /// exactly where the chunk's written part does, a chunk's live bytes are its records without
    /// the dead bit, the arena's live and dead bytes are the sums (dead: written but not live).
    /// Returns the live records' positions.
    pub(super) fn check_accounting(&self) -> Vec<Pos> {
        let mut live = Vec::new();
        let (mut live_total, mut dead_total) = (0, 0);
        for (i, chunk) in self.chunks.iter().enumerate() {
            let number = self.first + i as u64;
            let (mut at, mut chunk_live) = (0, 0);
            while at < chunk.filled {
                let view = decode_record(chunk.data(), at);
                if view.kind & DEAD_BIT == 0 {
                    chunk_live += view.len;
                    live.push(pos_of(number, at));
                }
                at += view.len;
            }
            assert_eq!(at, chunk.filled, "chunk {number}: the walk must end where the chunk does");
            assert_eq!(chunk_live, chunk.live_bytes, "chunk {number}: live bytes");
            live_total += chunk_live;
            dead_total += chunk.filled - chunk_live;
        }
        assert_eq!(live_total, self.live_bytes, "the arena's live bytes");
        assert_eq!(dead_total, self.dead_bytes, "the arena's dead bytes");
        live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filler of any length reads as one dead stretch of exactly that length, whatever
    /// follows it.
    #[test]
    fn a_filler_is_stepped_over_exactly() {
        let lengths = (1..=2_100).chain([16_383, 16_384, 16_385, 16_386, 2_097_155, 2_097_156, 3 << 20]);
        for n in lengths {
            let mut bytes = vec![0xAA; n + 4];
            encode_filler(&mut bytes[..n]);
            let mut at = 0;
            while at < n {
                let view = decode_record(&bytes, at);
                assert_ne!(view.kind & DEAD_BIT, 0, "filler of {n}: dead");
                at += view.len;
            }
            assert_eq!(at, n, "filler of {n} bytes");
        }
    }
}
