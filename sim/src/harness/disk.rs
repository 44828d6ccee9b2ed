//! A simulated disk for task state: it survives a crash-restart of its node, as a real disk
//! does, so the engine meets what a previous incarnation left the way it does in production
//! with a fixed state directory — and reuses it (STO-05).
//!
//! The adapter models the RocksDB adapter's contract:
//!
//! - a task's store is created by its first write; [`StateStore::checkpoint`] opens what an
//!   earlier incarnation left and reports its checkpoint, and the first write of a store that
//!   reported none discards the leftovers;
//! - each [`StateStore::apply_at`] is one atomic write of the changes *and* the checkpoint;
//! - writes are buffered (a memtable without a write-ahead log): every few writes they become
//!   durable in one step, and a clean close (dropping the store) makes them durable. A crash of
//!   the node ([`SimDisk::crash`]) loses the writes that were not durable yet — what survives
//!   is a prefix of the writes, so a copy is only ever behind its changelog;
//! - a torn write ([`SimDisk::tear`]) damages a store's files: opening them fails, as RocksDB's
//!   checks would, so the store reports no checkpoint and its first write discards them.
//!
//! Reads before the first write (or before `checkpoint` opened a copy) see nothing; a wipe
//! removes the files.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use std::time::Duration;

use flechtwerk::state::{Checkpoint, StateError, StateStore, StateStores};

/// The oldest copy a simulated replica reuses: half the simulated broker's
/// `delete.retention.ms` (60 s), as the engine's default is half of Kafka's.
pub const LOCAL_STATE_MAX_AGE: Duration = Duration::from_secs(30);

type Table = BTreeMap<String, Vec<u8>>;
/// A store's place on the disk: node, application, partition.
type StorePath = (String, String, i32);

/// How many writes a store buffers before they become durable at once (a memtable's flush):
/// odd, so that the flushes fall between the writes of one batch as often as between batches.
const WRITES_PER_FLUSH: u32 = 3;

/// The files of one store: what survives a crash, and what the running process sees.
#[derive(Clone, Debug, Default)]
struct Files {
    durable: (Table, Option<Vec<u8>>),
    live: (Table, Option<Vec<u8>>),
    /// Writes since `live` last became durable.
    buffered: u32,
    /// Damaged by a torn write: the files cannot be opened.
    torn: bool,
}

impl Files {
    fn make_durable(&mut self) {
        self.durable = self.live.clone();
        self.buffered = 0;
    }
}

#[derive(Default)]
struct Disk {
    files: BTreeMap<StorePath, Files>,
    /// Per node, how often it crashed: a store of an earlier incarnation writes nothing more
    /// (its process is gone), and its drop is no clean close.
    crashes: BTreeMap<String, u64>,
    /// How many copies were reused, discarded, torn (for reports and checks).
    counts: DiskCounts,
    /// Crash-restarts so far (every fourth tears a store).
    crash_restarts: u64,
}

/// What the disk saw of copies, for a scenario's report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskCounts {
    /// `checkpoint` found a readable copy with a checkpoint.
    pub copies_found: u64,
    /// Copies found and then wiped (the engine judged them unusable).
    pub discarded: u64,
    /// Copies damaged by a torn write.
    pub torn: u64,
    /// Crashes that lost buffered writes of at least one store.
    pub writes_lost: u64,
}

/// Disks of every replica node: `(node, application, partition)` → the files of one store.
/// Lives outside the nodes, so a node's crash keeps its disk.
#[derive(Clone, Default)]
pub struct SimDisk {
    disk: Arc<Mutex<Disk>>,
}

impl SimDisk {
    /// The stores of `node` on this disk.
    pub fn stores(&self, node: &str) -> DiskStores {
        DiskStores { disk: self.clone(), node: node.to_owned() }
    }

    /// How many stores have files on the disk (for checks: a stateless stage leaves none).
    pub fn stores_with_files(&self) -> usize {
        self.lock().files.len()
    }

    /// What the disk saw of copies so far.
    pub fn counts(&self) -> DiskCounts {
        self.lock().counts
    }

    /// `node` crashes: every store of it loses the writes not durable yet, and the stores its
    /// running incarnation holds write nothing more.
    pub fn crash(&self, node: &str) {
        let mut disk = self.lock();
        *disk.crashes.entry(node.to_owned()).or_default() += 1;
        let mut lost = false;
        for ((owner, _, _), files) in disk.files.iter_mut() {
            if owner == node {
                lost |= files.buffered > 0;
                files.live = files.durable.clone();
                files.buffered = 0;
            }
        }
        if lost {
            disk.counts.writes_lost += 1;
        }
    }

    /// A crash-restart of `node`: a [`crash`](Self::crash), and every fourth one of the disk a
    /// [`tear`](Self::tear) of the node's `slot`-th store. Returns the partition of a torn store.
    pub fn crash_restart(&self, node: &str, slot: usize) -> Option<i32> {
        let tear = {
            let mut disk = self.lock();
            disk.crash_restarts += 1;
            disk.crash_restarts % 4 == 0
        };
        if tear {
            self.tear(node, slot)
        } else {
            self.crash(node);
            None
        }
    }

    /// A torn write on `node`'s disk: the store of `partition` (the `partition mod n`-th store
    /// of the node, if it has any) is damaged, as a crash in the middle of writing its files
    /// would leave it. The node crashes with it (a torn write happens only in a crash).
    pub fn tear(&self, node: &str, slot: usize) -> Option<i32> {
        self.crash(node);
        let mut disk = self.lock();
        let paths: Vec<StorePath> = disk.files.keys().filter(|(owner, _, _)| owner == node).cloned().collect();
        if paths.is_empty() {
            return None;
        }
        let path = &paths[slot % paths.len()];
        disk.files.get_mut(path).expect("listed above").torn = true;
        disk.counts.torn += 1;
        Some(path.2)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Disk> {
        self.disk.lock().expect("disk lock")
    }
}

/// One node's stores on a [`SimDisk`].
#[derive(Clone)]
pub struct DiskStores {
    disk: SimDisk,
    node: String,
}

impl StateStores for DiskStores {
    fn open(&self, application_id: &str, partition: i32) -> Result<Box<dyn StateStore>, StateError> {
        let path = (self.node.clone(), application_id.to_owned(), partition);
        let incarnation = self.disk.lock().crashes.get(&self.node).copied().unwrap_or(0);
        Ok(Box::new(DiskStore { disk: self.disk.clone(), path, open: false, incarnation, found: false }))
    }
}

/// One task's store on the disk, created by its first write or opened by `checkpoint`.
struct DiskStore {
    disk: SimDisk,
    path: StorePath,
    open: bool,
    /// The node's crash count when the store was opened.
    incarnation: u64,
    /// `checkpoint` opened a copy an earlier owner left.
    found: bool,
}

impl DiskStore {
    /// `f` on this store's files, unless the node crashed since the store was opened (a gone
    /// process writes nothing).
    fn with<R>(&self, f: impl FnOnce(&mut BTreeMap<StorePath, Files>) -> R) -> Option<R> {
        let mut disk = self.disk.lock();
        if disk.crashes.get(&self.path.0).copied().unwrap_or(0) != self.incarnation {
            return None;
        }
        Some(f(&mut disk.files))
    }

    /// One atomic write: `changes`, and `checkpoint` when given, in order.
    fn write(&mut self, changes: &[(&str, Option<&[u8]>)], checkpoint: Option<&Checkpoint>) {
        let first = !self.open;
        self.open = true;
        self.with(|files| {
            if first {
                // Creating the store over earlier files discards them.
                files.insert(self.path.clone(), Files::default());
            }
            let store = files.entry(self.path.clone()).or_default();
            for (key, value) in changes {
                match value {
                    Some(value) => store.live.0.insert((*key).to_owned(), value.to_vec()),
                    None => store.live.0.remove(*key),
                };
            }
            if let Some(checkpoint) = checkpoint {
                store.live.1 = Some(checkpoint.as_bytes().to_vec());
            }
            store.buffered += 1;
            if store.buffered >= WRITES_PER_FLUSH {
                store.make_durable();
            }
        });
    }
}

impl StateStore for DiskStore {
    fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        if !self.open {
            return Ok(None);
        }
        Ok(self.with(|files| files.get(&self.path).and_then(|f| f.live.0.get(key).cloned())).flatten())
    }

    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), StateError> {
        self.write(&[(key, Some(value))], None);
        Ok(())
    }

    fn delete(&mut self, key: &str) -> Result<(), StateError> {
        if self.open {
            self.write(&[(key, None)], None);
        }
        Ok(())
    }

    fn apply(&mut self, changes: &[(&str, Option<&[u8]>)]) -> Result<(), StateError> {
        if self.open || changes.iter().any(|(_, value)| value.is_some()) {
            self.write(changes, None);
        }
        Ok(())
    }

    fn checkpoint(&mut self) -> Result<Option<Checkpoint>, StateError> {
        if self.open {
            return Ok(self
                .with(|files| files.get(&self.path).and_then(|f| f.live.1.clone()))
                .flatten()
                .map(Checkpoint::from_bytes));
        }
        let found = self.with(|files| match files.get(&self.path) {
            Some(f) if !f.torn => f.live.1.clone(),
            _ => None,
        });
        match found.flatten() {
            Some(checkpoint) => {
                self.open = true;
                self.found = true;
                self.disk.lock().counts.copies_found += 1;
                Ok(Some(Checkpoint::from_bytes(checkpoint)))
            }
            None => Ok(None),
        }
    }

    fn apply_at(&mut self, changes: &[(&str, Option<&[u8]>)], checkpoint: &Checkpoint) -> Result<(), StateError> {
        // Nothing to store before anything was written: no files, no checkpoint.
        if self.open || changes.iter().any(|(_, value)| value.is_some()) {
            self.write(changes, Some(checkpoint));
        }
        Ok(())
    }

    fn wipe(&mut self) -> Result<(), StateError> {
        if std::mem::take(&mut self.found) {
            self.disk.lock().counts.discarded += 1;
        }
        self.open = false;
        self.with(|files| files.remove(&self.path));
        Ok(())
    }
}

impl Drop for DiskStore {
    /// A clean close makes the buffered writes durable (a crash's drop does nothing: the node's
    /// crash count moved on).
    fn drop(&mut self) {
        if self.open {
            self.with(|files| files.get_mut(&self.path).map(Files::make_durable));
        }
    }
}
