//! A simulated disk for task state: it survives a crash-restart of its node, as a real disk
//! does, so the engine meets leftovers of a previous incarnation the way it does in production
//! with a fixed state directory.
//!
//! The adapter mirrors the RocksDB adapter's contract: a task's store is opened lazily by its
//! first write, and a store found on the disk at that moment — a crashed incarnation's leftovers
//! — is discarded, because the store is only a cache of the changelog, which the task restores
//! right after its fence. Reads before the first write see nothing (nothing was written by this
//! task); a wipe removes the files.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use flechtwerk::state::{StateError, StateStore, StateStores};

type Table = BTreeMap<String, Vec<u8>>;
/// A store's place on the disk: node, application, partition.
type StorePath = (String, String, i32);
type Files = BTreeMap<StorePath, Table>;

/// Disks of every replica node: `(node, application, partition)` → the files of one store.
/// Lives outside the nodes, so a node's crash keeps its disk.
#[derive(Clone, Default)]
pub struct SimDisk {
    files: Arc<Mutex<Files>>,
}

impl SimDisk {
    /// The stores of `node` on this disk.
    pub fn stores(&self, node: &str) -> DiskStores {
        DiskStores { disk: self.clone(), node: node.to_owned() }
    }

    /// How many stores have files on the disk (for checks: a stateless stage leaves none).
    pub fn stores_with_files(&self) -> usize {
        self.files.lock().expect("disk lock").len()
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
        Ok(Box::new(DiskStore { disk: self.disk.clone(), path, open: false }))
    }
}

/// One task's store on the disk, opened by its first write.
struct DiskStore {
    disk: SimDisk,
    path: StorePath,
    open: bool,
}

impl DiskStore {
    fn with<R>(&self, f: impl FnOnce(&mut Files) -> R) -> R {
        f(&mut self.disk.files.lock().expect("disk lock"))
    }
}

impl StateStore for DiskStore {
    fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        if !self.open {
            return Ok(None);
        }
        Ok(self.with(|files| files.get(&self.path).and_then(|t| t.get(key).cloned())))
    }

    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), StateError> {
        let first = !self.open;
        self.open = true;
        self.with(|files| {
            if first {
                // Opening over a previous incarnation's files discards them.
                files.insert(self.path.clone(), Table::new());
            }
            files.entry(self.path.clone()).or_default().insert(key.to_owned(), value.to_vec());
        });
        Ok(())
    }

    fn delete(&mut self, key: &str) -> Result<(), StateError> {
        if self.open {
            self.with(|files| files.get_mut(&self.path).map(|t| t.remove(key)));
        }
        Ok(())
    }

    fn wipe(&mut self) -> Result<(), StateError> {
        self.open = false;
        self.with(|files| files.remove(&self.path));
        Ok(())
    }
}
