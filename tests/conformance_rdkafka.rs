//! The Kafka conformance suite against a real Kafka-protocol broker through the librdkafka
//! adapter. Needs `--features rdkafka` and a broker at `KAFKA_BOOTSTRAP` (`scripts/kafka start`
//! starts one and prints the value; `scripts/test` does both).

#![cfg(all(feature = "rdkafka", not(madsim)))]

use std::time::{SystemTime, UNIX_EPOCH};

use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::testing::conformance::{report, run_all, scenarios, Env};

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
    // `scripts/test` sets KAFKA_RESTART_COMMAND to `scripts/kafka restart` (the broker it
    // started, restarted on its data); against a cluster of yours, set it to a command that does
    // the same, or the broker-restart scenario fails.
    let mut env = Env::new(&prefix);
    if let Ok(command) = std::env::var("KAFKA_RESTART_COMMAND") {
        env = env.with_restart(std::sync::Arc::new(move || {
            let command = command.clone();
            Box::pin(async move {
                let status = tokio::process::Command::new("sh")
                    .arg("-c")
                    .arg(&command)
                    .status()
                    .await
                    .unwrap_or_else(|e| panic!("running {command:?}: {e}"));
                assert!(status.success(), "{command:?} failed: {status}");
            })
        }));
    }
    let verdicts = run_all(&kafka, &env).await;

    let failures = report(&scenarios(), &verdicts);
    assert_eq!(verdicts.len(), scenarios().len(), "every scenario ran");
    assert!(
        failures.is_empty(),
        "{} of {} conformance scenarios failed against {bootstrap} (prefix {prefix}):\n  {}",
        failures.len(),
        verdicts.len(),
        failures.join("\n  ")
    );
}
