//! Stages the scenarios (and the examples) run, and the checks of their outputs.
//!
//! The counting transformer is the workhorse of the exactly-once scenarios: for every input it
//! increments its key's state and emits the new count, joined with the key's config (if any).
//! If the engine ever loses or repeats an input's effects, the per-key output sequence shows a
//! gap or a repeat, and the changelog disagrees with the outputs.

use std::collections::BTreeMap;

use flechtwerk::attribute::{Attribute, INT, STR};
use flechtwerk::stage::{transformer, FnTransformer};
use flechtwerk::wire::{self, RawRecord};
use flechtwerk::{Event, Message};

/// The count in a state and in an output value.
pub const COUNT: Attribute<i64> = Attribute::new("count", &INT);
/// The input key, repeated in the output value.
pub const KEY: Attribute<String> = Attribute::new("key", &STR);
/// The config join: the `label` of the key's config, when it has one.
pub const LABEL: Attribute<String> = Attribute::optional("label", &STR);

/// A counting transformer: input topic `input`, outputs to `output`, configs from `configs`
/// (if given). Output value: `{"count": n, "key": k, "label": <config label or null>}`.
pub fn counter(input: &str, output: &str, configs: Option<&str>) -> FnTransformer {
    let output = output.to_owned();
    let builder = transformer([input]);
    let builder = match configs {
        Some(topic) => builder.config_topics([topic]),
        None => builder,
    };
    builder.transform(move |msg, mut state, out| {
        let count = state.get(&COUNT)?.unwrap_or(0) + 1;
        state.set(&COUNT, count)?;
        let label = out.configs().get(&msg.key)?.and_then(|c| c.get(&LABEL).ok().flatten());
        let value = Event::new().with(&COUNT, count)?.with(&KEY, msg.key.clone())?.with(&LABEL, label)?;
        out.send(Message::new(output.as_str(), msg.key.as_str(), value));
        out.set_state(state);
        Ok(())
    })
}

/// Checks a counter's committed outputs against the inputs it was given: per key, the counts
/// are exactly 1..=n in order, n = the number of inputs of the key — no gap, no repeat. Returns
/// the violations, and the final count per key.
pub fn check_counts(
    inputs_per_key: &BTreeMap<String, i64>,
    outputs: &[RawRecord],
) -> (Vec<String>, BTreeMap<String, i64>) {
    let mut seen: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut violations = Vec::new();
    for record in outputs {
        let key = String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned();
        match wire::decode_value(record.value.as_deref()).map(Event::wrap) {
            Ok(value) => match value.get(&COUNT) {
                Ok(Some(count)) => seen.entry(key).or_default().push(count),
                other => violations.push(format!("output {record:?} has no count: {other:?}")),
            },
            Err(e) => violations.push(format!("output of key {key:?} does not decode: {e}")),
        }
    }
    let mut finals = BTreeMap::new();
    for (key, n) in inputs_per_key {
        let counts = seen.remove(key).unwrap_or_default();
        let expected: Vec<i64> = (1..=*n).collect();
        if counts != expected {
            violations.push(describe_counts(key, &counts, *n));
        }
        finals.insert(key.clone(), *n);
    }
    for (key, counts) in seen {
        violations.push(format!("outputs for key {key:?} that was never input: {counts:?}"));
    }
    (violations, finals)
}

fn describe_counts(key: &str, counts: &[i64], n: i64) -> String {
    let mut repeats = Vec::new();
    let mut previous = 0;
    for &c in counts {
        if c <= previous {
            repeats.push(c);
        }
        previous = c;
    }
    let present: std::collections::BTreeSet<i64> = counts.iter().copied().collect();
    let missing: Vec<i64> = (1..=n).filter(|c| !present.contains(c)).collect();
    format!(
        "key {key:?}: {} outputs for {n} inputs; missing counts {missing:?}, repeated or out-of-order {repeats:?}",
        counts.len()
    )
}

/// Checks the changelog's last value per key against the final counts.
pub fn check_changelog(finals: &BTreeMap<String, i64>, changelog: &[RawRecord]) -> Vec<String> {
    let mut last: BTreeMap<String, Option<i64>> = BTreeMap::new();
    for record in changelog {
        let key = String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned();
        let count = if wire::is_tombstone(record.value.as_deref()) {
            None
        } else {
            wire::decode_value(record.value.as_deref()).ok().and_then(|m| Event::wrap(m).get(&COUNT).ok().flatten())
        };
        last.insert(key, count);
    }
    finals
        .iter()
        .filter_map(|(key, n)| {
            let got = last.get(key).copied().flatten();
            (got != Some(*n)).then(|| format!("changelog's last count for key {key:?} is {got:?}, outputs say {n}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn output(key: &str, count: i64) -> RawRecord {
        let value = Event::new().with(&COUNT, count).unwrap().encode().unwrap();
        RawRecord {
            topic: Arc::from("out"),
            partition: 0,
            offset: 0,
            timestamp_ms: None,
            key: Some(key.as_bytes().to_vec().into()),
            value: Some(value.into()),
            headers: Vec::new(),
        }
    }

    #[test]
    fn counts_catch_gaps_repeats_and_strays() {
        let inputs = BTreeMap::from([("a".to_owned(), 3), ("b".to_owned(), 1)]);
        let good = [output("a", 1), output("b", 1), output("a", 2), output("a", 3)];
        let (violations, finals) = check_counts(&inputs, &good);
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(finals["a"], 3);
        let gap = [output("a", 1), output("a", 3), output("b", 1)];
        assert_eq!(check_counts(&inputs, &gap).0.len(), 1);
        let repeat = [output("a", 1), output("a", 2), output("a", 2), output("a", 3), output("b", 1)];
        assert!(check_counts(&inputs, &repeat).0[0].contains("repeated"));
        let stray = [output("a", 1), output("a", 2), output("a", 3), output("b", 1), output("c", 1)];
        assert!(check_counts(&inputs, &stray).0[0].contains("never input"));
        assert!(check_changelog(&finals, &[output("a", 3), output("b", 1)]).is_empty());
        assert_eq!(check_changelog(&finals, &[output("a", 2), output("b", 1)]).len(), 1);
    }
}
