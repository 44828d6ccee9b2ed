//! Where a long CPU-bound stretch of the engine gives way to the rest of its task: natively
//! tokio's cooperative budget, in the simulation an explicit yield. One of the two files of
//! `src/` that know they may run under madsim (the other is [`super::buggify`];
//! `tests/architecture.rs` keeps it so).

#[cfg(madsim)]
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many transforms a simulated preparation runs between two yields.
#[cfg(madsim)]
const RECORDS_PER_YIELD: usize = 64;

/// Makes a long preparation give way now and then: the batch committing meanwhile is driven by
/// the same task, and moves on (its next call, its commit) only when the task is polled again.
/// Natively through tokio's cooperative budget (each transform spends one unit; once the task's
/// budget for this poll is spent, every bucket yields at its next record, so the pass over them
/// ends); in the simulation a yield every [`RECORDS_PER_YIELD`] transforms.
#[derive(Default)]
pub(crate) struct Budget {
    #[cfg(madsim)]
    spent: AtomicUsize,
}

impl Budget {
    pub(crate) async fn spend(&self) {
        #[cfg(not(madsim))]
        tokio::task::coop::consume_budget().await;
        #[cfg(madsim)]
        if self.spent.fetch_add(1, Ordering::Relaxed) % RECORDS_PER_YIELD == RECORDS_PER_YIELD - 1 {
            tokio::task::yield_now().await;
        }
    }
}
