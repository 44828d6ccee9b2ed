//! Scenario `conformance`: the Kafka port's conformance suite
//! ([`flechtwerk::testing::conformance`]) on the simulated cluster, over a network that each seed
//! makes clean, lossy, slow or erroring.
//!
//! Property: every scenario of the suite passes — the same verdicts the suite gives on a real
//! broker through the rdkafka adapter. A failed verdict is a violation naming the scenario.
//!
//! Faults stay within what a real client survives without a visible difference: lost requests
//! and responses (retried; produce dedup, idempotent EndTxn / joins), delays, retriable errors.
//! Two are left out because Kafka shows them to the caller too: a lost CreateTopics *response*
//! (the retry reports `AlreadyExists`, as Kafka's admin client would), and delayed transaction
//! markers (a read right after a commit may not see it yet, as on Kafka).

use std::pin::Pin;

use flechtwerk::testing::conformance::{run_all, run_cluster, Env};
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;

use crate::cluster::protocol::RequestKind;
use crate::cluster::{Cluster, Faults, RequestFaults};
use crate::runner::{Ctx, Scenario};

/// The scenario.
pub static SCENARIO: Scenario = Scenario {
    name: "conformance",
    about: "the Kafka port's conformance suite on the simulated cluster, over lossy/slow/erroring networks",
    faults: &[
        "broker-restart",
        "broker-crash",
        "broker-pause",
        "leader-move",
        "kafka-drop-request",
        "kafka-delay-request",
        "kafka-error",
        "kafka-drop-response",
        "kafka-delay-response",
    ],
    run: |ctx| Box::pin(run(ctx)) as Pin<Box<dyn std::future::Future<Output = ()>>>,
};

/// Upper bound of an injected request or response delay.
const DELAY_MAX_MS: u64 = 800;

/// The network of one seed.
fn network(profile: u32) -> (&'static str, Faults) {
    let mut faults = Faults::none();
    let name = match profile {
        0 => "clean",
        1 => {
            faults.requests = RequestFaults { drop_request: 0.02, drop_response: 0.02, ..RequestFaults::default() };
            "lossy"
        }
        2 => {
            faults.requests = RequestFaults {
                delay_request: 0.2,
                delay_response: 0.2,
                delay_max: std::time::Duration::from_millis(DELAY_MAX_MS),
                ..RequestFaults::default()
            };
            "slow"
        }
        _ => {
            faults.requests = RequestFaults {
                retriable_error: 0.05,
                drop_response: 0.01,
                delay_response: 0.05,
                delay_max: std::time::Duration::from_millis(DELAY_MAX_MS),
                ..RequestFaults::default()
            };
            "erroring"
        }
    };
    // A lost or late CreateTopics response is visible on Kafka too (the retry says AlreadyExists).
    let create = faults.requests.clone();
    let create = RequestFaults { drop_response: 0.0, delay_response: 0.0, ..create };
    faults.by_kind.insert(RequestKind::CreateTopic, create);
    (name, faults)
}

async fn run(ctx: Ctx) {
    let cluster = Cluster::start(&ctx);
    let (name, faults) = network(thread_rng().gen_range(0..4));
    ctx.event(format!("conformance: {name} network"));
    cluster.faults().set(faults);
    let kafka = cluster.kafka();
    let restarter = cluster.clone();
    let env = Env { replication_factor: cluster.kafka().replication_factor(), ..Env::new("conf") };
    let mut env = env.with_restart(std::sync::Arc::new(move || {
        restarter.restart_broker();
        Box::pin(async {})
    }));
    // The cluster scenarios on half the seeds of three brokers: each adds minutes of simulated
    // failover, and CI runs 1000 seeds twice. (No draw on one broker: its seeds replay as before.)
    let several = cluster.brokers() >= 3 && thread_rng().gen_bool(0.5);
    if several {
        env = env.with_cluster(std::sync::Arc::new(cluster.clone()));
    }
    let node = Handle::current().create_node().name("conformance").ip(cluster.client_ip()).build();
    let verdicts = node
        .spawn(async move {
            let mut verdicts = run_all(&kafka, &env).await;
            if several {
                verdicts.extend(run_cluster(&kafka, &env).await);
            }
            verdicts.into_iter().map(|(name, v)| (name, v.map_err(|e| e.to_string()))).collect::<Vec<_>>()
        })
        .await
        .expect("the conformance node is never killed");
    for (scenario, verdict) in verdicts {
        match verdict {
            Ok(()) => ctx.event(format!("conformance {scenario}: ok")),
            Err(failure) => ctx.violation(format!("conformance {scenario} ({name} network): {failure}")),
        }
    }
}
