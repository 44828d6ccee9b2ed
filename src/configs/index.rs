//! The index over the arena: 4-byte slots while every live position fits in 32 bits, 8-byte
//! slots after.
//!
//! A narrow slot holds a record's chunk number modulo a power of two `2^chunk_bits` in its high
//! bits and the byte offset in its low `offset_bits` (enough for the largest chunk a store
//! makes). A slot is decoded against a base chunk number that no live record lies below (the
//! arena's first chunk; during a compaction batch, the batch's first chunk), as the one chunk
//! number in `[base, base + 2^chunk_bits)` with those low bits. That is unambiguous while every
//! chunk that holds a record the index points to lies within that span of the base: checked
//! before each position enters the index. When a position would not fit (a store whose live
//! chunks span more than `2^chunk_bits` chunks: more than 4 GiB with the default 1 MiB chunks),
//! the index switches once, for good, to 8-byte slots holding absolute positions. A position is
//! never stored in a form that could decode to another one.
//!
//! Outside this module every position is absolute ([`Pos`]): compaction's sorted batch search
//! compares decoded positions, so a wrap of the chunk numbers' low bits changes nothing there.

use std::ops::Range;

use foldhash::fast::FixedState;
use hashbrown::HashTable;
use std::hash::BuildHasher;

use super::arena::{Arena, Pos};

/// How positions are packed into 32 bits for a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Narrow {
    offset_bits: u32,
    chunk_bits: u32,
}

impl Narrow {
    /// The packing for a store whose chunks hold at most `max_chunk_bytes` bytes (records start
    /// below that offset), with at most `chunk_bits` bits for the chunk number; `None` when no
    /// chunk bit is left (chunks of 2 GiB and more: such a store starts wide).
    pub(super) fn for_chunks(max_chunk_bytes: usize, chunk_bits: u32) -> Option<Self> {
        let offset_bits = usize::BITS - max_chunk_bytes.saturating_sub(1).leading_zeros();
        let chunk_bits = chunk_bits.min(32u32.saturating_sub(offset_bits));
        (chunk_bits >= 1).then_some(Narrow { offset_bits, chunk_bits })
    }

    /// Number of consecutive chunks a narrow index can tell apart.
    pub(super) fn span(self) -> u64 {
        1 << self.chunk_bits
    }

    /// Whether `pos` can be stored narrow while `base` is the lowest chunk number in use.
    pub(super) fn fits(self, pos: Pos, base: u64) -> bool {
        (pos.offset() as u64) >> self.offset_bits == 0 && pos.chunk().checked_sub(base).is_some_and(|d| d < self.span())
    }

    pub(super) fn encode(self, pos: Pos) -> u32 {
        let chunk = pos.chunk() & (self.span() - 1);
        ((chunk << self.offset_bits) | pos.offset() as u64) as u32
    }

    pub(super) fn decode(self, slot: u32, base: u64) -> Pos {
        let low = u64::from(slot) >> self.offset_bits;
        let chunk = base + (low.wrapping_sub(base) & (self.span() - 1));
        Pos::new(chunk, (slot & ((1u32 << self.offset_bits) - 1)) as usize)
    }
}

enum Slots {
    Narrow(HashTable<u32>),
    Wide(HashTable<Pos>),
}

/// The open-addressing index: one slot per key, no stored hash, keys read from the arena.
pub(super) struct Index {
    slots: Slots,
    /// The narrow packing; `None` for a store that can only be wide.
    narrow: Option<Narrow>,
    pub(super) hasher: FixedState,
}

/// Runs `$body` with `$t` bound to the table (`$slots`: `&Slots` or `&mut Slots`) and
/// `$dec`/`$enc` to its slot codec, slots decoded against `$base`.
macro_rules! with_slots {
    ($slots:expr, $narrow:expr, $base:expr, |$t:ident, $dec:ident, $enc:ident| $body:expr) => {{
        let base: u64 = $base;
        let narrow: Option<Narrow> = $narrow;
        match $slots {
            Slots::Narrow($t) => {
                let layout = narrow.expect("a narrow index has a packing");
                let $dec = move |slot: u32| layout.decode(slot, base);
                #[allow(unused_variables)]
                let $enc = move |pos: Pos| layout.encode(pos);
                $body
            }
            Slots::Wide($t) => {
                let _ = (base, narrow);
                let $dec = |slot: Pos| slot;
                #[allow(unused_variables)]
                let $enc = |pos: Pos| pos;
                $body
            }
        }
    }};
}

impl Index {
    pub(super) fn new(narrow: Option<Narrow>, hasher: FixedState) -> Self {
        let slots = if narrow.is_some() { Slots::Narrow(HashTable::new()) } else { Slots::Wide(HashTable::new()) };
        Index { slots, narrow, hasher }
    }

    #[cfg(test)]
    pub(super) fn is_narrow(&self) -> bool {
        matches!(self.slots, Slots::Narrow(_))
    }

    pub(super) fn len(&self) -> usize {
        match &self.slots {
            Slots::Narrow(t) => t.len(),
            Slots::Wide(t) => t.len(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn allocation_size(&self) -> usize {
        match &self.slots {
            Slots::Narrow(t) => t.allocation_size(),
            Slots::Wide(t) => t.allocation_size(),
        }
    }

    /// Makes room for `additional` more keys.
    pub(super) fn reserve(&mut self, arena: &Arena, additional: usize) {
        let hasher = &self.hasher;
        with_slots!(&mut self.slots, self.narrow, arena.first, |t, dec, _enc| t
            .reserve(additional, |&s| hasher.hash_one(arena.key(dec(s)))))
    }

    pub(super) fn find(&self, arena: &Arena, hash: u64, key: &[u8]) -> Option<Pos> {
        with_slots!(&self.slots, self.narrow, arena.first, |t, dec, _enc| t
            .find(hash, |&s| arena.key(dec(s)) == key)
            .map(|&s| dec(s)))
    }

    /// Every position, in table order.
    pub(super) fn for_each(&self, arena: &Arena, mut f: impl FnMut(Pos)) {
        with_slots!(&self.slots, self.narrow, arena.first, |t, dec, _enc| t.iter().for_each(|&s| f(dec(s))))
    }

    /// Switches to wide slots unless `pos` fits narrow.
    fn ensure_fits(&mut self, arena: &Arena, pos: Pos) {
        if let (Slots::Narrow(_), Some(layout)) = (&self.slots, self.narrow) {
            if !layout.fits(pos, arena.first) {
                self.widen(arena, arena.first, None);
            }
        }
    }

    /// Adds a slot for a key the index does not hold (the caller looked it up), pointing at
    /// `pos`: no key is compared.
    pub(super) fn insert_new(&mut self, arena: &Arena, hash: u64, pos: Pos) {
        self.ensure_fits(arena, pos);
        let hasher = &self.hasher;
        with_slots!(&mut self.slots, self.narrow, arena.first, |t, dec, enc| {
            t.insert_unique(hash, enc(pos), |&s| hasher.hash_one(arena.key(dec(s))));
        })
    }

    /// Removes `key`'s slot; returns the position it held.
    pub(super) fn remove(&mut self, arena: &Arena, hash: u64, key: &[u8]) -> Option<Pos> {
        with_slots!(&mut self.slots, self.narrow, arena.first, |t, dec, _enc| t
            .find_entry(hash, |&s| arena.key(dec(s)) == key)
            .ok()
            .map(|e| dec(e.remove().0)))
    }

    /// Repoints the slot holding `old` (whose key hashes to `hash`) at `new`.
    pub(super) fn replace(&mut self, arena: &Arena, hash: u64, old: Pos, new: Pos) {
        self.ensure_fits(arena, new);
        with_slots!(&mut self.slots, self.narrow, arena.first, |t, dec, enc| {
            *t.find_mut(hash, |&s| dec(s) == old).expect("the replaced position is in the index") = enc(new);
        })
    }

    /// After a compaction batch: every slot pointing into the batch's chunks (whose records were
    /// copied from the sorted `moved.from` to `moved.to`) is repointed, in one pass over the
    /// table. Slots are decoded against the batch's first chunk: the batch's chunks may be freed
    /// and popped already, so the arena's first chunk may lie past the positions the slots still
    /// hold. Returns the number of slots repointed.
    pub(super) fn repoint(&mut self, arena: &Arena, moved: &Moved<'_>) -> usize {
        let (base, moved_to) = (moved.chunks.start, moved.to);
        if let (Slots::Narrow(_), Some(layout)) = (&self.slots, self.narrow) {
            // The slots the table holds now lie within the span of `base` (each entered checked
            // against a base no later than this one), so only the new positions need checking:
            // the last of them lies in the arena's last chunk, so if it fits, every slot does.
            if !moved_to.iter().all(|&pos| layout.fits(pos, base)) {
                return self.widen(arena, base, Some(moved));
            }
        }
        let mut repointed = 0;
        with_slots!(&mut self.slots, self.narrow, base, |t, dec, enc| {
            for slot in t.iter_mut() {
                let pos = dec(*slot);
                if moved.chunks.contains(&pos.chunk()) {
                    *slot = enc(moved_to[moved.index_of(pos)]);
                    repointed += 1;
                }
            }
        });
        repointed
    }

    /// Rebuilds the index with 8-byte slots, for good. Slots are decoded against `base`; with a
    /// compaction batch, the batch's slots are repointed on the way (their old records may be
    /// unmapped already, so they are hashed by their new ones). Returns the number repointed.
    fn widen(&mut self, arena: &Arena, base: u64, batch: Option<&Moved<'_>>) -> usize {
        let (Slots::Narrow(narrow), Some(layout)) = (&self.slots, self.narrow) else {
            return 0;
        };
        let hasher = &self.hasher;
        let mut wide: HashTable<Pos> = HashTable::with_capacity(narrow.capacity());
        let mut repointed = 0;
        for &slot in narrow.iter() {
            let mut pos = layout.decode(slot, base);
            if let Some(moved) = batch {
                if moved.chunks.contains(&pos.chunk()) {
                    pos = moved.to[moved.index_of(pos)];
                    repointed += 1;
                }
            }
            wide.insert_unique(hasher.hash_one(arena.key(pos)), pos, |&p| hasher.hash_one(arena.key(p)));
        }
        tracing::debug!(
            entries = wide.len(),
            chunks = arena.chunks.len(),
            "config store index widened to 8-byte slots"
        );
        self.slots = Slots::Wide(wide);
        repointed
    }
}

/// The records one compaction batch moved: their old positions (`from`, sorted: the batch is
/// walked in log order) and new ones (`to`), and per chunk of the batch (`chunks`) where its
/// records start in `from` and how many bytes the chunk held.
pub(super) struct Moved<'a> {
    pub(super) chunks: Range<u64>,
    pub(super) from: &'a [Pos],
    pub(super) to: &'a [Pos],
    /// One entry per chunk of the batch plus a closing one (`from.len()`, 0).
    pub(super) runs: &'a [(usize, usize)],
}

impl Moved<'_> {
    /// The index of `pos` in `from`. Records are of similar sizes, so a record's offset in its
    /// chunk predicts its index among the chunk's moved records: a guess and a short walk (a
    /// binary search of the whole batch per slot was half of a compaction's time, a chain of
    /// dependent loads). Panics when `pos` is not there: the index would hold a record the
    /// compaction did not move.
    pub(super) fn index_of(&self, pos: Pos) -> usize {
        let k = (pos.chunk() - self.chunks.start) as usize;
        let ((lo, filled), hi) = (self.runs[k], self.runs[k + 1].0);
        let run = &self.from[lo..hi];
        let offset = pos.offset() as u128;
        let guess = if filled == 0 { 0 } else { (offset * run.len() as u128 / filled as u128) as usize };
        let mut i = guess.min(run.len().saturating_sub(1));
        while i > 0 && run[i] > pos {
            i -= 1;
        }
        while i + 1 < run.len() && run[i] < pos {
            i += 1;
        }
        assert!(run.get(i) == Some(&pos), "every live record of a batch moved");
        lo + i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_packing_round_trips_across_the_wrap() {
        let layout = Narrow::for_chunks(1 << 20, 32).unwrap();
        assert_eq!((layout.offset_bits, layout.chunk_bits, layout.span()), (20, 12, 4096));
        let base = 4090;
        for chunk in base..base + layout.span() {
            for offset in [0, 1, (1 << 20) - 1] {
                let pos = Pos::new(chunk, offset as usize);
                assert!(layout.fits(pos, base));
                assert_eq!(layout.decode(layout.encode(pos), base), pos);
            }
        }
        // One chunk past the span, an offset past the chunk, or below the base: never narrow.
        assert!(!layout.fits(Pos::new(base + layout.span(), 0), base));
        assert!(!layout.fits(Pos::new(base, 1 << 20), base));
        assert!(!layout.fits(Pos::new(base - 1, 0), base));
        // Chunks of 64 bytes leave 26 bits, of 2 GiB one, of 4 GiB none: such a store is wide.
        assert_eq!(Narrow::for_chunks(64, 32).unwrap().chunk_bits, 26);
        assert_eq!(Narrow::for_chunks(100, 3).unwrap().chunk_bits, 3);
        assert_eq!(Narrow::for_chunks(1 << 31, 32).unwrap().chunk_bits, 1);
        assert_eq!(Narrow::for_chunks(1 << 32, 32), None);
    }
}
