//! Every bound of the engine in one place: timeouts, batch sizes, retries. Each says why it has
//! its value; the `const` assertions at the bottom pin how they must relate, so changing one
//! without the other fails to compile.
//!
//! Bounds that depend on the user's settings (the session timeout, `max_poll_records`) are
//! checked when the handle is built ([`FlechtwerkBuilder::build`](crate::FlechtwerkBuilder::build)).

use std::time::Duration;

/// Timeout of the main loop's fetch (TRX-02, KNOB: 1000 ms). Short enough that the loop
/// drains config topics and notices a shutdown at least once a second.
pub(crate) const POLL_TIMEOUT: Duration = Duration::from_millis(1_000);

/// Records taken per config drain (CFG-20): a drain never waits, but a burst of config writes
/// is applied over several loop iterations instead of stalling one batch.
pub(crate) const DRAIN_RECORDS_MAX: usize = 10_000;

/// Default records per fetched batch (KNOB `max_poll_records`, USR-04): bounds a batch's memory
/// and its transaction.
///
/// ```
/// # use std::sync::Arc;
/// use flechtwerk::{Flechtwerk, MAX_POLL_RECORDS_DEFAULT};
///
/// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
/// let builder = Flechtwerk::builder().kafka(kafka).max_poll_records(MAX_POLL_RECORDS_DEFAULT / 5);
/// ```
pub const MAX_POLL_RECORDS_DEFAULT: usize = 500;

/// Default group session timeout: how long the group waits for a silent instance before it
/// reassigns its tasks.
pub(crate) const SESSION_TIMEOUT_DEFAULT: Duration = crate::kafka::SESSION_TIMEOUT_DEFAULT;

/// Smallest session timeout the builder accepts: a member heartbeats every third of it, and
/// below a couple of seconds a GC pause or a slow disk evicts healthy members.
pub(crate) const SESSION_TIMEOUT_MIN: Duration = Duration::from_secs(2);

/// Transaction timeout of transformer task producers (the coordinator aborts a transaction
/// left open longer; TRX keeps the client default of 60 s). A batch (fetch to commit) must fit.
pub(crate) const TASK_TRANSACTION_TIMEOUT: Duration = crate::kafka::TRANSACTION_TIMEOUT_DEFAULT;

/// Transaction timeout of extractor token producers (EXT-17): a page must close within it. Ten
/// minutes, as the Python implementation; a slow external source is the norm for extractors.
pub(crate) const PAGE_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(600);

/// How long an abort may take before the engine gives up on it and surfaces the original
/// error: the coordinator aborts the transaction anyway, at the next owner's fence or at the
/// transaction timeout, so a hung abort must not hang the shutdown.
pub(crate) const ABORT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a shutdown lets an in-flight batch (or a task start) finish before it abandons the
/// batch and aborts its transaction. Below the transaction timeout, so that a batch the
/// shutdown waits for can still commit; with the abort and the closes it fits in the 30 s a
/// container orchestrator usually grants between SIGTERM and SIGKILL.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How long a topic the broker reported as existing (a changelog another replica created a
/// moment before) may stay missing from the metadata before the start-up fails: on a cluster
/// of several brokers the one asked next may not have applied the creation yet (a broker that
/// was paused or restarted catches up within seconds; the nemesis found the miss).
pub(crate) const EXISTING_TOPIC_VISIBLE_MAX: Duration = Duration::from_secs(30);

/// How long closing one client (consumer, producer) may take on shutdown.
pub(crate) const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Pause between two looks for a topic the broker said exists.
pub(crate) const EXISTING_TOPIC_RETRY: Duration = Duration::from_millis(200);

/// How often the dispatched loop drains the config topics (EXT-52, KNOB `CONFIG_DRAIN_INTERVAL`).
pub(crate) const CONFIG_DRAIN_INTERVAL: Duration = Duration::from_secs(1);

/// Cycles in a row whose aborted pages a dispatched loop retries before the error ends the run.
pub(crate) const RETRIED_CYCLES_MAX: u32 = 10;

/// Records per poll of the bootstrap's read: 2.5 times the default read's, so the per-poll work
/// (a hop to the client's thread, a position check per open partition) is amortised over more
/// records. The records of one poll are held at once, and the adapter takes the next poll's
/// ahead while they are indexed, so two polls' worth sit beside librdkafka's own queue
/// ([`FetchLimits::BOOTSTRAP`](crate::kafka::FetchLimits::BOOTSTRAP), up to 5 000 records): each record held costs its payload and
/// librdkafka's per-message bookkeeping, and keeps its decompressed batch alive. At 5 000 per poll
/// a 1 M-entry boot peaked ~4 MiB higher at the same wall time (docs/performance.md, issue #17).
pub(crate) const BOOTSTRAP_BATCH_RECORDS: usize = 2_500;

/// Records per poll of a task's restore: each poll's records of a partition go into its store in
/// one write ([`StateStore::restore`](crate::state::StateStore::restore)), so the per-poll work
/// (a hop to the client's thread, a position check per open partition, a write per partition)
/// is amortised over more records. The restore consumer fetches with the bootstrap's bounds
/// ([`FetchLimits::BOOTSTRAP`](crate::kafka::FetchLimits::BOOTSTRAP)). A restore of 2 000 000
/// small records over 8 partitions at librdkafka's defaults (100 000 records per partition,
/// 64 MiB ahead) and 1 000 records per poll peaked at 440 MiB in 3.4 s; with the bounds, 92 MiB
/// in 2.4 s at 1 000 per poll, 100-120 MiB in 1.9-2.1 s at 2 500 or 5 000 (docs/performance.md,
/// issue 35).
pub(crate) const RESTORE_BATCH_RECORDS: usize = 5_000;

// A shutdown that waits for a batch must leave that batch time to commit.
const _: () = assert!(SHUTDOWN_GRACE.as_millis() < TASK_TRANSACTION_TIMEOUT.as_millis());
// The loop notices a shutdown within one poll, long before the grace runs out.
const _: () = assert!(POLL_TIMEOUT.as_millis() * 10 <= SHUTDOWN_GRACE.as_millis());
// Grace, then the aborts (concurrent across tasks), then the closes: within 30 s.
const _: () = assert!(SHUTDOWN_GRACE.as_millis() + ABORT_TIMEOUT.as_millis() + 2 * CLOSE_TIMEOUT.as_millis() <= 30_000);
// An abort gives up before a task's transaction would time out on its own.
const _: () = assert!(ABORT_TIMEOUT.as_millis() < TASK_TRANSACTION_TIMEOUT.as_millis());
// Heartbeats (a third of the session timeout) must fit several times into the poll cadence's
// budget: the default session timeout is at least three polls.
const _: () = assert!(SESSION_TIMEOUT_DEFAULT.as_millis() >= 3 * POLL_TIMEOUT.as_millis());
const _: () = assert!(SESSION_TIMEOUT_MIN.as_millis() <= SESSION_TIMEOUT_DEFAULT.as_millis());
// A topic that exists is looked for several times before the start-up gives up on it.
const _: () = assert!(EXISTING_TOPIC_RETRY.as_millis() * 10 <= EXISTING_TOPIC_VISIBLE_MAX.as_millis());
