//! The chaos harness on an extractor, as a user meets it: a paging extractor over a fixed
//! external source (per feed a numbered list of items), tested under seeded faults with the
//! differential oracle (per feed, the committed items and the final cursor equal those of a
//! one-replica run without faults) — and a planted bug, a cursor kept in the stage's memory
//! instead of its `State`, which the harness must catch and shrink.
//!
//! Runs only in simulation builds: `RUSTFLAGS="--cfg madsim" cargo test -p flechtwerk-sim --test
//! chaos_extractor`. Cost: 44 s for both tests in the debug build of `scripts/test` (2 cores,
//! other builds running), most of it the planted bug's six seeds and their shrinking.

#![cfg(madsim)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use flechtwerk::attribute::{Attribute, INT};
use flechtwerk::stage::{extractor, Emit, FnExtractor};
use flechtwerk::{Event, Message, State};
use flechtwerk_sim::chaos::{Chaos, Input};

const ITEMS: Attribute<i64> = Attribute::new("items", &INT);
const CURSOR: Attribute<i64> = Attribute::new("cursor", &INT);
const SEQ: Attribute<i64> = Attribute::new("seq", &INT);
/// Items per page (one transaction each).
const PAGE: i64 = 3;

/// The stage: each feed's config says how many items its source holds; a poll sends the items
/// after the cursor, a page at a time, each page committing the cursor with its items.
fn pager() -> FnExtractor {
    extractor(["feeds"]).poll(|key, config, state| {
        let items = config.get(&ITEMS)?.unwrap_or(0);
        let mut cursor = state.get(&CURSOR)?.unwrap_or(0);
        let mut emitted = Vec::new();
        while cursor < items && emitted.len() < 12 {
            let last = items.min(cursor + PAGE);
            for seq in cursor + 1..=last {
                emitted.push(Emit::Message(Message::new("items", key, Event::new().with(&SEQ, seq)?)));
            }
            cursor = last;
            emitted.push(Emit::State(State::new().with(&CURSOR, cursor)?));
        }
        Ok(emitted)
    })
}

fn chaos(stage: impl Fn() -> FnExtractor + Send + Sync + 'static) -> Chaos {
    Chaos::extractor(stage)
        .config("feeds", 4)
        .output("items", 2)
        .configs((0..8).map(|f| Input::new("feeds", format!("feed-{f}"), format!(r#"{{"items":{}}}"#, 40 + 7 * f))))
        .profile("everything")
        .replicas(3)
}

#[test]
fn a_paging_extractor_is_exactly_once_under_chaos() {
    chaos(pager).seeds(0..8).run();
}

/// Planted bug: the cursor lives in the stage's memory (per replica start), and the committed
/// state is ignored: a restarted or new owner pages from the start again.
fn in_memory_cursor() -> FnExtractor {
    let cursors: Arc<Mutex<BTreeMap<String, i64>>> = Arc::default();
    extractor(["feeds"]).poll(move |key, config, _state| {
        let items = config.get(&ITEMS)?.unwrap_or(0);
        let mut cursors = cursors.lock().expect("cursors lock");
        let cursor = cursors.entry(key.to_owned()).or_default();
        let mut emitted = Vec::new();
        while *cursor < items && emitted.len() < 12 {
            let last = items.min(*cursor + PAGE);
            for seq in *cursor + 1..=last {
                emitted.push(Emit::Message(Message::new("items", key, Event::new().with(&SEQ, seq)?)));
            }
            *cursor = last;
            emitted.push(Emit::State(State::new().with(&CURSOR, last)?));
        }
        Ok(emitted)
    })
}

#[test]
fn an_extractor_keeping_its_cursor_in_memory_is_caught_and_shrunk() {
    let mut caught = 0;
    let mut examples = Vec::new();
    for seed in 0..6 {
        let test = chaos(in_memory_cursor).seeds(seed..seed + 1);
        if let Err(failure) = test.try_run() {
            caught += 1;
            assert!(failure.shrunk.len() <= 5, "seed {seed} shrank to {} faults:\n{failure}", failure.shrunk.len());
            assert!(
                !test.run_seed(seed, &failure.shrunk, false).is_empty(),
                "the shrunk schedule of seed {seed} passes when replayed:\n{failure}"
            );
            examples.push(failure.to_string());
        }
    }
    assert!(caught >= 3, "the oracle caught the in-memory cursor in only {caught} of 6 seeds");
    eprintln!("in-memory cursor: caught in {caught} of 6 seeds; e.g.\n{}", examples[0]);
}

/// A feed's config changed mid-run: when the extractor's polls meet the change depends on the
/// faults, so no reference run can replay it, and the harness says so instead of failing seeds.
#[test]
#[should_panic(expected = "set-up: config changes during a run (`config_change`) are checked for transformers only")]
fn config_changes_are_refused_for_extractors() {
    chaos(pager).config_change(10, Input::new("feeds", "feed-0", r#"{"items":3}"#)).seeds(0..1).run();
}
