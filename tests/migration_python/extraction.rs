//! What the two extractor scenarios share: their topics and configs, the Python extractor
//! replica, and the checks of the extraction (every feed's items once, in order; the
//! changelog keyed by the accounts as written).

use std::collections::BTreeMap;

use flechtwerk::testing::read_topic;
use flechtwerk::wire::{self, RawRecord};
use flechtwerk::Event;

use crate::checks::{abbreviate, fail};
use crate::process::Proc;
use crate::topics::{create_topics, produce};
use crate::{block, bootstrap, kafka, Setup, ACCOUNTS, CURSORS, FEEDS, IMPL, PARTITIONS, SEQ};

/// Per feed, the committed items' `(seq, impl)` in output order.
type PerFeed = BTreeMap<String, Vec<(i64, String)>>;

/// The committed output of the extractor cut-over per feed, and what could not be read.
fn extracted(outputs: &[RawRecord]) -> (PerFeed, Vec<String>) {
    let mut per_feed = PerFeed::new();
    let mut violations = Vec::new();
    for r in outputs {
        let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned();
        match wire::decode_value(r.value.as_deref()).map(Event::wrap) {
            Ok(v) => match (v.get(&SEQ), v.get(&IMPL)) {
                (Ok(Some(seq)), Ok(Some(by))) => per_feed.entry(key).or_default().push((seq, by)),
                other => violations.push(format!("output {key}@{}/{}: no seq/impl: {other:?}", r.partition, r.offset)),
            },
            Err(e) => violations.push(format!("output {key}@{}/{}: {e}", r.partition, r.offset)),
        }
    }
    (per_feed, violations)
}

/// Items in the committed output of an extractor scenario.
pub(crate) fn items_extracted(output: &str) -> i64 {
    block(read_topic(&*kafka(), "migration-reader", output)).expect("read output").len() as i64
}

/// Whether every feed's committed output reached its last item.
pub(crate) fn extraction_done(output: &str, items: i64) -> bool {
    let outputs = block(read_topic(&*kafka(), "migration-reader", output)).expect("read output");
    let (per_feed, _) = extracted(&outputs);
    (0..FEEDS).all(|k| per_feed.get(&format!("feed-{k}")).is_some_and(|got| got.iter().any(|(seq, _)| *seq == items)))
}

/// The topics of an extractor scenario (the changelog as the Rust runner creates it, one
/// partition per token; Python would create it with the broker's default count: hazard 8 in
/// docs/compatibility.md), and its `FEEDS` configs of `items` items each.
pub(crate) fn extractor_setup(configs: &str, output: &str, changelog: &str, items: i64) {
    create_topics(&[(configs, PARTITIONS, true), (output, PARTITIONS, false), (changelog, PARTITIONS, true)]);
    let values: Vec<(String, String)> = (0..FEEDS)
        .map(|k| (format!("feed-{k}"), format!(r#"{{"feed":{k},"items":{items},"account":"acct-{}"}}"#, k % ACCOUNTS)))
        .collect();
    let records: Vec<(Option<&str>, Option<&[u8]>)> =
        values.iter().map(|(k, v)| (Some(k.as_str()), Some(v.as_bytes()))).collect();
    produce(configs, &records);
}

/// The checks of an extractor scenario after the extraction: every feed's committed output is
/// exactly 1..`items` in order, and the changelog is keyed by the accounts as written, each
/// one's last state holding its feeds' last cursors. Returns the output and, per feed, who
/// extracted each item.
pub(crate) fn check_extraction(
    label: &str,
    output: &str,
    changelog: &str,
    items: i64,
    procs: &[&Proc],
) -> (Vec<RawRecord>, PerFeed) {
    let outputs = block(read_topic(&*kafka(), "migration-reader", output)).expect("read output");
    let (per_feed, mut violations) = extracted(&outputs);
    for k in 0..FEEDS {
        let feed = format!("feed-{k}");
        let seqs: Vec<i64> =
            per_feed.get(&feed).map(|got| got.iter().map(|(seq, _)| *seq).collect()).unwrap_or_default();
        if seqs != (1..=items).collect::<Vec<_>>() {
            violations.push(format!("{feed}: {} items, not 1..{items} in order: {}", seqs.len(), abbreviate(&seqs)));
        }
    }
    if !violations.is_empty() {
        fail(label, "the output does not hold every feed's items exactly once, in order", &violations, procs);
    }
    // Keyed by the accounts as written: never by an enriched account, never by a feed.
    let log = block(read_topic(&*kafka(), "migration-reader", changelog)).expect("read changelog");
    let mut last: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for r in &log {
        let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned();
        let cursors = wire::decode_value(r.value.as_deref())
            .ok()
            .and_then(|m| Event::wrap(m).get(&CURSORS).ok().flatten())
            .unwrap_or_default();
        last.insert(key, cursors);
    }
    let expected: BTreeMap<String, BTreeMap<String, i64>> = (0..ACCOUNTS)
        .map(|a| {
            let feeds = (0..FEEDS).filter(|k| k % ACCOUNTS == a).map(|k| (format!("feed-{k}"), items)).collect();
            (format!("acct-{a}"), feeds)
        })
        .collect();
    if last != expected {
        let violations: Vec<String> = last
            .iter()
            .filter(|(key, cursors)| expected.get(*key) != Some(cursors))
            .map(|(key, cursors)| format!("changelog ends {key} at {cursors:?}, expected {:?}", expected.get(key)))
            .chain(expected.keys().filter(|k| !last.contains_key(*k)).map(|k| format!("changelog has no {k}")))
            .collect();
        fail(label, "the changelog's states are not the accounts' last cursors", &violations, procs);
    }
    (outputs, per_feed)
}

/// A Python extractor of the extractor scenarios (`migration.py extractor`).
pub(crate) fn python_extractor(
    setup: &Setup,
    name: &str,
    app: &str,
    client: &str,
    configs: &str,
    output: &str,
) -> Proc {
    let bootstrap = bootstrap();
    let args = [
        "extractor",
        "--bootstrap",
        &bootstrap,
        "--app",
        app,
        "--client",
        client,
        "--configs",
        configs,
        "--output",
        output,
    ];
    Proc::python(name, &setup.python, "tests/python/migration.py", &args, &setup.logs)
}
