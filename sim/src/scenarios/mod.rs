//! The scenario library.

pub mod config_topics;
pub mod conformance;

use crate::runner::Scenario;

/// Every scenario, by CLI name.
pub static ALL: &[&Scenario] = &[&config_topics::SCENARIO, &conformance::SCENARIO];

/// Looks a scenario up by name.
pub fn by_name(name: &str) -> Option<&'static Scenario> {
    ALL.iter().copied().find(|s| s.name == name)
}
