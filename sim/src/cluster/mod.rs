//! The simulated Kafka cluster: what the engine's exactly-once claim is checked against.
//!
//! - [`broker`]: the broker state machine (logs, transactions, groups, compaction),
//!   deterministic and transport-agnostic.
//! - [`protocol`]: the requests and replies between clients and the broker.
//! - [`client`]: flechtwerk's Kafka port implemented over any [`client::Transport`].
//! - [`faults`]: the fault plan (request drops, delays, errors; marker delays; the Jepsen
//!   broker-bug mode).
//! - [`local`]: [`LocalCluster`], the broker in-process on plain tokio.
//! - `net` (simulation build only): `Cluster`, the broker as a madsim node serving RPCs.
//!
//! The model, its knobs and every known divergence from Kafka: `docs/simulation.md`.

pub mod broker;
pub mod client;
pub mod faults;
pub mod local;
#[cfg(madsim)]
pub mod net;
pub mod protocol;

pub use broker::{Broker, BrokerConfig};
pub use client::KafkaClient;
pub use faults::{FaultPlan, Faults, MarkerFaults, RequestFaults};
pub use local::LocalCluster;
#[cfg(madsim)]
pub use net::Cluster;
