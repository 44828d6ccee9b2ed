//! The scenario library.

pub mod config_topics;
pub mod conformance;
pub mod counter;
pub mod extractor;
pub mod kafka_chaos;
pub mod late_requests;
pub mod mqtt;

use crate::runner::Scenario;

/// Every scenario, by CLI name.
pub static ALL: &[&Scenario] = &[
    &counter::SCENARIO,
    &counter::SCENARIO_EOS2,
    &counter::SCENARIO_ROLLING,
    &counter::SCENARIO_ALO,
    &extractor::SCENARIO,
    &extractor::SCENARIO_HELD_WRITES,
    &config_topics::SCENARIO,
    &conformance::SCENARIO,
    &kafka_chaos::SCENARIO,
    &late_requests::SCENARIO,
    &mqtt::SCENARIO,
    &mqtt::SCENARIO_ROLLING,
];

/// Looks a scenario up by name.
pub fn by_name(name: &str) -> Option<&'static Scenario> {
    ALL.iter().copied().find(|s| s.name == name)
}
