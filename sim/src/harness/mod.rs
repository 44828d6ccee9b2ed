//! The chaos harness: replicas of an application under a seeded fault schedule, checked
//! against the simulated broker's truth.
//!
//! - [`faults`]: fault schedules as data, generated from the seed by a profile.
//! - [`replicas`]: replicas under supervisors, and the schedule's executor.
//! - [`disk`]: task state that survives a node's crash, as a disk does.
//! - [`truth`]: what the broker really holds.

pub mod disk;
pub mod faults;
pub mod replicas;
pub mod truth;
