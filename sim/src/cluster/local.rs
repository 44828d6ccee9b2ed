//! The in-process cluster: the simulated broker called directly, on plain tokio (or madsim),
//! for examples and tests that need a Kafka without a network. No network faults; marker faults
//! through an optional [`FaultPlan`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use flechtwerk::kafka::{Admin, Consumer, ConsumerConfig, Kafka, KafkaResult, Producer, ProducerConfig};
use tokio::time::Instant;

use super::broker::{Broker, BrokerConfig};
use super::client::{BoxFuture, Connector, KafkaClient, Transport};
use super::faults::{BrokerFaults, FaultPlan, NoFaults};
use super::protocol::{BrokerId, Request, Response};
use crate::trace::Trace;

struct Shared {
    broker: Mutex<Broker>,
    origin: Instant,
    markers: Option<FaultPlan>,
}

impl Shared {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn with_broker<R>(&self, f: impl FnOnce(&mut Broker, Duration, &mut dyn BrokerFaults) -> R) -> R {
        let now = self.now();
        let mut broker = self.broker.lock().expect("broker lock");
        match &self.markers {
            Some(plan) => f(&mut broker, now, &mut plan.clone()),
            None => f(&mut broker, now, &mut NoFaults),
        }
    }
}

struct LocalTransport {
    shared: Arc<Shared>,
}

impl Transport for LocalTransport {
    fn call(&self, _broker: BrokerId, request: Request) -> BoxFuture<'_, Option<Response>> {
        Box::pin(async move {
            // A request is a scheduling point, as a network round trip would be.
            tokio::task::yield_now().await;
            Some(self.shared.with_broker(|broker, now, faults| broker.handle(request, now, faults)))
        })
    }
}

struct LocalConnector {
    shared: Arc<Shared>,
}

impl Connector for LocalConnector {
    fn connect(&self, _client_id: &str) -> Arc<dyn Transport> {
        Arc::new(LocalTransport { shared: self.shared.clone() })
    }
}

/// An in-process simulated cluster implementing [`Kafka`].
///
/// Broker time is the tokio clock since creation; timers (session timeouts, transaction
/// timeouts, compaction) run whenever a request arrives or [`tick`](LocalCluster::tick) is
/// called.
///
/// ```no_run
/// use flechtwerk::kafka::{Kafka, NewTopic, TopicCreation};
/// use flechtwerk_sim::cluster::LocalCluster;
///
/// async fn example() -> Result<(), flechtwerk::kafka::KafkaError> {
///     let cluster = LocalCluster::new();
///     let admin = cluster.admin()?;
///     assert_eq!(admin.create_topic(&NewTopic::new("input", 3)).await?, TopicCreation::Created);
///     assert_eq!(admin.partition_count("input").await?, Some(3));
///     Ok(())
/// }
/// ```
#[derive(Clone)]
pub struct LocalCluster {
    shared: Arc<Shared>,
    client: KafkaClient,
    trace: Trace,
}

impl Default for LocalCluster {
    fn default() -> Self {
        LocalCluster::new()
    }
}

impl LocalCluster {
    /// A cluster with the default broker settings.
    pub fn new() -> Self {
        LocalCluster::with_config(BrokerConfig::default(), None)
    }

    /// A cluster with `config`, and marker faults from `markers` (request faults of the plan
    /// are ignored: there is no network here).
    pub fn with_config(config: BrokerConfig, markers: Option<FaultPlan>) -> Self {
        let trace = Trace::new();
        let shared = Arc::new(Shared {
            broker: Mutex::new(Broker::new(config, trace.clone())),
            origin: Instant::now(),
            markers,
        });
        let client = KafkaClient::new(Arc::new(LocalConnector { shared: shared.clone() }));
        LocalCluster { shared, client, trace }
    }

    /// The broker's event trace.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Reads the broker state (for checks).
    pub fn inspect<R>(&self, f: impl FnOnce(&Broker) -> R) -> R {
        f(&self.shared.broker.lock().expect("broker lock"))
    }

    /// Runs the broker's timers due by now.
    pub fn tick(&self) {
        self.shared.with_broker(|broker, now, faults| broker.advance(now, faults));
    }

    /// The client factory (what [`Kafka`] delegates to).
    pub fn kafka(&self) -> KafkaClient {
        self.client.clone()
    }
}

impl Kafka for LocalCluster {
    fn consumer(&self, config: ConsumerConfig) -> KafkaResult<Box<dyn Consumer>> {
        self.client.consumer(config)
    }

    fn producer(&self, config: ProducerConfig) -> KafkaResult<Box<dyn Producer>> {
        self.client.producer(config)
    }

    fn admin(&self) -> KafkaResult<Box<dyn Admin>> {
        self.client.admin()
    }
}
