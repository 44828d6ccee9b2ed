//! The stage's hooks as the decoders and the config machinery take them, whatever the stage's
//! shape: its config enricher (if it has one) and its invalid-message policy.

use crate::record::Config;
use crate::stage::EnrichConfig;
use crate::wire::InvalidMessagePolicy;

/// A config's state key from its wire key and its value as decoded, before enrichment
/// (an extractor's `extract_state_key`, CFG-30).
pub(crate) type StateKeyFn<'a> = &'a (dyn Fn(&str, &Config) -> String + Sync);

/// The hooks of one stage, borrowed for a run.
#[derive(Clone, Copy)]
pub(crate) struct Hooks<'a> {
    /// The stage's config enricher: `None` stores configs as their canonical bytes.
    pub(crate) enricher: Option<&'a dyn EnrichConfig>,
    /// The stage's `on_invalid_message`.
    pub(crate) policy: &'a dyn InvalidMessagePolicy,
    /// An extractor's `extract_state_key`, which sees a config before enrichment (CFG-30): the
    /// config machinery calls it on each applied value between its decode and its enrichment.
    /// `None` for a transformer (its state keys come from its inputs).
    pub(crate) state_key: Option<StateKeyFn<'a>>,
}
