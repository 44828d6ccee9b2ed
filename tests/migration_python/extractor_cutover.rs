//! The extractor cut-over: a Python paging extractor SIGKILLed mid-page, a Rust one takes its
//! tokens and is SIGKILLed mid-page in turn, and Python finishes; the feeds of an account share
//! a state while both sides enrich the configs (CFG-30).

use std::time::Instant;

use crate::checks::{compare_python_view, fail, python_read};
use crate::cutover::{fenced, switch_off, Switch};
use crate::extraction::{check_extraction, extraction_done, extractor_setup, items_extracted, python_extractor};
use crate::process::Proc;
use crate::topics::Watermarks;
use crate::{wait_until, Setup, ACCOUNTS, CUTOVER_ITEMS, FEEDS, PHASE_MAX};

/// A Python extractor, killed mid-page, replaced by a Rust one, killed mid-page, replaced by
/// Python again; the feeds of an account share a state keyed by the account as written, while
/// the configs are enriched with a rewritten account (CFG-30).
///
/// Pins: CFG-30 (the state key comes from the config before enrichment: an account's feeds find
/// their shared cursors), EXT-37 (a new holder's token producers fence the killed holder's open
/// page, then the changelog is restored: each side goes on from the other's cursors), LIFE-03 (the
/// per-token transactional ids and the changelog are Python's), EXT-10 and EXT-25 (killed
/// mid-page, every feed's items still arrive once, in order).
pub(crate) fn extractor_cutover(setup: Setup) -> String {
    let started = Instant::now();
    let label = "extractor cut-over (Kill)";
    let p = &setup.prefix;
    let (configs, output, app) = (format!("{p}-configs"), format!("{p}-out"), format!("{p}-app"));
    let changelog = format!("{app}-changelog");
    extractor_setup(&configs, &output, &changelog, CUTOVER_ITEMS);
    let watermarks = Watermarks::new();
    let txn_topics = [output.as_str(), changelog.as_str()];
    // Items in the committed output: how far the extraction got.
    let progress = || items_extracted(&output);
    let items = FEEDS * CUTOVER_ITEMS;
    let python = |name: &str| python_extractor(&setup, name, &app, "pod-0", &configs, &output);

    let mut py1 = python("py-first");
    wait_until("Python to extract a quarter of the items", PHASE_MAX, || {
        py1.alive();
        progress() >= items / 4
    });
    let killed1 = switch_off(Switch::Kill, &mut py1, &watermarks, &txn_topics, &progress);

    let mut rust = Proc::rust("rust", &["extractor", &app, "rust-0", &configs, &output], &setup.logs);
    let fence1 = fenced(&watermarks, &killed1, &mut rust);
    let before = progress();
    wait_until("Rust to take over and extract up to 60% of the items", PHASE_MAX, || {
        rust.alive();
        let now = progress();
        now > before && now >= items * 6 / 10
    });
    let killed2 = switch_off(Switch::Kill, &mut rust, &watermarks, &txn_topics, &progress);

    let mut py2 = python("py-back");
    let fence2 = fenced(&watermarks, &killed2, &mut py2);
    wait_until("Python to extract every item", PHASE_MAX, || {
        py2.alive();
        extraction_done(&output, CUTOVER_ITEMS)
    });
    py2.stop();

    let procs = [&py1, &rust, &py2];
    let (outputs, per_feed) = check_extraction(label, &output, &changelog, CUTOVER_ITEMS, &procs);
    let mut by_rust = 0;
    let mut python_after_rust = 0;
    for got in per_feed.values() {
        by_rust += got.iter().filter(|(_, by)| by == "rust").count();
        if let Some(first_rust) = got.iter().position(|(_, by)| by == "rust") {
            python_after_rust += got[first_rust..].iter().filter(|(_, by)| by == "python").count();
        }
    }
    assert!(by_rust > 0, "{label}: Rust extracted nothing ({})", rust.context());
    assert!(python_after_rust > 0, "{label}: Python extracted nothing after Rust ({})", py2.context());
    let violations = compare_python_view(&python_read(&setup.python, &output, &setup.logs), &outputs);
    if !violations.is_empty() {
        fail(label, "a Python consumer reads the output differently", &violations, &procs);
    }
    format!(
        "{label}: {} items over {FEEDS} feeds, each 1..{CUTOVER_ITEMS} once and in order; Rust extracted {by_rust} \
         of them from Python's cursors, Python {python_after_rust} after Rust; killed mid-page ({} and {} \
         attempt(s)), the open page fenced {:.1} s and {:.1} s after the kill; the changelog keyed by the \
         {ACCOUNTS} accounts as written; a Python consumer read all {} records byte for byte; {:.0} s",
        outputs.len(),
        killed1.attempts,
        killed2.attempts,
        fence1.as_secs_f64(),
        fence2.as_secs_f64(),
        outputs.len(),
        started.elapsed().as_secs_f64()
    )
}
