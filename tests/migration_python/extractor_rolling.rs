//! The extractor rolling replacement: two Python extractor replicas replaced one at a time by
//! Rust replicas while they extract, mixed groups sharing the tokens.

use std::time::Instant;

use crate::extraction::{check_extraction, extraction_done, extractor_setup, items_extracted, python_extractor};
use crate::process::{tokens_held, Proc};
use crate::{wait_until, Setup, ACCOUNTS, FEEDS, PARTITIONS, PHASE_MAX, ROLLING_ITEMS};

/// Two Python extractor replicas replaced one at a time by Rust replicas while they extract:
/// mixed groups of both implementations share the tokens, each handover by a rebalance.
///
/// Pins: EXT-33 (the membership group `application_id` with the Range assignor: mixed groups
/// share the tokens), EXT-30 and EXT-32 (both sides give a config the same owner, by `token_for`
/// of its state key: no item twice, none missing), EXT-25 (every feed's items once, in order).
pub(crate) fn extractor_rolling(setup: Setup) -> String {
    let started = Instant::now();
    let label = "extractor rolling";
    let p = &setup.prefix;
    let (configs, output, app) = (format!("{p}-configs"), format!("{p}-out"), format!("{p}-app"));
    let changelog = format!("{app}-changelog");
    extractor_setup(&configs, &output, &changelog, ROLLING_ITEMS);
    let progress = || items_extracted(&output);

    // A settled group: `members` all hold tokens, all PARTITIONS of them between them, and the
    // extraction moves on after that.
    let settled = |what: &str, members: &mut [&mut Proc]| {
        wait_until(what, PHASE_MAX, || {
            members.iter_mut().for_each(|m| m.alive());
            let held: Vec<usize> = members.iter().map(|m| tokens_held(m)).collect();
            held.iter().all(|&n| n > 0) && held.iter().sum::<usize>() == PARTITIONS as usize
        });
        let held: Vec<String> = members.iter().map(|m| format!("{} {}", m.name, tokens_held(m))).collect();
        let before = progress();
        wait_until(&format!("progress after: {what}"), PHASE_MAX, || progress() > before);
        held.join(", ")
    };

    let mut py0 = python_extractor(&setup, "py-0", &app, "pod-0", &configs, &output);
    let mut py1 = python_extractor(&setup, "py-1", &app, "pod-1", &configs, &output);
    settled("two Python replicas to share the tokens", &mut [&mut py0, &mut py1]);
    let mut rs0 = Proc::rust("rs-0", &["extractor", &app, "rs-0", &configs, &output], &setup.logs);
    let mixed3 = settled("a mixed group of py-0, py-1 and rs-0", &mut [&mut py0, &mut py1, &mut rs0]);
    py0.stop();
    let mut rs1 = Proc::rust("rs-1", &["extractor", &app, "rs-1", &configs, &output], &setup.logs);
    let mixed3b = settled("a mixed group of py-1, rs-0 and rs-1", &mut [&mut py1, &mut rs0, &mut rs1]);
    assert!(
        !extraction_done(&output, ROLLING_ITEMS),
        "{label}: the extraction ended before the last Python replica left: give the feeds more items"
    );
    py1.stop();
    settled("two Rust replicas to share the tokens", &mut [&mut rs0, &mut rs1]);
    wait_until("the Rust replicas to extract every item", PHASE_MAX, || {
        rs0.alive();
        rs1.alive();
        extraction_done(&output, ROLLING_ITEMS)
    });
    rs0.stop();
    rs1.stop();

    let procs = [&py0, &py1, &rs0, &rs1];
    let (outputs, per_feed) = check_extraction(label, &output, &changelog, ROLLING_ITEMS, &procs);
    let by_rust: usize = per_feed.values().map(|got| got.iter().filter(|(_, by)| by == "rust").count()).sum();
    let by_python = outputs.len() - by_rust;
    assert!(by_python > 0 && by_rust > 0, "{label}: Python extracted {by_python} items, Rust {by_rust}");
    format!(
        "{label}: {} items over {FEEDS} feeds, each 1..{ROLLING_ITEMS} once and in order (Python {by_python}, \
         Rust {by_rust}); mixed groups held tokens as [{mixed3}] and [{mixed3b}]; the changelog keyed by the \
         {ACCOUNTS} accounts as written; {:.0} s",
        outputs.len(),
        started.elapsed().as_secs_f64()
    )
}
