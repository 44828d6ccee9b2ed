//! The stage's hooks as the decoders and the config machinery take them, whatever the stage's
//! shape: its config enricher (if it has one) and its invalid-message policy.

use crate::stage::EnrichConfig;
use crate::wire::InvalidMessagePolicy;

/// The hooks of one stage, borrowed for a run.
#[derive(Clone, Copy)]
pub(crate) struct Hooks<'a> {
    /// The stage's config enricher: `None` stores configs as their canonical bytes.
    pub(crate) enricher: Option<&'a dyn EnrichConfig>,
    /// The stage's `on_invalid_message`.
    pub(crate) policy: &'a dyn InvalidMessagePolicy,
}
