//! The bridge's rules against a scripted MQTT client and a recording page (MQ-04..37).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;

use super::connection::Connection;
use super::Bridge;
use crate::error::Error;
use crate::message::Message;
use crate::mqtt::{event_channel, EventSender, Mqtt, MqttClient, MqttError, MqttEvent, Publish, QoS, Session};
use crate::observer::Observer;
use crate::record::{Config, State};
use crate::stage::mqtt::{mqtt_extractor, FnMqttExtractor, MqttBrokerConfig, TOPIC};
use crate::stage::{Extractor, Page, PageSink, Wakeup};

/// What the bridge told its observer (the MQTT events; the test kit's recorder lives above the
/// engine's layer).
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // the names of the test kit's `Observed`
enum Observed {
    MqttBuffered { topic: String, count: usize },
    MqttConnected,
    MqttDisconnected,
    MqttMessageDropped { topic: String, reason: String },
    MqttMessageIn { topic: String },
}

#[derive(Clone, Default)]
struct RecordingObserver {
    events: Arc<Mutex<Vec<Observed>>>,
}

impl RecordingObserver {
    fn events(&self) -> Vec<Observed> {
        self.events.lock().unwrap().clone()
    }
    fn clear(&self) {
        self.events.lock().unwrap().clear();
    }
    fn push(&self, event: Observed) {
        self.events.lock().unwrap().push(event);
    }
}

impl Observer for RecordingObserver {
    fn mqtt_buffered(&self, topic: &str, count: usize) {
        self.push(Observed::MqttBuffered { topic: topic.to_owned(), count });
    }
    fn mqtt_connected(&self) {
        self.push(Observed::MqttConnected);
    }
    fn mqtt_disconnected(&self) {
        self.push(Observed::MqttDisconnected);
    }
    fn mqtt_message_dropped(&self, topic: &str, reason: &str) {
        self.push(Observed::MqttMessageDropped { topic: topic.to_owned(), reason: reason.to_owned() });
    }
    fn mqtt_message_in(&self, topic: &str) {
        self.push(Observed::MqttMessageIn { topic: topic.to_owned() });
    }
}

/// A wire call of the client.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Call {
    Subscribe(String, QoS),
    Unsubscribe(String),
    Ack(String, u16),
    Disconnect,
}

#[derive(Clone, Default)]
struct FakeClient {
    calls: Arc<Mutex<Vec<Call>>>,
}

impl FakeClient {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
    fn acks(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Ack(topic, _) => Some(topic),
                _ => None,
            })
            .collect()
    }
    fn clear(&self) {
        self.calls.lock().unwrap().clear();
    }
}

impl MqttClient for FakeClient {
    fn subscribe(&self, filter: &str, qos: QoS) -> Result<(), MqttError> {
        self.calls.lock().unwrap().push(Call::Subscribe(filter.into(), qos));
        Ok(())
    }
    fn unsubscribe(&self, filter: &str) -> Result<(), MqttError> {
        self.calls.lock().unwrap().push(Call::Unsubscribe(filter.into()));
        Ok(())
    }
    fn ack(&self, publish: &Publish) -> Result<(), MqttError> {
        self.calls.lock().unwrap().push(Call::Ack(publish.topic.clone(), publish.packet_id));
        Ok(())
    }
    fn disconnect(&self) -> BoxFuture<'_, Result<(), MqttError>> {
        self.calls.lock().unwrap().push(Call::Disconnect);
        Box::pin(async { Ok(()) })
    }
}

fn msg(topic: &str, id: u16, payload: &str) -> Publish {
    Publish {
        topic: topic.into(),
        payload: Bytes::copy_from_slice(payload.as_bytes()),
        qos: QoS::AtLeastOnce,
        packet_id: id,
        dup: false,
        connection: 1,
    }
}

fn connected() -> MqttEvent {
    MqttEvent::Connected { connection: 1, session_present: false }
}

struct Fixture {
    client: FakeClient,
    observer: RecordingObserver,
    wakeup: Arc<Wakeup>,
    conn: Connection,
}

fn fixture(grace: Duration) -> Fixture {
    let client = FakeClient::default();
    let observer = RecordingObserver::default();
    let wakeup = Arc::new(Wakeup::new());
    let conn = Connection::new(
        Box::new(client.clone()),
        "app".into(),
        QoS::AtLeastOnce,
        grace,
        Arc::new(observer.clone()) as Arc<dyn Observer>,
        Arc::clone(&wakeup),
    );
    Fixture { client, observer, wakeup, conn }
}

fn topics(msgs: &[Publish]) -> Vec<String> {
    msgs.iter().map(|m| m.topic.clone()).collect()
}

fn ids(msgs: &[Publish]) -> Vec<u16> {
    msgs.iter().map(|m| m.packet_id).collect()
}

#[test]
fn mq10_mq11_subscribe_is_shared_idempotent_and_deferred_while_disconnected() {
    let f = fixture(Duration::ZERO);
    f.conn.subscribe("t/+/events");
    f.conn.subscribe("t/+/events");
    assert!(f.client.calls().is_empty(), "no wire call before the first CONNACK (MQ-11)");
    f.conn.on_event(connected());
    assert_eq!(
        f.client.calls(),
        vec![Call::Subscribe("$share/app/t/+/events".into(), QoS::AtLeastOnce), Call::Unsubscribe("t/+/events".into())],
        "MQ-10: shared form, then the bare filter's clean-up"
    );
    f.client.clear();
    f.conn.subscribe("u/#");
    assert_eq!(f.client.calls()[0], Call::Subscribe("$share/app/u/#".into(), QoS::AtLeastOnce));
}

#[tokio::test]
async fn mq12_routing_takes_the_first_match_counts_and_wakes() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("xovis/+/aabb/events");
    f.conn.subscribe("other/#");
    f.conn.on_event(MqttEvent::Publish(msg("xovis/stage/aabb/events", 1, "{}")));
    assert_eq!(topics(&f.conn.buffered("xovis/+/aabb/events")), vec!["xovis/stage/aabb/events"]);
    assert!(f.conn.buffered("other/#").is_empty());
    assert!(f.observer.events().contains(&Observed::MqttMessageIn { topic: "xovis/+/aabb/events".into() }));
    // The wakeup was set (append-then-set): a wait ends at once.
    tokio::time::timeout(Duration::from_secs(1), f.wakeup.wait()).await.expect("MQ-12: wakeup set");
}

#[test]
fn mq13_unmatched_qos0_is_dropped_without_ack() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    let mut m = msg("nowhere", 0, "{}");
    m.qos = QoS::AtMostOnce;
    f.conn.on_event(MqttEvent::Publish(m));
    assert!(f.conn.unrouted().is_empty());
    assert!(f.client.acks().is_empty());
}

#[test]
fn mq14_held_messages_move_to_the_front_of_a_new_view() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.on_event(MqttEvent::Publish(msg("t/a/events", 1, "{}")));
    f.conn.on_event(MqttEvent::Publish(msg("t/b/events", 2, "{}")));
    f.conn.on_event(MqttEvent::Publish(msg("unrelated", 3, "{}")));
    assert_eq!(ids(&f.conn.unrouted()), vec![1, 2, 3]);
    f.conn.subscribe("t/+/events");
    f.conn.on_event(MqttEvent::Publish(msg("t/c/events", 4, "{}")));
    assert_eq!(ids(&f.conn.buffered("t/+/events")), vec![1, 2, 4]);
    assert_eq!(ids(&f.conn.unrouted()), vec![3], "the unrelated message stays held");
    assert!(f.client.acks().is_empty());
}

#[test]
fn mq15_after_the_latch_unmatched_is_ack_dropped_and_desired_is_held() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.reconcile(BTreeSet::from(["t/+/events".to_owned()]));
    f.conn.on_event(MqttEvent::Publish(msg("legacy/topic", 7, "{}")));
    f.conn.on_event(MqttEvent::Publish(msg("t/aa/events", 8, "{}")));
    assert_eq!(f.client.acks(), vec!["legacy/topic"]);
    assert!(f
        .observer
        .events()
        .contains(&Observed::MqttMessageDropped { topic: "(unmatched)".into(), reason: "stale".into() }));
    assert_eq!(ids(&f.conn.unrouted()), vec![8], "a desired filter's message waits for its view");
}

#[test]
fn mq16_qos0_pending_sends_no_ack() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    let mut m = msg("t/x", 0, "{}");
    m.qos = QoS::AtMostOnce;
    f.conn.mark_pending("t/#", m);
    f.conn.page_committed("t/#");
    f.conn.ack_all_pending("t/#");
    assert!(f.client.acks().is_empty());
    assert!(f.conn.pending("t/#").is_empty());
}

#[test]
fn mq17_drain_takes_up_to_the_limit_and_never_waits() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    assert_eq!(f.conn.drain("t/#", 3).unwrap().0.len(), 0);
    for id in 1..=5 {
        f.conn.on_event(MqttEvent::Publish(msg("t/x", id, "{}")));
    }
    let (batch, left) = f.conn.drain("t/#", 3).unwrap();
    assert_eq!((ids(&batch), left), (vec![1, 2, 3], 2));
}

#[test]
fn mq04_mq05_refused_connect_surfaces_after_the_buffer_is_empty() {
    let f = fixture(Duration::from_secs(3600));
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    f.conn.on_event(MqttEvent::Publish(msg("t/x", 1, "{}")));
    f.conn.on_event(MqttEvent::ConnectRefused { reason: 134 });
    assert_eq!(f.conn.drain("t/#", 10).unwrap().0.len(), 1, "MQ-05: buffered first");
    let error = f.conn.drain("t/#", 10).unwrap_err();
    assert_eq!(error.message, "MQTT connect failed: 134");
}

#[test]
fn mq04_mq07_a_drop_counts_and_surfaces_once_the_grace_is_over() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    f.conn.on_event(MqttEvent::Disconnected { reason: "7".into() });
    assert!(f.observer.events().contains(&Observed::MqttDisconnected), "MQ-07");
    assert_eq!(f.conn.drain("t/#", 10).unwrap_err().message, "MQTT disconnected: 7");
    // MQ-06: the reconnect clears it.
    f.conn.on_event(MqttEvent::Connected { connection: 2, session_present: true });
    assert!(f.conn.drain("t/#", 10).unwrap().0.is_empty());
}

#[test]
fn mq04_a_drop_within_the_grace_does_not_fail_the_drain() {
    let f = fixture(Duration::from_secs(3600));
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    f.conn.on_event(MqttEvent::Disconnected { reason: "7".into() });
    assert!(f.conn.drain("t/#", 10).unwrap().0.is_empty());
}

#[tokio::test]
async fn mq04_a_disconnect_we_asked_for_is_no_error() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    f.conn.disconnect().await;
    f.conn.on_event(MqttEvent::Disconnected { reason: "0".into() });
    assert!(f.conn.drain("t/#", 10).unwrap().0.is_empty());
    assert!(!f.observer.events().contains(&Observed::MqttDisconnected));
    assert!(!f.client.calls().iter().any(|c| matches!(c, Call::Unsubscribe(f) if f.starts_with("$share"))), "MQ-03");
}

#[test]
fn mq06_reconnect_drops_stale_state_and_resubscribes_every_view() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    f.conn.subscribe("u/#");
    f.conn.on_event(MqttEvent::Publish(msg("held/x", 1, "{}")));
    f.conn.mark_pending("t/#", msg("t/x", 2, "{}"));
    f.client.clear();
    f.conn.on_event(MqttEvent::Disconnected { reason: "broker gone".into() });
    f.conn.on_event(MqttEvent::Connected { connection: 2, session_present: true });
    assert!(f.conn.pending("t/#").is_empty());
    assert!(f.conn.unrouted().is_empty());
    let subscribes: Vec<Call> = f.client.calls().into_iter().filter(|c| matches!(c, Call::Subscribe(..))).collect();
    assert_eq!(
        subscribes,
        vec![
            Call::Subscribe("$share/app/t/#".into(), QoS::AtLeastOnce),
            Call::Subscribe("$share/app/u/#".into(), QoS::AtLeastOnce)
        ]
    );
    assert_eq!(f.observer.events().iter().filter(|e| **e == Observed::MqttConnected).count(), 2);
}

#[test]
fn an_ack_never_names_a_packet_id_of_an_earlier_connection() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    f.conn.on_event(MqttEvent::Connected { connection: 2, session_present: true });
    f.conn.mark_pending("t/#", msg("t/x", 2, "{}"));
    f.conn.page_committed("t/#");
    f.conn.ack_all_pending("t/#");
    assert!(f.client.acks().is_empty(), "the broker redelivers it instead");
}

fn on(connection: u64, m: Publish) -> Publish {
    Publish { connection, ..m }
}

#[test]
fn mq_06_a_resumed_session_sends_its_messages_again_so_their_buffered_copies_go() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    f.conn.on_event(MqttEvent::Publish(msg("t/x", 1, "{}")));
    f.conn.on_event(MqttEvent::Publish(msg("held/x", 2, "{}")));
    f.conn.on_event(MqttEvent::Disconnected { reason: "connection reset".into() });
    f.conn.on_event(MqttEvent::Connected { connection: 2, session_present: true });
    assert!(f.conn.buffered("t/#").is_empty(), "the broker sends packet 1 again on connection 2");
    assert!(f.conn.unrouted().is_empty());
}

#[test]
fn mq_06_messages_of_a_lost_session_stay_to_be_relayed_and_are_never_acknowledged() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    f.conn.on_event(MqttEvent::Publish(msg("t/x", 1, "{}")));
    f.conn.on_event(MqttEvent::Publish(msg("held/x", 2, "{}")));
    // The session is lost (a broker restart without persistence, an expiry, a clean start):
    // the broker will never send packets 1 and 2 of connection 1 again.
    f.conn.on_event(MqttEvent::Disconnected { reason: "broker went away".into() });
    f.conn.on_event(MqttEvent::Connected { connection: 2, session_present: false });
    assert_eq!(ids(&f.conn.buffered("t/#")), vec![1]);
    assert_eq!(ids(&f.conn.unrouted()), vec![2]);
    // The new session's packet 1 is another message.
    f.conn.on_event(MqttEvent::Publish(on(2, msg("t/y", 1, "{}"))));
    // A reconnect that resumes the new session drops only what the new session sends again.
    f.conn.on_event(MqttEvent::Disconnected { reason: "connection reset".into() });
    f.conn.on_event(MqttEvent::Connected { connection: 3, session_present: true });
    assert_eq!(topics(&f.conn.buffered("t/#")), vec!["t/x"], "t/y comes again on connection 3; t/x never");
    assert_eq!(ids(&f.conn.unrouted()), vec![2]);
    // Relayed and committed, t/x is not acknowledged: packet 1 names t/y's copy on connection 3.
    let (batch, _) = f.conn.drain("t/#", 10).unwrap();
    f.client.clear();
    for m in batch {
        f.conn.mark_pending("t/#", m);
    }
    f.conn.page_committed("t/#");
    f.conn.ack_all_pending("t/#");
    assert!(f.client.acks().is_empty(), "{:?}", f.client.calls());
    // An aborted page's messages of the lost session return to the buffer.
    f.conn.on_event(MqttEvent::Publish(on(3, msg("t/y", 1, "{}"))));
    let (batch, _) = f.conn.drain("t/#", 10).unwrap();
    let old = on(1, msg("t/z", 7, "{}"));
    f.conn.roll_back("t/#", &batch, vec![old]);
    assert_eq!(topics(&f.conn.buffered("t/#")), vec!["t/y", "t/z"]);
}

#[test]
fn mq20_mq21_reconcile_unsubscribes_acks_pending_and_drops_buffered() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("keep/#");
    f.conn.subscribe("gone/#");
    f.conn.mark_pending("gone/#", msg("gone/1", 1, "{}"));
    f.conn.page_committed("gone/#");
    f.conn.on_event(MqttEvent::Publish(msg("gone/2", 2, "{}")));
    f.conn.on_event(MqttEvent::Publish(msg("gone/3", 3, "{}")));
    f.client.clear();
    f.conn.reconcile(BTreeSet::from(["keep/#".to_owned()]));
    f.conn.reconcile(BTreeSet::from(["keep/#".to_owned()]));
    assert_eq!(f.client.calls()[0], Call::Unsubscribe("$share/app/gone/#".into()));
    assert_eq!(f.client.acks(), vec!["gone/1", "gone/2", "gone/3"]);
    let dropped = f
        .observer
        .events()
        .iter()
        .filter(|e| **e == Observed::MqttMessageDropped { topic: "gone/#".into(), reason: "unsubscribed".into() })
        .count();
    assert_eq!(dropped, 2);
    assert!(f.observer.events().contains(&Observed::MqttBuffered { topic: "gone/#".into(), count: 0 }));
    assert_eq!(f.conn.desired(), Some(BTreeSet::from(["keep/#".to_owned()])));
    // A removed view is not re-subscribed on reconnect (MQ-21); its UNSUBSCRIBE goes out again
    // (the resumed session may still hold the subscription).
    f.client.clear();
    f.conn.on_event(MqttEvent::Connected { connection: 2, session_present: true });
    assert_eq!(
        f.client.calls(),
        vec![
            Call::Unsubscribe("$share/app/gone/#".into()),
            Call::Subscribe("$share/app/keep/#".into(), QoS::AtLeastOnce),
            Call::Unsubscribe("keep/#".into())
        ]
    );
    // Subscribed anew, it is no longer retired.
    f.conn.subscribe("gone/#");
    f.client.clear();
    f.conn.on_event(MqttEvent::Connected { connection: 3, session_present: true });
    assert!(!f.client.calls().contains(&Call::Unsubscribe("$share/app/gone/#".into())));
}

// ---- the relay template (MQ-30..37) ----

/// A broker adapter handing out the fake client; the test drives its events.
struct FakeBroker {
    client: FakeClient,
    events: Mutex<Option<EventSender>>,
}

impl Mqtt for FakeBroker {
    fn connect(&self, _session: &Session) -> Result<(Box<dyn MqttClient>, crate::mqtt::EventReceiver), MqttError> {
        let (tx, rx) = event_channel();
        tx.send(connected());
        *self.events.lock().unwrap() = Some(tx);
        Ok((Box::new(self.client.clone()), rx))
    }
    fn broker(&self) -> String {
        "fake:1883".into()
    }
}

#[derive(Default)]
struct Sink {
    sent: Vec<Message>,
    commits: usize,
    /// (block instead of failing, at which send).
    fault: Option<(bool, usize)>,
}

impl PageSink for Sink {
    fn send(&mut self, message: Message) -> BoxFuture<'_, Result<(), Error>> {
        let n = self.sent.len();
        Box::pin(async move {
            match self.fault {
                Some((false, at)) if at == n => {
                    return Err(Error::Invalid("delivery failed".into()));
                }
                Some((true, at)) if at == n => futures::future::pending::<()>().await,
                _ => {}
            }
            self.sent.push(message);
            Ok(())
        })
    }
    fn commit(&mut self, state: State) -> BoxFuture<'_, Result<(), Error>> {
        assert!(state.is_empty(), "the bridge writes no state");
        self.commits += 1;
        Box::pin(async { Ok(()) })
    }
    fn config(&self, _key: &str) -> BoxFuture<'_, Result<Option<Config>, crate::configs::ConfigStoreError>> {
        Box::pin(async { Ok(None) })
    }
}

struct BridgeFixture {
    client: FakeClient,
    broker: Arc<FakeBroker>,
    observer: RecordingObserver,
    bridge: Bridge<FnMqttExtractor>,
}

async fn bridge(drain_limit: usize) -> BridgeFixture {
    let client = FakeClient::default();
    let broker = Arc::new(FakeBroker { client: client.clone(), events: Mutex::new(None) });
    let observer = RecordingObserver::default();
    let stage = mqtt_extractor(["cfg"]).drain_limit(drain_limit).relay(|_config, topic, payload| {
        if payload.raw().contains_key("drop") {
            return Ok(None);
        }
        if payload.raw().contains_key("boom") {
            return Err("relay failed".into());
        }
        Ok(Some(Message::new("out", topic, payload)))
    });
    let bridge = Bridge::new(
        stage,
        MqttBrokerConfig::new(Arc::clone(&broker) as Arc<dyn Mqtt>),
        "replica-1".into(),
        "app".into(),
        Arc::new(observer.clone()) as Arc<dyn Observer>,
    )
    .unwrap();
    bridge.setup().await.unwrap();
    BridgeFixture { client, broker, observer, bridge }
}

impl BridgeFixture {
    fn publish(&self, topic: &str, id: u16, payload: &str) {
        let events = self.broker.events.lock().unwrap();
        events.as_ref().unwrap().send(MqttEvent::Publish(msg(topic, id, payload)));
    }

    async fn settle(&self) {
        // The pump applies the events on its task.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    async fn poll(&self, sink: &mut Sink) -> Result<(), crate::error::BoxError> {
        let config = Config::new().with(&TOPIC, "t/+/events".to_owned()).unwrap();
        let mut page = Page::new("k", "k", sink);
        self.bridge.poll(config, State::new(), &mut page).await
    }
}

fn sent_topics(sink: &Sink) -> Vec<String> {
    sink.sent.iter().map(|m| String::from_utf8_lossy(&m.encode_key().unwrap()).into_owned()).collect()
}

#[tokio::test]
async fn mq34_acks_go_out_at_the_next_poll_after_the_commit() {
    let f = bridge(1000).await;
    let mut sink = Sink::default();
    f.poll(&mut sink).await.unwrap(); // subscribes the view
    f.publish("t/a/events", 1, r#"{"x":1}"#);
    f.settle().await;
    f.poll(&mut sink).await.unwrap();
    assert_eq!(sink.sent.len(), 1);
    assert_eq!(sink.commits, 1);
    assert!(f.client.acks().is_empty(), "MQ-34: not acknowledged before the next poll");
    f.poll(&mut sink).await.unwrap();
    assert_eq!(f.client.acks(), vec!["t/a/events"]);
}

#[tokio::test]
async fn mq30_drain_limit_leaves_the_rest_for_the_next_cycle() {
    let f = bridge(2).await;
    let mut sink = Sink::default();
    f.poll(&mut sink).await.unwrap();
    for id in 1..=3 {
        f.publish("t/a/events", id, r#"{"x":1}"#);
    }
    f.settle().await;
    f.observer.clear();
    f.poll(&mut sink).await.unwrap();
    assert_eq!(sink.sent.len(), 2);
    assert!(f.observer.events().contains(&Observed::MqttBuffered { topic: "t/+/events".into(), count: 1 }));
}

#[tokio::test]
async fn mq32_mq33_drops_and_poison_are_acked_counted_and_never_stall() {
    let f = bridge(1000).await;
    let mut sink = Sink::default();
    f.poll(&mut sink).await.unwrap();
    f.publish("t/a/events", 1, "not json");
    f.publish("t/b/events", 2, "[1,2]");
    f.publish("t/c/events", 3, r#"{"boom":1}"#);
    f.publish("t/d/events", 4, r#"{"drop":1}"#);
    f.publish("t/e/events", 5, r#"{"x":2}"#);
    f.settle().await;
    f.poll(&mut sink).await.unwrap();
    assert_eq!(sent_topics(&sink), vec!["t/e/events"]);
    assert_eq!(f.client.acks(), vec!["t/a/events", "t/b/events", "t/c/events", "t/d/events"]);
    let count = |reason: &str| {
        f.observer
            .events()
            .iter()
            .filter(|e| **e == Observed::MqttMessageDropped { topic: "t/+/events".into(), reason: reason.into() })
            .count()
    };
    assert_eq!((count("poison"), count("filtered")), (3, 1));
}

#[tokio::test]
async fn mq35_a_failed_send_returns_the_batch_to_the_head_in_order() {
    let f = bridge(1000).await;
    let mut sink = Sink::default();
    f.poll(&mut sink).await.unwrap();
    f.publish("t/d/events", 1, r#"{"drop":1}"#);
    f.publish("t/a/events", 2, r#"{"x":1}"#);
    f.publish("t/b/events", 3, r#"{"x":2}"#);
    f.publish("t/c/events", 4, r#"{"x":3}"#);
    f.settle().await;
    sink.fault = Some((false, 1)); // the second forwarded message fails
    assert!(f.poll(&mut sink).await.is_err());
    let conn = f.bridge.connection_for_tests();
    assert_eq!(f.client.acks(), vec!["t/d/events"], "only the intentional drop is acknowledged");
    assert!(conn.pending("t/+/events").is_empty());
    assert_eq!(ids(&conn.buffered("t/+/events")), vec![2, 3, 4]);
    // The next poll re-delivers all three.
    let mut sink = Sink::default();
    f.poll(&mut sink).await.unwrap();
    assert_eq!(sent_topics(&sink), vec!["t/a/events", "t/b/events", "t/c/events"]);
}

#[tokio::test]
async fn mq36_cancellation_while_a_send_blocks_rolls_everything_back() {
    let f = bridge(1000).await;
    let mut sink = Sink::default();
    f.poll(&mut sink).await.unwrap();
    f.publish("t/a/events", 1, r#"{"x":1}"#);
    f.publish("t/b/events", 2, r#"{"x":2}"#);
    f.settle().await;
    sink.fault = Some((true, 1));
    let cancelled = tokio::time::timeout(Duration::from_millis(50), f.poll(&mut sink)).await;
    assert!(cancelled.is_err(), "the second send blocks");
    let conn = f.bridge.connection_for_tests();
    assert!(f.client.acks().is_empty());
    assert!(conn.pending("t/+/events").is_empty());
    assert_eq!(ids(&conn.buffered("t/+/events")), vec![1, 2]);
}

#[tokio::test]
async fn mq37_a_connection_error_fails_the_poll() {
    let f = bridge(1000).await;
    let mut sink = Sink::default();
    f.poll(&mut sink).await.unwrap();
    f.broker.events.lock().unwrap().as_ref().unwrap().send(MqttEvent::ConnectRefused { reason: 7 });
    f.settle().await;
    let error = f.poll(&mut sink).await.unwrap_err();
    assert!(error.to_string().contains("MQTT connect failed: 7"), "{error}");
}

#[tokio::test]
async fn mq22_active_configs_reconcile_the_session() {
    let f = bridge(1000).await;
    let mut sink = Sink::default();
    f.poll(&mut sink).await.unwrap();
    f.client.clear();
    f.bridge.on_active_configs(&Default::default()).await.unwrap();
    assert_eq!(f.client.calls(), vec![Call::Unsubscribe("$share/app/t/+/events".into())]);
    assert_eq!(f.bridge.connection_for_tests().desired(), Some(BTreeSet::new()));
}

#[tokio::test]
async fn mq25_the_session_needs_a_client_id_and_a_usable_group() {
    let broker: Arc<dyn Mqtt> =
        Arc::new(FakeBroker { client: FakeClient::default(), events: Mutex::new(None) }) as Arc<dyn Mqtt>;
    let observer: Arc<dyn Observer> = Arc::new(RecordingObserver::default());
    let stage = || mqtt_extractor(["cfg"]).relay(|_, _, _| Ok(None));
    let err = |client: &str, group: &str| {
        Bridge::new(stage(), MqttBrokerConfig::new(Arc::clone(&broker)), client.into(), group.into(), observer.clone())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(err("", "app").contains("no MQTT client_id configured"));
    for group in ["", "a/b", "a+", "a#"] {
        assert!(err("c", group).contains("shared-subscription group"), "{group:?}");
    }
    assert!(err("c", "app").is_empty());
}

#[tokio::test]
async fn mq03_teardown_disconnects_plainly_and_unsubscribes_nothing() {
    let f = bridge(1000).await;
    let mut sink = Sink::default();
    f.poll(&mut sink).await.unwrap();
    f.client.clear();
    f.bridge.teardown().await.unwrap();
    assert_eq!(f.client.calls(), vec![Call::Disconnect]);
}

#[test]
fn mq21_unsubscribing_an_unknown_filter_is_a_no_op() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.unsubscribe("never/#");
    assert!(f.client.calls().is_empty());
    assert!(f.observer.events().iter().all(|e| !matches!(e, Observed::MqttBuffered { .. })));
}

/// The acknowledgements and the DISCONNECT among a client's calls, in order.
fn acks_and_disconnect(calls: &[Call]) -> Vec<&Call> {
    calls.iter().filter(|c| matches!(c, Call::Ack(..) | Call::Disconnect)).collect()
}

#[tokio::test]
async fn mq_38_a_clean_stop_acks_the_last_committed_poll_before_disconnecting() {
    let f = bridge(1).await;
    let mut sink = Sink::default();
    f.poll(&mut sink).await.unwrap(); // subscribes the view
    f.publish("t/a/events", 1, r#"{"x":1}"#);
    f.publish("t/b/events", 2, r#"{"x":2}"#);
    f.settle().await;
    f.poll(&mut sink).await.unwrap(); // relays and commits 1; 2 stays buffered
    assert_eq!(sink.commits, 1);
    assert!(f.client.acks().is_empty(), "MQ-34: nothing acknowledged before the next poll");
    f.bridge.teardown().await.unwrap();
    let calls = f.client.calls();
    // The committed message is acknowledged, then the session is left; the buffered one, never
    // relayed, is not: the broker keeps it for the session.
    assert_eq!(acks_and_disconnect(&calls), [&Call::Ack("t/a/events".into(), 1), &Call::Disconnect], "{calls:?}");
}

#[tokio::test]
async fn mq_38_a_stop_after_a_cancelled_poll_acks_nothing_of_it() {
    let f = bridge(1).await;
    let mut sink = Sink::default();
    f.poll(&mut sink).await.unwrap();
    f.publish("t/a/events", 1, r#"{"x":1}"#);
    f.publish("t/b/events", 2, r#"{"x":2}"#);
    f.settle().await;
    // Relays and commits 1; the next poll acknowledges 1 at its top, then its send of 2 blocks
    // and the stop cancels it: that page never commits (MQ-36).
    f.poll(&mut sink).await.unwrap();
    sink.fault = Some((true, 1));
    let cancelled = tokio::time::timeout(Duration::from_millis(50), f.poll(&mut sink)).await;
    assert!(cancelled.is_err(), "the send of 2 blocks");
    f.bridge.teardown().await.unwrap();
    let calls = f.client.calls();
    assert_eq!(
        acks_and_disconnect(&calls),
        [&Call::Ack("t/a/events".into(), 1), &Call::Disconnect],
        "2 is never acknowledged: {calls:?}"
    );
}

#[test]
fn a_relayed_message_waits_in_its_page_until_the_page_commits() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    f.conn.mark_pending("t/#", msg("t/x", 2, "{}"));
    assert_eq!(ids(&f.conn.in_page("t/#")), vec![2]);
    assert!(f.conn.pending("t/#").is_empty(), "not acknowledgeable before its page commits");
    f.conn.page_committed("t/#");
    assert!(f.conn.in_page("t/#").is_empty());
    f.conn.ack_all_pending("t/#");
    assert_eq!(f.client.acks(), vec!["t/x"]);
}

#[test]
fn an_aborted_page_returns_its_messages_to_the_buffer_not_to_the_pending_ones() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    let relayed = msg("t/x", 2, "{}");
    f.conn.mark_pending("t/#", relayed.clone());
    f.conn.roll_back("t/#", &[relayed], Vec::new());
    assert!(f.conn.in_page("t/#").is_empty() && f.conn.pending("t/#").is_empty());
    assert_eq!(ids(&f.conn.buffered("t/#")), vec![2]);
    f.conn.ack_all_pending("t/#");
    assert!(f.client.acks().is_empty());
}

#[test]
#[should_panic(expected = "in a page that has not committed")]
fn acknowledging_while_a_page_is_open_is_a_bug() {
    let f = fixture(Duration::ZERO);
    f.conn.on_event(connected());
    f.conn.subscribe("t/#");
    f.conn.mark_pending("t/#", msg("t/x", 2, "{}"));
    f.conn.ack_all_pending("t/#");
}
