//! MQTT bridge runs: the simulated MQTT broker and the bridge replicas' clients of it, and the
//! checks that read the MQTT broker's and the Kafka broker's truth.
//!
//! One path for every bridge run: [`crate::chaos::Chaos::mqtt`] and the `mqtt` scenario both
//! start the broker with [`start_broker`], give each replica a client made by [`client`] (its
//! node's network partitions cut its MQTT connection too, and every filter it subscribes is
//! logged), decide "no acknowledgement before the commit" with [`decided_outputs`] at each
//! acknowledgement the bridge sends ([`ClientWatch::on_send_ack`]) and at each one the broker
//! applies, and check the subscriptions after quiescence against
//! [`wanted_subscriptions`] and [`stray_subscriptions`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flechtwerk::kafka::TopicPartition;
use flechtwerk::mqtt::{Mqtt, Publish};
use flechtwerk::Event;
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;

use super::truth;
use crate::cluster::broker::log::Body;
use crate::cluster::broker::TxnStatus;
use crate::cluster::Cluster;
use crate::mqtt::{
    AckRoute, ClientFaults, MqttBroker, ReceiptLog, SendAckHook, SimBrokerConfig, SimMqtt, SubscriptionLog,
};
use crate::runner::Ctx;

/// Per replica, what its current process subscribed (replaced at every start of it).
pub type OwnSubscriptions = Arc<Mutex<BTreeMap<String, SubscriptionLog>>>;

/// A simulated MQTT broker with `config`, its housekeeping (keepalive, session expiry) on a node
/// of its own that no fault hits, its event log in the run's trace.
pub fn start_broker(ctx: &Ctx, config: SimBrokerConfig) -> MqttBroker {
    let broker = MqttBroker::new(config);
    let housekeeper = Handle::current().create_node().name("mqtt-broker").build();
    housekeeper.spawn(broker.clone().run_housekeeping());
    let ctx = ctx.clone();
    broker.on_log(Arc::new(move |line| ctx.event(line)));
    broker
}

/// What the checks watch on a replica's MQTT client, besides its subscriptions.
#[derive(Clone, Default)]
pub struct ClientWatch {
    /// Called at every acknowledgement the bridge asks the client to send, as it asks (where
    /// "no acknowledgement before the commit" is checked at the send).
    pub on_send_ack: Option<SendAckHook>,
    /// Receives every message the client hands to the bridge.
    pub received: Option<ReceiptLog>,
}

/// The MQTT client factory of replica `name`'s current process: a client of `broker` whose acks
/// take up to `slow_ack_max` on their way (seeded jitter), that cannot reach the broker while
/// the replica's node is cut off the network, that logs every filter it subscribes into
/// `own` (a fresh log per call: call it at every start of the replica's application), and that
/// `watch` watches.
pub fn client(
    broker: &MqttBroker,
    cluster: &Cluster,
    name: &str,
    slow_ack_max: Duration,
    own: &OwnSubscriptions,
    watch: ClientWatch,
) -> Arc<dyn Mqtt> {
    let log = SubscriptionLog::default();
    own.lock().expect("own lock").insert(name.to_owned(), log.clone());
    let (isolated, name) = (cluster.clone(), name.to_owned());
    let mut client =
        SimMqtt::new(broker.clone(), ClientFaults { slow_ack_max }, Arc::new(|n| thread_rng().gen_range(0..n)))
            .logging_subscriptions(log)
            // A partition of the replica's node cuts its MQTT connection too.
            .reachable(Arc::new(move || !isolated.is_isolated(&name)));
    if let Some(hook) = watch.on_send_ack {
        client = client.on_send_ack(hook);
    }
    if let Some(log) = watch.received {
        client = client.logging_receipts(log);
    }
    Arc::new(client)
}

/// An acknowledgement only on its message's own connection (MQ-06, MQ-16): one that leaves on
/// a later connection, asked for after the bridge was handed that connection's CONNACK, names
/// a packet id that means another message there (after a lost session), or none.
pub fn stale_ack(client: &str, publish: &Publish, route: AckRoute) -> Option<String> {
    let stale = route.leaves_on != 0 && publish.connection != route.leaves_on && route.bridge_told == route.leaves_on;
    stale.then(|| {
        format!(
            "{client} sent an acknowledgement of packet {} of connection {} ({}) on connection {}, after its \
             CONNACK: the packet id names another message there, or none",
            publish.packet_id, publish.connection, publish.topic, route.leaves_on
        )
    })
}

/// The records of `topic` that are decided committed at this moment, on the Kafka broker's own
/// state, as `identity` names them (records it names `None` are left out): those followed by a
/// commit marker of their producer, and those of an open transaction whose producer's
/// transaction (among `transactional_ids`) is committing.
pub fn decided_outputs<I>(
    cluster: &Cluster,
    transactional_ids: &[String],
    topic: &str,
    identity: impl Fn(Option<&[u8]>, Option<&[u8]>) -> Option<I>,
) -> Vec<I> {
    cluster.inspect(|broker| {
        let mut found = Vec::new();
        let committing: BTreeSet<i64> = transactional_ids
            .iter()
            .filter_map(|id| broker.transaction(id))
            .filter(|t| matches!(t.status, TxnStatus::PrepareCommit | TxnStatus::CompleteCommit))
            .map(|t| t.producer_id)
            .collect();
        let partitions = broker.partition_count(topic).unwrap_or(0) as i32;
        for p in 0..partitions {
            let Ok(log) = broker.log(&TopicPartition::new(topic, p)) else { continue };
            let mut open: BTreeMap<i64, Vec<I>> = BTreeMap::new();
            for entry in log.entries() {
                match &entry.body {
                    Body::Data(record) => {
                        let Some(id) = identity(record.key.as_deref(), record.value.as_deref()) else { continue };
                        if record.transactional {
                            open.entry(record.producer_id).or_default().push(id);
                        } else {
                            found.push(id);
                        }
                    }
                    Body::Marker { producer_id, commit } => {
                        let ids = open.remove(producer_id).unwrap_or_default();
                        if *commit {
                            found.extend(ids);
                        }
                    }
                }
            }
            for (producer_id, ids) in open {
                if committing.contains(&producer_id) {
                    found.extend(ids);
                }
            }
        }
        found
    })
}

/// The filters of the active configs of `config_topics` at the end (committed, last value per
/// key; suspended and deleted configs have none).
pub fn active_filters(cluster: &Cluster, config_topics: &[&str]) -> BTreeSet<String> {
    let mut states: BTreeMap<(usize, String), Option<String>> = BTreeMap::new();
    for (i, topic) in config_topics.iter().enumerate() {
        for record in truth::committed_records(cluster, topic) {
            let key = String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned();
            let active = record.value.as_deref().and_then(|v| {
                let text = String::from_utf8_lossy(v);
                if text.contains("\"suspended\":true") {
                    return None;
                }
                let value = Event::wrap(flechtwerk::wire::decode_value(Some(v)).ok()?);
                value.get(&flechtwerk::stage::mqtt::TOPIC).ok().flatten()
            });
            states.insert((i, key), active);
        }
    }
    states.into_values().flatten().collect()
}

/// The live subscriptions every replica of `application_id` must end with: the active filters
/// of `config_topics`, shared in the group named after the application.
pub fn wanted_subscriptions(
    cluster: &Cluster,
    application_id: &str,
    config_topics: &[&str],
) -> BTreeSet<(Option<String>, String)> {
    active_filters(cluster, config_topics).into_iter().map(|f| (Some(application_id.to_owned()), f)).collect()
}

/// Live subscriptions of `name` at the broker that its current process subscribed itself and
/// that `want` does not hold (a retired filter the bridge must have unsubscribed, MQ-20/21).
pub fn stray_subscriptions(
    broker: &MqttBroker,
    own: &OwnSubscriptions,
    name: &str,
    want: &BTreeSet<(Option<String>, String)>,
) -> Vec<(Option<String>, String)> {
    let Some(log) = own.lock().expect("own lock").get(name).cloned() else { return Vec::new() };
    let subscribed_here = log.lock().expect("log lock").clone();
    broker
        .subscriptions(name)
        .unwrap_or_default()
        .into_iter()
        .filter(|s| !want.contains(s) && subscribed_here.contains(s))
        .collect()
}

/// Whether replica `name` is settled at the broker: nothing held for it (in flight or queued),
/// every wanted filter subscribed, none of its own retired ones left.
pub fn settled(
    broker: &MqttBroker,
    own: &OwnSubscriptions,
    name: &str,
    want: &BTreeSet<(Option<String>, String)>,
) -> bool {
    broker.held(name) == 0
        && broker.subscriptions(name).is_some_and(|s| want.is_subset(&s.into_iter().collect()))
        && stray_subscriptions(broker, own, name, want).is_empty()
}

/// One violation per replica in `names` whose live subscriptions lack a wanted filter, or keep
/// one its current process subscribed and retired. Left-over subscriptions of a previous process
/// are not violations (a restarted process cannot know them, see docs/concepts/mqtt.md): their
/// number is returned.
pub fn subscription_violations(
    broker: &MqttBroker,
    own: &OwnSubscriptions,
    names: &[String],
    want: &BTreeSet<(Option<String>, String)>,
) -> (Vec<String>, usize) {
    let mut violations = Vec::new();
    let mut extra = 0;
    for name in names {
        let have: BTreeSet<(Option<String>, String)> =
            broker.subscriptions(name).unwrap_or_default().into_iter().collect();
        let lacking: Vec<_> = want.difference(&have).collect();
        if !lacking.is_empty() {
            violations
                .push(format!("{name}: active filters not subscribed at the broker: {lacking:?} (live: {have:?})"));
        }
        // A filter this process subscribed itself and no longer wants must be gone: the bridge
        // unsubscribes what it retires (MQ-20/21), again after every CONNACK if it was offline.
        let stray = stray_subscriptions(broker, own, name, want);
        if !stray.is_empty() {
            violations.push(format!(
                "{name}: filters this process subscribed and retired are still subscribed at the broker: {stray:?}"
            ));
        }
        extra += have.difference(want).count();
    }
    (violations, extra)
}
