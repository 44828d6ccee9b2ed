//! Connecting over TLS and SASL: librdkafka has them built in, every SASL mechanism connects
//! over SASL_SSL, and the Kafka conformance scenarios pass over it.

use flechtwerk::kafka::rdkafka::{builtin_features, SaslMechanism};
use flechtwerk::kafka::{Kafka, NewTopic};
use flechtwerk::testing::conformance::{scenarios, Env};

use crate::{credentials, init_logs, plaintext, secure, unique};

#[test]
fn librdkafka_has_tls_and_sasl_built_in() {
    let features = builtin_features();
    for feature in ["ssl", "sasl_plain", "sasl_scram", "sasl_oauthbearer"] {
        assert!(features.iter().any(|f| f == feature), "{feature} missing: {features:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mechanism_connects_over_sasl_ssl() {
    init_logs();
    let topic = unique("mechanisms");
    plaintext().admin().expect("admin").create_topic(&NewTopic::new(&topic, 3).replication(1)).await.expect("create");
    let (admin, password) = credentials("KAFKA_SASL_ADMIN");
    for mechanism in [SaslMechanism::ScramSha256, SaslMechanism::ScramSha512, SaslMechanism::Plain] {
        let kafka = secure(&admin, password.clone(), mechanism);
        let count = kafka.admin().expect("admin").partition_count(&topic).await;
        assert_eq!(count.expect("metadata over SASL_SSL"), Some(3), "{mechanism:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_scenarios_pass_over_sasl_ssl() {
    init_logs();
    let (admin, password) = credentials("KAFKA_SASL_ADMIN");
    let kafka = secure(&admin, password, SaslMechanism::ScramSha512);
    let env = Env::new(unique("conformance"));
    let mut failures = Vec::new();
    for scenario in scenarios() {
        if scenario.name == "broker-restart" {
            // Restarting the broker would break the tests running beside this one; the
            // plaintext suite (tests/conformance_rdkafka.rs) runs it.
            println!("SKIP {} (restarts the broker)", scenario.name);
            continue;
        }
        let scoped = Env { prefix: format!("{}-{}", env.prefix, scenario.name), ..env.clone() };
        match (scenario.run)(&kafka, &scoped).await {
            Ok(()) => println!("PASS {} over SASL_SSL", scenario.name),
            Err(failure) => failures.push(format!("{}: {failure}", scenario.name)),
        }
    }
    assert!(failures.is_empty(), "over SASL_SSL:\n  {}", failures.join("\n  "));
}
