//! What a runner is configured with (built by [`FlechtwerkBuilder`](crate::FlechtwerkBuilder)).

use std::time::Duration;

use crate::kafka::{Compression, FetchLimits};

/// Everything a runner is configured with.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) application_id: String,
    pub(crate) client_id: String,
    pub(crate) max_poll_records: usize,
    /// Records one batch may gather from several polls while the batch before it commits
    /// (at least `max_poll_records`, by default four times; equal: one poll per batch, as the
    /// reference does).
    pub(crate) max_batch_records: usize,
    pub(crate) compression: Compression,
    pub(crate) replication_factor: i16,
    pub(crate) session_timeout: Duration,
    pub(crate) guarantee: Guarantee,
    /// Bounds of a transformer's member consumer (`None`: the adapter's defaults).
    pub(crate) fetch_limits: Option<FetchLimits>,
    /// Who owns the transactional producers of a transformer (exactly-once only).
    pub(crate) producers: Producers,
    /// Extractors: the wait between poll cycles, from the end of one to the start of the next
    /// (EXT-03). Transformers ignore it.
    pub(crate) poll_interval: Option<Duration>,
    /// The oldest local copy of a task's state that is reused (STO-05).
    pub(crate) local_state_max_age: Duration,
}

/// The default of [`FlechtwerkBuilder::local_state_max_age`](crate::FlechtwerkBuilder::local_state_max_age):
/// half of Kafka's default `delete.retention.ms` (24 hours).
pub(crate) const LOCAL_STATE_MAX_AGE_DEFAULT: Duration = Duration::from_secs(12 * 3600);

impl Settings {
    /// Whether a batch gathers the polls made while the batch before it commits (TRX-45).
    pub(crate) fn gathers(&self) -> bool {
        self.max_batch_records > self.max_poll_records
    }

    /// The changelog topic (LIFE-03): `{application_id}-changelog`.
    pub(crate) fn changelog_topic(&self) -> String {
        format!("{}-changelog", self.application_id)
    }

    /// The transactional id of transformer task `partition` (LIFE-03, TRX-30):
    /// `{application_id}-{partition}`, the fencing identity Python instances share.
    pub(crate) fn task_transactional_id(&self, partition: i32) -> String {
        format!("{}-{partition}", self.application_id)
    }

    /// The transactional id of the instance's one producer in the [`Producers::PerInstance`]
    /// shape (KIP-447): `{application_id}-instance-{client_id}`. Never one of the per-task ids
    /// (`instance-…` is not a partition number), so the two shapes never fence each other by
    /// id; the client id is the instance's stable identity (TRX-41).
    pub(crate) fn instance_transactional_id(&self) -> String {
        format!("{}-instance-{}", self.application_id, self.client_id)
    }

    /// The client id of task `partition`'s producer (LIFE-04): `{client_id}-{partition}`.
    pub(crate) fn task_client_id(&self, partition: i32) -> String {
        format!("{}-{partition}", self.client_id)
    }

    /// The transactional id of extractor token `token` (LIFE-03): `{application_id}-{token}`.
    pub(crate) fn token_transactional_id(&self, token: i32) -> String {
        format!("{}-{token}", self.application_id)
    }

    /// The client id of token `token`'s producer (LIFE-04): `{client_id}-{token}`.
    pub(crate) fn token_client_id(&self, token: i32) -> String {
        format!("{}-{token}", self.client_id)
    }
}

/// The processing guarantee of a transformer.
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::{stage::transformer, Flechtwerk, Guarantee};
///
/// assert_eq!(Guarantee::default(), Guarantee::ExactlyOnce);
/// let app = Flechtwerk::builder()
///     .application_id("metrics-forwarder")
///     .client_id("pod-0")
///     .kafka(Arc::new(flechtwerk_sim::cluster::LocalCluster::new()))
///     .guarantee(Guarantee::AtLeastOnce) // its outputs are idempotent upserts anyway
///     .build(transformer(["in"]).transform(|_, _, _| Ok(())))?;
/// # let _ = app;
/// # Ok::<(), flechtwerk::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Guarantee {
    /// One Kafka transaction per task per batch: outputs, state and input offsets commit
    /// together or not at all (the default, and the point of this library).
    #[default]
    ExactlyOnce,
    /// No transactions: outputs and changelog records are sent idempotently, and the input
    /// offsets are committed once every record of the batch is acknowledged. A crash replays
    /// the uncommitted tail, so outputs may repeat. Meant for measuring what exactly-once costs,
    /// and for stages whose outputs are idempotent anyway. Never mix the two guarantees in one
    /// application: an at-least-once member commits offsets outside transactions, which an
    /// exactly-once member's restore cannot tell apart (docs/compatibility.md).
    AtLeastOnce,
}

/// Who owns the transactional producers of an exactly-once transformer.
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::{stage::transformer, Flechtwerk, Producers};
///
/// assert_eq!(Producers::default(), Producers::PerTask);
/// let app = Flechtwerk::builder()
///     .application_id("counter")
///     .client_id("pod-0") // the instance's stable identity: its transactional id derives from it
///     .kafka(Arc::new(flechtwerk_sim::cluster::LocalCluster::new()))
///     .producers(Producers::PerInstance)
///     .build(transformer(["in"]).transform(|_, _, _| Ok(())))?;
/// # let _ = app;
/// # Ok::<(), flechtwerk::Error>(())
/// ```
///
/// The trade-off, in docs/concepts/exactly-once-v2.md: the per-instance shape saves a client
/// (threads, sockets, memory) and a transaction per task, but its transactional ids are not
/// Python's, so a fleet that mixes Python and Rust instances, or migrates between them, must
/// keep the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Producers {
    /// One transactional producer per task, with the static id `{application_id}-{partition}`:
    /// a task's new owner fences the previous one by that id. One transaction per task per
    /// batch. Wire-compatible with Python flechtwerk (the default).
    #[default]
    PerTask,
    /// Kafka Streams' "exactly-once v2" (KIP-447): one transactional producer per instance, with
    /// the id `{application_id}-instance-{client_id}`, and one transaction per batch across all
    /// of the instance's tasks (outputs, changelog records and input offsets). Zombies are
    /// fenced by the consumer group generation the offsets are sent with, instead of by a
    /// per-task id; a task's new owner waits until no transaction of a previous owner can
    /// still commit before it restores. Every instance of an application must use it, with a
    /// distinct, stable `client_id`. Not wire-compatible with Python flechtwerk.
    PerInstance,
}
