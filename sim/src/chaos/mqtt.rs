//! MQTT bridges: devices publish QoS 1 messages to a simulated MQTT broker while the faults
//! fire; the checks at every acknowledgement, quiescence at the broker, and the oracle that
//! allows the duplicates MQTT's redeliveries make.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::stage::{BoxError, EnrichConfig, MqttBrokerConfig, MqttExtractor};
use flechtwerk::wire::{InvalidMessageAction, InvalidMessageError};
use flechtwerk::{Config, Event, Flechtwerk, Message};
use madsim::rand::RngCore;
use madsim::runtime::Handle;
use madsim::time::sleep;

use super::run::{producer_record, RunResult};
use super::{Chaos, Gen, Outcome, ReadTopics, Shape, DIFFS_SHOWN, FIRST_TASKS_MAX};
use crate::cluster::Cluster;
use crate::harness::disk::SimDisk;
use crate::harness::faults::FaultSchedule;
use crate::harness::mqtt::{self as bridge, ClientWatch, OwnSubscriptions};
use crate::harness::replicas::{error_kind, Launch, ReplicaEnv, Replicas};
use crate::harness::{topic, truth, CONFIG_CONVERGENCE_MAX, QUIESCENCE_MAX};
use crate::mqtt::{AckRoute, MqttBroker, SendAckHook, SimBrokerConfig};
use crate::runner::Ctx;

impl Chaos {
    /// A chaos test of the MQTT bridge that `stage` builds (called once per replica start):
    /// devices publish [`Chaos::publishes`] to a simulated MQTT broker while the faults fire,
    /// the fault profile's MQTT version
    /// ([`FaultProfile::for_mqtt`](crate::harness::faults::FaultProfile::for_mqtt): MQTT broker
    /// restarts and dropped MQTT connections besides the Kafka faults; no scale-up or -down).
    ///
    /// The config entries (`config`, `configs`) name the filters; the run is over when the MQTT
    /// broker holds nothing unacknowledged, every replica subscribes the active filters and no
    /// transaction is open. The oracle compares per output key with a one-replica run without
    /// faults fed the messages the chaos run's broker queued for the bridge; MQTT QoS 1 redelivers
    /// what was not acknowledged, so the chaos run may hold a value more often, but only as often
    /// as the broker delivered the messages it comes from (see the [module](crate::chaos) docs).
    /// Besides, at every acknowledgement the bridge sends and at every one the broker applies,
    /// the output the relay made of the message must be committed (no acknowledgement before
    /// the commit).
    pub fn mqtt<S: MqttExtractor>(stage: impl Fn() -> S + Send + Sync + 'static) -> Self {
        let stage = Arc::new(stage);
        let read = stage.clone();
        let read_topics: ReadTopics = Arc::new(move || (Vec::new(), read.as_ref()().config_topics()));
        let factory: BridgeFactory = Arc::new(move |run: BridgeRun| {
            let stage = stage.clone();
            Arc::new(move |env: ReplicaEnv| {
                let (stage, run) = (stage.clone(), run.clone());
                Box::pin(async move {
                    let watch = ClientWatch { on_send_ack: Some(run.on_send_ack.clone()), received: None };
                    let mqtt = bridge::client(&run.broker, &run.cluster, &env.name, run.slow_ack_max, &run.own, watch);
                    let recorded = Recorded { inner: stage(), replica: env.name.clone(), relays: run.relays.clone() };
                    let app = Flechtwerk::builder()
                        .application_id(&run.application_id)
                        .client_id(&env.name)
                        .kafka(Arc::new(env.kafka.clone()))
                        .poll_interval(run.poll_interval)
                        .replication_factor(env.kafka.replication_factor())
                        .observer(Arc::new(env.observer()))
                        .mqtt(MqttBrokerConfig::new(mqtt))
                        .build(recorded)
                        .map_err(|e| e.to_string())?;
                    app.run_until(env.stop_requested()).await.map_err(|error| error_kind(&error))
                }) as std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>>>>
            }) as Launch
        });
        Chaos::new(Shape::Mqtt(factory), read_topics)
    }

    /// The run of an MQTT bridge: set-up, the devices publishing while the faults fire,
    /// quiescence, and the checks of the run's end (subscriptions, config stores, the
    /// acknowledgements seen while it ran).
    pub(super) async fn run_once_mqtt(
        &self,
        ctx: Ctx,
        schedule: FaultSchedule,
        replica_count: usize,
        messages: Vec<MqttInput>,
        factory: &BridgeFactory,
    ) -> RunResult {
        let chaos = !schedule.is_empty();
        ctx.event(format!("{replica_count} replicas, {} faults:\n{schedule}", schedule.len()));
        let cluster = Cluster::start(&ctx);
        self.set_up_bridge_topics(&cluster).await;

        let broker = bridge::start_broker(&ctx, SimBrokerConfig::default());
        let names: Vec<String> = (0..replica_count).map(|i| format!("replica-{i}")).collect();
        let relays = Relays::default();
        let acks: Arc<Mutex<AckJournal>> = Arc::default();
        let on_send_ack = self.check_acks_on(&broker, &cluster, &names, &relays, &acks);
        let own = OwnSubscriptions::default();
        let run = BridgeRun {
            application_id: self.application_id.clone(),
            broker: broker.clone(),
            cluster: cluster.clone(),
            poll_interval: self.poll_interval,
            slow_ack_max: self.slow_ack_max,
            own: own.clone(),
            relays: relays.clone(),
            on_send_ack,
        };
        let disk = SimDisk::default();
        let mut replicas = Replicas::start(&cluster, &ctx, &disk, factory(run), replica_count, replica_count);
        replicas.set_mqtt_broker(broker.clone());
        let config_topics: Vec<&str> = self.config_topics.iter().map(|(t, _)| t.as_str()).collect();
        let parts =
            BridgeParts { cluster: &cluster, broker: &broker, own: &own, names: &names, config_topics: &config_topics };
        self.await_first_subscriptions(&ctx, &parts).await;
        if chaos && madsim::rand::thread_rng().next_u64() % 1000 < (self.profile.buggify * 1000.0) as u64 {
            madsim::buggify::enable();
            ctx.event("buggify on");
        }
        let journal: Arc<Mutex<Vec<(u64, MqttInput)>>> = Arc::default();
        let devices = Handle::current().create_node().name("devices").build();
        let publishing =
            devices.spawn(publish_mqtt(broker.clone(), ctx.clone(), messages, self.period, journal.clone()));
        let origin = ctx.now();
        replicas.run_faults(&schedule, vec![publishing]).await;
        let hits = replicas.hits().to_vec();

        let mut violations = Vec::new();
        let outputs: Vec<&str> = self.outputs_topics.iter().map(|(t, _)| t.as_str()).collect();
        let quiesced = self.await_bridge_quiescence(&ctx, &parts, &outputs).await;
        if !quiesced {
            violations.push(self.bridge_unsettled(&parts, &outputs));
        }
        // Every last reconcile sees the final configs.
        sleep(Duration::from_secs(3)).await;
        violations.extend(self.bridge_subscription_violations(&ctx, &parts));
        let want = self.config_compaction(&cluster);
        replicas.await_configs(&want, CONFIG_CONVERGENCE_MAX).await;
        violations.extend(replicas.config_mismatches(&want, &config_topics.join("+")));
        violations.extend(acks.lock().expect("acks lock").violations.iter().take(DIFFS_SHOWN).cloned());

        let outcome = self.bridge_outcome(&cluster, &broker, &journal);
        for v in &violations {
            ctx.violation(v.clone());
        }
        RunResult { outcome, violations, quiesced, events: Vec::new(), relays, origin, hits, barriers: Vec::new() }
    }

    /// Set-up: creates the output and config topics and writes the config records.
    async fn set_up_bridge_topics(&self, cluster: &Cluster) {
        let topics = self.outputs_topics.iter().map(|(t, p)| topic(t.as_str(), *p, false));
        let topics = topics.chain(self.config_topics.iter().map(|(t, p)| topic(t.as_str(), *p, true))).collect();
        let configs = self.configs.iter().map(|record| producer_record(record, None)).collect();
        crate::harness::setup(cluster, topics, configs).await;
    }

    /// The check at every acknowledgement the broker applies, and the hook that makes it at
    /// every one a bridge sends (returned, for the replicas' clients): the output the relay made
    /// of the message must already be committed (decided, on the Kafka broker's own state). An
    /// acknowledgement sent before the commit but applied after it fails only the check at the
    /// send. Violations go to `acks`.
    fn check_acks_on(
        &self,
        broker: &MqttBroker,
        cluster: &Cluster,
        names: &[String],
        relays: &Relays,
        acks: &Arc<Mutex<AckJournal>>,
    ) -> SendAckHook {
        let (cluster, relays, decisions) = (cluster.clone(), relays.clone(), acks.clone());
        let ids: Vec<String> = names.iter().map(|n| format!("{}-{n}", self.application_id)).collect();
        let outputs: Vec<String> = self.outputs_topics.iter().map(|(t, _)| t.clone()).collect();
        // The output the relay made of (replica, topic, payload), unless it is decided
        // committed by now.
        let undecided = Arc::new(move |client: &str, topic: &str, payload: &[u8]| -> Option<OutputId> {
            let content = canonical_bytes(payload)?;
            let key = (client.to_owned(), topic.to_owned(), content);
            let out = relays.lock().expect("relays lock").get(&key).cloned()??;
            let mut journal = decisions.lock().expect("acks lock");
            if journal.decided.contains(&out) {
                return None;
            }
            for topic in &outputs {
                let decided = bridge::decided_outputs(&cluster, &ids, topic, |key, value| {
                    let key = String::from_utf8_lossy(key.unwrap_or_default()).into_owned();
                    Some((topic.clone(), key, value.map(Bytes::copy_from_slice)))
                });
                journal.decided.extend(decided);
            }
            (!journal.decided.contains(&out)).then_some(out)
        });
        {
            let (undecided, acks) = (undecided.clone(), acks.clone());
            broker.on_ack(Arc::new(move |ack| {
                if let Some(out) =
                    undecided(ack.client_id.as_str(), ack.message.topic.as_str(), &ack.message.payload[..])
                {
                    acks.lock().expect("acks lock").violations.push(format!(
                        "{} acknowledged {} (publish #{}) before the Kafka transaction carrying its output {}/{} \
                         committed",
                        ack.client_id, ack.message.topic, ack.message.number, out.0, out.1
                    ));
                }
            }));
        }
        let acks = acks.clone();
        Arc::new(move |client: &str, publish: &flechtwerk::mqtt::Publish, route: AckRoute| {
            if let Some(stale) = bridge::stale_ack(client, publish, route) {
                acks.lock().expect("acks lock").violations.push(stale);
            }
            if let Some(out) = undecided(client, publish.topic.as_str(), &publish.payload[..]) {
                acks.lock().expect("acks lock").violations.push(format!(
                    "{client} sent the acknowledgement of {} (packet {} of connection {}) before the Kafka \
                     transaction carrying its output {}/{} committed",
                    publish.topic, publish.packet_id, publish.connection, out.0, out.1
                ));
            }
        })
    }

    /// Waits, at most [`FIRST_TASKS_MAX`], until every replica subscribed the configs' filters:
    /// the devices begin then, since messages that no subscription matches are lost before any
    /// bridge sees them.
    async fn await_first_subscriptions(&self, ctx: &Ctx, parts: &BridgeParts<'_>) {
        let want = self.wanted_subscriptions(parts);
        let deadline = ctx.now() + FIRST_TASKS_MAX;
        let subscribed =
            |n: &String| parts.broker.subscriptions(n).is_some_and(|s| want.is_subset(&s.into_iter().collect()));
        while ctx.now() < deadline && !parts.names.iter().all(subscribed) {
            sleep(Duration::from_millis(100)).await;
        }
    }

    /// Quiescence, within [`QUIESCENCE_MAX`]: nothing held at the broker, every active filter
    /// subscribed (none that the current processes retired), no transaction open. Whether it
    /// came.
    async fn await_bridge_quiescence(&self, ctx: &Ctx, parts: &BridgeParts<'_>, outputs: &[&str]) -> bool {
        let deadline = ctx.now() + QUIESCENCE_MAX;
        loop {
            let want = self.wanted_subscriptions(parts);
            let idle = parts.names.iter().all(|n| bridge::settled(parts.broker, parts.own, n, &want))
                && outputs.iter().all(|t| truth::no_open_transactions(parts.cluster, t));
            if idle {
                break true;
            }
            if ctx.now() >= deadline {
                break false;
            }
            sleep(Duration::from_secs(1)).await;
        }
    }

    /// The liveness violation of a run that did not quiesce: what was still held at the broker,
    /// which replicas had not settled, which outputs had a transaction open.
    fn bridge_unsettled(&self, parts: &BridgeParts<'_>, outputs: &[&str]) -> String {
        let BridgeParts { cluster, broker, own, names, .. } = *parts;
        let want = self.wanted_subscriptions(parts);
        let held: Vec<String> = names
            .iter()
            .filter(|n| broker.held(n) > 0)
            .map(|n| format!("{} messages held for {n}", broker.held(n)))
            .collect();
        let unsettled: Vec<&String> = names.iter().filter(|n| !bridge::settled(broker, own, n, &want)).collect();
        let open: Vec<&&str> = outputs.iter().filter(|t| !truth::no_open_transactions(cluster, t)).collect();
        format!(
            "liveness: not settled {QUIESCENCE_MAX:?} after the faults stopped: unacknowledged at the MQTT broker: \
             {held:?}; replicas unsettled (held messages or subscriptions): {unsettled:?}; open transactions on \
             {open:?}"
        )
    }

    /// Every replica subscribes the active configs' filters and none that its process retired;
    /// left-over subscriptions of previous processes are counted in the trace.
    fn bridge_subscription_violations(&self, ctx: &Ctx, parts: &BridgeParts<'_>) -> Vec<String> {
        let want = self.wanted_subscriptions(parts);
        let (subscriptions, extra) = bridge::subscription_violations(parts.broker, parts.own, parts.names, &want);
        if extra > 0 {
            ctx.event(format!("{extra} left-over subscriptions of previous processes"));
        }
        subscriptions
    }

    /// The live subscriptions every replica must have: the active configs' filters, shared.
    fn wanted_subscriptions(&self, parts: &BridgeParts<'_>) -> BTreeSet<(Option<String>, String)> {
        bridge::wanted_subscriptions(parts.cluster, &self.application_id, parts.config_topics)
    }

    /// What the run's brokers hold: the committed outcome, and every message the devices
    /// published with what the MQTT broker did with it.
    fn bridge_outcome(
        &self,
        cluster: &Cluster,
        broker: &MqttBroker,
        journal: &Mutex<Vec<(u64, MqttInput)>>,
    ) -> Outcome {
        let mut outcome = self.outcome(cluster);
        outcome.published = journal
            .lock()
            .expect("journal lock")
            .iter()
            .map(|(number, m)| Published {
                number: *number,
                topic: m.topic.clone(),
                payload: Bytes::from(m.payload.clone()),
                queued: broker.outcome(*number).is_some_and(|o| !o.queued_for.is_empty() && o.dropped_by.is_empty()),
                deliveries: broker.deliveries(*number),
            })
            .collect();
        outcome
    }
}

/// One MQTT message a device publishes (QoS 1) in a test of an MQTT bridge
/// ([`Chaos::mqtt`], [`Chaos::publishes`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MqttInput {
    /// The MQTT topic.
    pub topic: String,
    /// The payload bytes (the bridge decodes them as a JSON object; anything else is poison).
    pub payload: Vec<u8>,
}

impl MqttInput {
    /// A message on `topic`.
    ///
    /// ```
    /// use flechtwerk_sim::chaos::MqttInput;
    /// let reading = MqttInput::new("site/7/temp", r#"{"celsius":21.5}"#);
    /// assert_eq!(reading.topic, "site/7/temp");
    /// ```
    pub fn new(topic: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        MqttInput { topic: topic.into(), payload: payload.into() }
    }
}

/// A message the devices of an MQTT bridge run published, as the MQTT broker saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct Published {
    /// The broker-wide publish number (1, 2, …).
    pub number: u64,
    /// The MQTT topic.
    pub topic: String,
    /// The payload.
    pub payload: Bytes,
    /// Whether the broker queued it for a bridge session. Not queued: no live subscription
    /// matched, e.g. a shared subscription that a broker restart restored dead (Mosquitto's
    /// behaviour) and the bridge had not subscribed again yet; such a message is lost before
    /// the bridge could see it, and the oracle leaves it out.
    pub queued: bool,
    /// How often the broker sent it to a bridge replica: the first send and every redelivery
    /// (after a crash, a dropped connection or a broker restart).
    pub deliveries: u32,
}

pub(super) type MqttGenerator = Arc<dyn Fn(&mut Gen, usize) -> MqttInput + Send + Sync>;

/// An output record as the checks name it: topic, key (as text), value.
type OutputId = (String, String, Option<Bytes>);

/// What a relay made of a message: per (replica, MQTT topic, canonical payload), the output of
/// its last relay (`None`: dropped, filtered or poison).
pub(super) type Relays = Arc<Mutex<BTreeMap<(String, String, Vec<u8>), Option<OutputId>>>>;

/// What a bridge replica's launch is given by the run.
#[derive(Clone)]
pub(super) struct BridgeRun {
    application_id: String,
    broker: MqttBroker,
    cluster: Cluster,
    poll_interval: Duration,
    slow_ack_max: Duration,
    own: OwnSubscriptions,
    relays: Relays,
    on_send_ack: SendAckHook,
}

/// What the phases of a bridge run look at: the Kafka cluster, the MQTT broker, the replicas'
/// names and the subscriptions of their current processes, the config topics naming the
/// filters.
#[derive(Clone, Copy)]
struct BridgeParts<'a> {
    cluster: &'a Cluster,
    broker: &'a MqttBroker,
    own: &'a OwnSubscriptions,
    names: &'a [String],
    config_topics: &'a [&'a str],
}

/// The replicas' launch of a bridge run.
pub(super) type BridgeFactory = Arc<dyn Fn(BridgeRun) -> Launch + Send + Sync>;

/// The user's stage, its relays recorded (for the acknowledgement check and the oracle's
/// bound on duplicates); everything else goes to the stage unchanged.
struct Recorded<S> {
    inner: S,
    replica: String,
    relays: Relays,
}

impl<S: MqttExtractor> MqttExtractor for Recorded<S> {
    fn config_topics(&self) -> Vec<String> {
        self.inner.config_topics()
    }

    fn relay(&self, config: &Config, topic: &str, payload: Event) -> Result<Option<Message>, BoxError> {
        let content = canonical(payload.clone());
        let out = self.inner.relay(config, topic, payload);
        let id = match &out {
            Ok(Some(message)) => output_id(message),
            _ => None,
        };
        self.relays.lock().expect("relays lock").insert((self.replica.clone(), topic.to_owned(), content), id);
        out
    }

    fn drain_limit(&self) -> usize {
        self.inner.drain_limit()
    }

    fn config_enricher(&self) -> Option<&dyn EnrichConfig> {
        self.inner.config_enricher()
    }

    fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction {
        self.inner.on_invalid_message(error)
    }

    fn setup(&self) -> impl std::future::Future<Output = Result<(), BoxError>> + Send {
        self.inner.setup()
    }

    fn teardown(&self) -> impl std::future::Future<Output = Result<(), BoxError>> + Send {
        self.inner.teardown()
    }
}

/// A payload as the bridge hands it to the relay, encoded again (the same bytes for the same
/// JSON object, whatever its spelling on the wire).
fn canonical(payload: Event) -> Vec<u8> {
    Message::new("", "", payload).encode_value().ok().flatten().map(|b| b.to_vec()).unwrap_or_default()
}

/// The canonical form of a published payload (`None`: not a JSON object, never relayed).
fn canonical_bytes(payload: &[u8]) -> Option<Vec<u8>> {
    flechtwerk::wire::decode_value(Some(payload)).ok().map(|map| canonical(Event::wrap(map)))
}

fn output_id(message: &Message) -> Option<OutputId> {
    let key = message.encode_key().ok()?;
    let value = message.encode_value().ok()?;
    Some((message.topic().to_owned(), String::from_utf8_lossy(&key).into_owned(), value))
}

/// Checks of an MQTT bridge run made while it runs.
#[derive(Default)]
struct AckJournal {
    /// Outputs seen decided committed.
    decided: BTreeSet<OutputId>,
    violations: Vec<String>,
}

/// Devices: publish `messages` in order, spread over `period`, each retried while the broker is
/// down; the publish numbers go to `journal`.
async fn publish_mqtt(
    broker: MqttBroker,
    ctx: Ctx,
    messages: Vec<MqttInput>,
    period: Duration,
    journal: Arc<Mutex<Vec<(u64, MqttInput)>>>,
) {
    let gap = period / (messages.len().max(1) as u32);
    for message in messages {
        let number = loop {
            if let Some(number) = broker.publish(&message.topic, message.payload.clone()) {
                break number;
            }
            sleep(Duration::from_millis(200)).await;
        };
        journal.lock().expect("journal lock").push((number, message));
        sleep(gap).await;
    }
    ctx.event("devices: done");
}

/// The oracle of an MQTT bridge run (the `mqtt` scenario's rule: no loss, duplicates only
/// from redeliveries, nothing else), per output topic and key and value: the chaos run holds
/// every value at least as often as the reference, no value the reference lacks, and a value
/// more often than the reference only up to the deliveries of the messages the reference
/// relayed into it.
pub(super) fn mqtt_diff(reference: &RunResult, chaos: &RunResult) -> Vec<String> {
    type Counts = BTreeMap<(String, String), BTreeMap<Option<Bytes>, usize>>;
    let count = |outcome: &Outcome| -> Counts {
        let mut counts = Counts::new();
        for (key, values) in &outcome.outputs {
            let per_value = counts.entry(key.clone()).or_default();
            for value in values {
                *per_value.entry(value.clone()).or_default() += 1;
            }
        }
        counts
    };
    // What the reference's relay made of each message (one replica: one entry per content).
    let mapping: BTreeMap<(String, Vec<u8>), Option<OutputId>> = reference
        .relays
        .lock()
        .expect("relays lock")
        .iter()
        .map(|((_, topic, content), out)| ((topic.clone(), content.clone()), out.clone()))
        .collect();
    let mut delivered: BTreeMap<OutputId, u64> = BTreeMap::new();
    for p in chaos.outcome.published.iter().filter(|p| p.queued) {
        let Some(content) = canonical_bytes(&p.payload) else { continue };
        if let Some(Some(out)) = mapping.get(&(p.topic.clone(), content)) {
            *delivered.entry(out.clone()).or_default() += u64::from(p.deliveries);
        }
    }
    let (want, got) = (count(&reference.outcome), count(&chaos.outcome));
    let show = |v: &Option<Bytes>| v.as_deref().map_or("null".into(), |b| String::from_utf8_lossy(b).into_owned());
    let keys: BTreeSet<&(String, String)> = want.keys().chain(got.keys()).collect();
    let mut diffs = Vec::new();
    let mut differing = 0;
    for key in keys {
        let none = BTreeMap::new();
        let (w, g) = (want.get(key).unwrap_or(&none), got.get(key).unwrap_or(&none));
        let values: BTreeSet<&Option<Bytes>> = w.keys().chain(g.keys()).collect();
        let mut problems = Vec::new();
        for value in values {
            let (r, c) = (w.get(value).copied().unwrap_or(0), g.get(value).copied().unwrap_or(0));
            let d = delivered.get(&(key.0.clone(), key.1.clone(), value.clone())).copied().unwrap_or(0) as usize;
            if c < r {
                problems.push(format!("{} {c} times under chaos, {r} in the reference (lost)", show(value)));
            } else if r == 0 {
                problems.push(format!("{} {c} times under chaos, never in the reference", show(value)));
            } else if c > r && c > d {
                problems.push(format!(
                    "{} {c} times under chaos, {r} in the reference, but its messages were delivered only {d} times \
                     (a duplicate without a redelivery)",
                    show(value)
                ));
            }
        }
        if !problems.is_empty() {
            differing += 1;
            if differing > DIFFS_SHOWN {
                continue;
            }
            let more =
                if problems.len() > 3 { format!("; … ({} values in all)", problems.len()) } else { String::new() };
            problems.truncate(3);
            diffs.push(format!("outputs of {}/{}: {}{more}", key.0, key.1, problems.join("; ")));
        }
    }
    if differing > DIFFS_SHOWN {
        diffs.push(format!("… and the outputs of {} more keys differ", differing - DIFFS_SHOWN));
    }
    diffs
}

#[cfg(test)]
mod tests {
    use super::*;

    const READING: &str = r#"{"seq":1}"#;
    const OUT: &str = r#"{"seq":1,"unit":"C"}"#;

    /// A run whose outputs of key `readings/k` are `outputs`; its relay made OUT of READING;
    /// READING was published once, delivered `deliveries` times.
    fn run(outputs: &[&str], deliveries: u32) -> RunResult {
        let value = |v: &str| Some(Bytes::from(v.to_owned()));
        let mut outcome = Outcome::default();
        outcome.outputs.insert(("readings".into(), "k".into()), outputs.iter().map(|v| value(v)).collect());
        outcome.published =
            vec![Published { number: 1, topic: "t".into(), payload: Bytes::from(READING), queued: true, deliveries }];
        let relays = Relays::default();
        let content = canonical_bytes(READING.as_bytes()).expect("a JSON object");
        let out = ("readings".to_owned(), "k".to_owned(), value(OUT));
        relays.lock().expect("relays lock").insert(("replica-0".into(), "t".into(), content), Some(out));
        RunResult { outcome, violations: Vec::new(), quiesced: true, relays, ..RunResult::default() }
    }

    #[test]
    fn the_mqtt_oracle_allows_copies_up_to_the_deliveries_and_nothing_else() {
        let reference = run(&[OUT], 1);
        // Delivered three times (two redeliveries): up to three copies are fine.
        assert!(mqtt_diff(&reference, &run(&[OUT], 3)).is_empty());
        assert!(mqtt_diff(&reference, &run(&[OUT, OUT, OUT], 3)).is_empty());
        // A copy more than the broker's deliveries: one delivery relayed into two commits.
        let diffs = mqtt_diff(&reference, &run(&[OUT, OUT, OUT], 2));
        assert!(diffs.len() == 1 && diffs[0].contains("delivered only 2 times"), "{diffs:?}");
        // Lost.
        let diffs = mqtt_diff(&reference, &run(&[], 2));
        assert!(diffs.len() == 1 && diffs[0].contains("(lost)"), "{diffs:?}");
        // A value the reference never made (e.g. a counter kept in the stage's memory).
        let diffs = mqtt_diff(&reference, &run(&[OUT, r#"{"seq":1,"unit":"F"}"#], 2));
        assert!(diffs.len() == 1 && diffs[0].contains("never in the reference"), "{diffs:?}");
    }

    #[test]
    fn canonical_payloads_ignore_the_spelling_on_the_wire() {
        assert_eq!(canonical_bytes(br#"{ "seq" : 1 }"#), canonical_bytes(br#"{"seq":1}"#));
        assert_ne!(canonical_bytes(br#"{"seq":1}"#), canonical_bytes(br#"{"seq":2}"#));
        assert_eq!(canonical_bytes(b"not json"), None);
    }
}
