//! Seeded deterministic simulations of flechtwerk.
//!
//! Every scenario runs the library's real engine code on madsim's deterministic executor
//! (build with `RUSTFLAGS="--cfg madsim"`, see `scripts/sim`): simulated time, a seeded
//! scheduler, seeded fault schedules. Each run records an event [`trace::Trace`] whose hash must
//! be the same for the same seed, and ends with property checks; a violated property names its
//! seed, and the seed replays the run exactly.

#![warn(missing_docs)]

pub mod cluster;
pub mod mqtt;
pub mod report;
pub mod stages;
pub mod timeline;
pub mod trace;

#[cfg(madsim)]
pub mod chaos;
#[cfg(madsim)]
pub mod harness;
#[cfg(madsim)]
pub mod runner;
#[cfg(madsim)]
pub mod scenarios;
