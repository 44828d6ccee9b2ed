//! The Kafka conformance suite against a real Kafka-protocol broker through the librdkafka
//! adapter. Needs `--features rdkafka` and a broker at `KAFKA_BOOTSTRAP` (`scripts/kafka start`
//! starts one and prints the value; `scripts/test` does both).

#![cfg(all(feature = "rdkafka", not(madsim)))]

use std::time::{SystemTime, UNIX_EPOCH};

use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::testing::conformance::{run_all, scenarios, Env};

#[tokio::test]
async fn conformance_suite_passes_against_the_broker() {
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").unwrap_or_default();
    assert!(
        !bootstrap.is_empty(),
        "KAFKA_BOOTSTRAP is not set: run this test through scripts/test, or start a broker with \
         `scripts/kafka start` and export the KAFKA_BOOTSTRAP=host:port it prints"
    );
    // A fresh prefix per run: the suite can run repeatedly against one long-lived broker.
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_nanos();
    let prefix = format!("conformance-{}-{nanos:x}", std::process::id());
    let kafka = RdKafka::new(bootstrap.clone());
    let verdicts = run_all(&kafka, &Env::new(&prefix)).await;

    // Scenarios the broker under test is known to fail through a bug of its own (each one
    // documented with evidence in docs/kafka-broker.md), named by the runner: for crabka 0.3.8,
    // KAFKA_CONFORMANCE_BROKER_BUGS=lso. They still run and must still fail, so a fixed broker (or
    // a real Kafka) shows up as an unexpected pass; every other scenario must pass.
    let broker_bugs: Vec<String> = std::env::var("KAFKA_CONFORMANCE_BROKER_BUGS")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    let pins: Vec<(&str, &str)> = scenarios().iter().map(|s| (s.name, s.pins)).collect();
    for bug in &broker_bugs {
        assert!(pins.iter().any(|(name, _)| name == bug), "KAFKA_CONFORMANCE_BROKER_BUGS names no scenario {bug:?}");
    }
    let mut failures = Vec::new();
    for (name, verdict) in &verdicts {
        let pinned = pins.iter().find(|(n, _)| n == name).map_or("", |(_, p)| *p);
        let known_bug = broker_bugs.iter().any(|bug| bug == name);
        match (verdict, known_bug) {
            (Ok(()), false) => println!("PASS {name} ({pinned})"),
            (Err(failure), false) => {
                println!("FAIL {name} ({pinned}): {failure}");
                failures.push(format!("{name}: {failure}"));
            }
            (Err(failure), true) => println!("FAIL {name} ({pinned}), a known broker bug: {failure}"),
            (Ok(()), true) => {
                println!("PASS {name} ({pinned}), although listed as a broker bug");
                failures.push(format!(
                    "{name}: passed although KAFKA_CONFORMANCE_BROKER_BUGS lists it; the broker is fixed, drop it there"
                ));
            }
        }
    }
    assert_eq!(verdicts.len(), pins.len(), "every scenario ran");
    assert!(
        failures.is_empty(),
        "{} of {} conformance scenarios failed against {bootstrap} (prefix {prefix}):\n  {}",
        failures.len(),
        verdicts.len(),
        failures.join("\n  ")
    );
}
