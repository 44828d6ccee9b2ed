//! The in-memory adapter of the [`StateStore`] port: the simulations' store, and a fine choice
//! for small state.

use std::collections::BTreeMap;

use super::{StateError, StateStore, StateStores};

/// Stores in memory: the simulation adapter, and a fine choice for small state.
///
/// ```
/// use flechtwerk::state::{InMemoryStores, StateStores};
///
/// let mut store = InMemoryStores::for_instance().open("app", 0)?;
/// store.put("k", b"{}")?;
/// # Ok::<(), flechtwerk::state::StateError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct InMemoryStores;

impl InMemoryStores {
    /// The stores of one application instance (all instances may share one: nothing is kept
    /// outside the stores themselves).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use flechtwerk::state::{InMemoryStores, StateStores};
    /// let stores: Arc<dyn StateStores> = Arc::new(InMemoryStores::for_instance());
    /// ```
    pub fn for_instance() -> Self {
        InMemoryStores
    }
}

impl StateStores for InMemoryStores {
    fn open(&self, _application_id: &str, _partition: i32) -> Result<Box<dyn StateStore>, StateError> {
        Ok(Box::new(InMemoryStateStore::default()))
    }
}

/// A [`StateStore`] in a sorted map of bytes (so round trips exercise real serialization,
/// STO-15).
///
/// ```
/// use flechtwerk::state::{InMemoryStateStore, StateStore};
///
/// let mut store = InMemoryStateStore::default();
/// store.put("k", b"{}")?;
/// store.wipe()?;
/// assert_eq!(store.get("k")?, None);
/// # Ok::<(), flechtwerk::state::StateError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct InMemoryStateStore {
    entries: BTreeMap<String, Vec<u8>>,
}

impl StateStore for InMemoryStateStore {
    fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self.entries.get(key).cloned())
    }

    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), StateError> {
        self.entries.insert(key.to_owned(), value.to_vec());
        Ok(())
    }

    fn delete(&mut self, key: &str) -> Result<(), StateError> {
        self.entries.remove(key);
        Ok(())
    }

    fn wipe(&mut self) -> Result<(), StateError> {
        self.entries.clear();
        Ok(())
    }
}
