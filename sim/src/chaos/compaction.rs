//! Property-testing compaction: proptest strategies for config histories and changelog
//! histories, a model of what Kafka's log cleaner may leave of a changelog, and the compaction a
//! config store must equal — for properties of your own, under any fault schedule.
//!
//! Two properties a stage's author asserts with them:
//!
//! - **Config stores are the compaction of their topics** (CFG-01, CFG-12): give the chaos test
//!   a [`config_history`] as its configs (before the run) or as config changes during it
//!   ([`Chaos::config_change`]); every seed checks each live replica's store against the
//!   [`ConfigCompaction`] of what the topics hold, whatever the faults did.
//! - **Restoring from a compacted changelog changes nothing** (STO-11): [`Chaos::restored_from`]
//!   starts the chaos run's changelog with a [`Cleaner`]'s compaction of a [`changelog_history`]
//!   and the reference run's with the whole history; the oracle then compares outputs and final
//!   state, so a state that depends on what the cleaner removed shows as a difference.
//!
//! ```ignore
//! use flechtwerk_sim::chaos::compaction::{changelog_history, config_history, Cleaner};
//! use proptest::prelude::*;
//!
//! let keys: Vec<String> = (0..6).map(|a| format!("acct-{a}")).collect();
//! let test = chaos(running_sum).profile("rebalances").seeds(0..1);
//! proptest!(ProptestConfig::with_cases(8), |(
//!     configs in config_history(&["accounts"], &keys, Just(br#"{"currency":"EUR"}"#.to_vec()).boxed(), 0..30),
//!     history in changelog_history(&keys, (0i64..100).prop_map(|s| format!(r#"{{"sum":{s}}}"#).into_bytes()).boxed(), 0..40),
//!     cleaner in Cleaner::strategy(),
//!     schedule in test.schedule_strategy(),
//! )| {
//!     let test = test.clone().configs(configs).restored_from(history.clone(), cleaner.clean(&history));
//!     let violations = test.run_seed(0, &schedule, false);
//!     prop_assert!(violations.is_empty(), "{}", violations.join("\n"));
//! });
//! ```
//!
//! The library's own config store can be driven directly too: `flechtwerk::testing::ConfigBootstrap`
//! (feature `testing`) offers records and finishes a store, as `tests/properties.rs` of this
//! repository does for CFG-12.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

use super::{Chaos, Input};
pub use crate::harness::truth::ConfigCompaction;

/// A record of a task's changelog: a state key and its state (`None`: a tombstone, the state
/// deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateWrite {
    /// The state key (the input's key).
    pub key: String,
    /// The state's bytes (a JSON object, as the engine writes it); `None` deletes.
    pub value: Option<Vec<u8>>,
}

/// Config histories: `len` writes to `topics`, each to one of `keys` (so keys collide across
/// topics when there are several), with every form a config store accepts: a value from
/// `values` (a JSON object), the same object written non-canonically (a leading space, parsed
/// on read), and the three deletes — a null value (a Kafka tombstone), `""` and `{}` (CFG-12).
pub fn config_history(
    topics: &[&str],
    keys: &[String],
    values: BoxedStrategy<Vec<u8>>,
    len: Range<usize>,
) -> BoxedStrategy<Vec<Input>> {
    assert!(!topics.is_empty() && !keys.is_empty(), "config_history needs a topic and a key");
    let topics: Vec<String> = topics.iter().map(|t| (*t).to_owned()).collect();
    let keys = keys.to_vec();
    let value = prop_oneof![
        6 => values.clone().prop_map(Some),
        2 => values.prop_map(|mut v| { v.insert(0, b' '); Some(v) }),
        1 => Just(None),
        1 => Just(Some(Vec::new())),
        1 => Just(Some(b"{}".to_vec())),
    ];
    let write = (proptest::sample::select(topics), proptest::sample::select(keys), value)
        .prop_map(|(topic, key, value)| Input { topic, key, value });
    proptest::collection::vec(write, len).boxed()
}

/// Changelog histories: `len` state writes, each to one of `keys`, a state from `values` or
/// (one in six) a tombstone.
pub fn changelog_history(
    keys: &[String],
    values: BoxedStrategy<Vec<u8>>,
    len: Range<usize>,
) -> BoxedStrategy<Vec<StateWrite>> {
    assert!(!keys.is_empty(), "changelog_history needs a key");
    let value = prop_oneof![5 => values.prop_map(Some), 1 => Just(None)];
    let write = (proptest::sample::select(keys.to_vec()), value).prop_map(|(key, value)| StateWrite { key, value });
    proptest::collection::vec(write, len).boxed()
}

/// What Kafka's log cleaner may have left of a compacted topic when a reader comes: below the
/// cleaner's point, every record with a later record of the same key (below the point) is gone,
/// and tombstones whose `delete.retention.ms` passed are gone too; at and after the point (the
/// dirty section and the active segment) everything is still there. A reader may meet any of
/// these states, so a restore must give the same state from each of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cleaner {
    /// How far the cleaner got, as a share of the history in thousandths (0: nothing cleaned,
    /// 1000: all of it).
    pub point_permille: u16,
    /// Whether the cleaned tombstones' retention passed (they are removed as well).
    pub drop_tombstones: bool,
}

impl Cleaner {
    /// Cleaners anywhere from nothing cleaned to all of it, tombstones kept or dropped.
    pub fn strategy() -> BoxedStrategy<Cleaner> {
        (0u16..=1000, any::<bool>())
            .prop_map(|(point_permille, drop_tombstones)| Cleaner { point_permille, drop_tombstones })
            .boxed()
    }

    /// What a reader of `history` meets after this cleaner ran, in log order.
    pub fn clean(&self, history: &[StateWrite]) -> Vec<StateWrite> {
        let point = history.len() * usize::from(self.point_permille.min(1000)) / 1000;
        let mut last_below: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, write) in history[..point].iter().enumerate() {
            last_below.insert(&write.key, i);
        }
        history
            .iter()
            .enumerate()
            .filter(|(i, write)| {
                *i >= point
                    || (last_below[write.key.as_str()] == *i && !(self.drop_tombstones && write.value.is_none()))
            })
            .map(|(_, write)| write.clone())
            .collect()
    }
}

/// The state a restore of `history` must give: the last write per key, deletes removing it.
pub fn restored_state(history: &[StateWrite]) -> BTreeMap<String, Vec<u8>> {
    let mut state = BTreeMap::new();
    for write in history {
        match &write.value {
            Some(value) => state.insert(write.key.clone(), value.clone()),
            None => state.remove(&write.key),
        };
    }
    state
}

/// The config keys of `history` written on more than one topic.
pub fn colliding_keys(history: &[Input]) -> BTreeSet<String> {
    let mut topics: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for write in history {
        topics.entry(&write.key).or_default().insert(&write.topic);
    }
    topics.into_iter().filter(|(_, t)| t.len() > 1).map(|(k, _)| k.to_owned()).collect()
}

impl Chaos {
    /// Transformers: the changelog the application finds when it first starts — `cleaned` in the
    /// chaos run, `full` in its reference — as a previous deployment would have left it (each
    /// key's writes on the partition its inputs go to). With `cleaned` a [`Cleaner`]'s
    /// compaction of `full`, the oracle's comparison proves that restoring from what the log
    /// cleaner left gives the state the whole history gives, under the run's faults.
    pub fn restored_from(mut self, full: Vec<StateWrite>, cleaned: Vec<StateWrite>) -> Self {
        self.restored = Some((full, cleaned));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(key: &str, value: Option<&str>) -> StateWrite {
        StateWrite { key: key.into(), value: value.map(|v| v.as_bytes().to_vec()) }
    }

    #[test]
    fn the_cleaner_keeps_the_last_write_below_its_point_and_everything_after() {
        let history = vec![
            write("a", Some("1")),
            write("b", Some("1")),
            write("a", None),
            write("b", Some("2")),
            write("a", Some("3")),
        ];
        let cleaner = |point_permille, drop_tombstones| Cleaner { point_permille, drop_tombstones };
        assert_eq!(cleaner(0, true).clean(&history), history);
        assert_eq!(cleaner(1000, false).clean(&history), vec![history[3].clone(), history[4].clone()]);
        // Point 4: a's delete is the last a below it, kept while its retention lasts.
        assert_eq!(
            cleaner(800, false).clean(&history),
            vec![history[2].clone(), history[3].clone(), history[4].clone()]
        );
        assert_eq!(cleaner(800, true).clean(&history), vec![history[3].clone(), history[4].clone()]);
        // Point 3 (600 ‰ of 5): a@0 is superseded by a@2 below the point; b@1 is the last b below it.
        assert_eq!(
            cleaner(600, true).clean(&history),
            vec![history[1].clone(), history[3].clone(), history[4].clone()]
        );
    }

    proptest! {
        /// Whatever the cleaner did, the restored state is the whole history's.
        #[test]
        fn a_cleaned_history_restores_the_same_state(
            history in changelog_history(&["a".into(), "b".into(), "c".into()], (0u8..4).prop_map(|v| vec![v]).boxed(), 0..30),
            cleaner in Cleaner::strategy(),
        ) {
            prop_assert_eq!(restored_state(&cleaner.clean(&history)), restored_state(&history));
        }
    }
}
