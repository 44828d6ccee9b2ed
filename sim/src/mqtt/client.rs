//! The port adapter: clients of the simulated broker, as a replica is given them for its
//! [`Mqtt`]; each client's connection loop, and the network between a client and the broker.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flechtwerk::mqtt::{
    event_channel, EventReceiver, EventSender, Mqtt, MqttClient, MqttError, MqttErrorKind, MqttEvent, Publish, QoS,
    Session,
};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::broker::MqttBroker;
use super::wire::parse_wire;

/// Fault knobs of the simulated clients.
#[derive(Clone, Debug, Default)]
pub struct ClientFaults {
    /// Longest delay of an acknowledgement on its way to the broker (uniform from zero; a
    /// connection that drops meanwhile loses it).
    pub slow_ack_max: Duration,
}

/// The port adapter: clients of `broker` (what a replica is given as its [`Mqtt`]).
#[derive(Clone)]
pub struct SimMqtt {
    broker: MqttBroker,
    faults: ClientFaults,
    /// Uniform jitter source for slow acks (seeded by the simulation's RNG).
    rng: Arc<dyn Fn(u64) -> u64 + Send + Sync>,
    subscribed: Option<SubscriptionLog>,
    reachable: Reachable,
    on_send_ack: Option<SendAckHook>,
    received: Option<ReceiptLog>,
}

/// Hook called whenever the bridge hands the client an acknowledgement to send (before it
/// travels: a slow ack or a partition may delay it, a dropped connection lose it), with the
/// client id, the message it names and where it goes: where "no acknowledgement before the
/// commit" and "an acknowledgement only on its message's connection" are checked at the send.
pub type SendAckHook = Arc<dyn Fn(&str, &Publish, AckRoute) + Send + Sync>;

/// Where an acknowledgement the bridge asked for goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckRoute {
    /// The client's connection it leaves on (0: none, the client discards it). Its packet id
    /// names, there, whatever the session holds under it.
    pub leaves_on: u64,
    /// The last connection whose CONNACK the client had handed to the bridge when it asked
    /// (a bridge that asks for an ack of an earlier connection's message after this names a
    /// packet id it knew to be stale).
    pub bridge_told: u64,
}

/// Every message the clients of one [`SimMqtt`] handed to the bridge (what one process received
/// over its lifetime): topic, payload, and the number of the connection it came on.
pub type ReceiptLog = Arc<Mutex<BTreeSet<(String, bytes::Bytes, u64)>>>;

/// Whether the client's node can reach the broker right now (a network partition says no).
pub type Reachable = Arc<dyn Fn() -> bool + Send + Sync>;

/// How long a connection attempt to an unreachable broker takes to fail (rumqttc's default
/// connection timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a client waiting for the network looks again.
const REACHABILITY_POLL: Duration = Duration::from_millis(50);

/// Every `(group, filter)` the clients of one [`SimMqtt`] subscribed (what one process asked for
/// over its lifetime; unsubscribing does not remove an entry).
pub type SubscriptionLog = Arc<Mutex<BTreeSet<(Option<String>, String)>>>;

impl SimMqtt {
    /// Clients of `broker`. `rng(n)` returns a number below `n` (the simulation's seeded RNG).
    pub fn new(broker: MqttBroker, faults: ClientFaults, rng: Arc<dyn Fn(u64) -> u64 + Send + Sync>) -> Self {
        SimMqtt {
            broker,
            faults,
            rng,
            subscribed: None,
            reachable: Arc::new(|| true),
            on_send_ack: None,
            received: None,
        }
    }

    /// The network between the clients and the broker follows `reachable`: while it says no,
    /// nothing the client sends arrives and nothing the broker sends is read, as over a TCP
    /// connection whose packets are dropped (what a partition of the client's node does).
    /// Packets are retransmitted once it says yes again, if the connection still lives: a
    /// client whose keepalive ping gets no answer within half its keepalive gives the
    /// connection up (rumqttc's ping timeout), and the broker drops a client silent for 1.5 ×
    /// the keepalive; a connection attempt fails after 5 s (rumqttc's connection timeout).
    pub fn reachable(mut self, reachable: Reachable) -> Self {
        self.reachable = reachable;
        self
    }

    /// Records every subscription its clients make into `log`.
    pub fn logging_subscriptions(mut self, log: SubscriptionLog) -> Self {
        self.subscribed = Some(log);
        self
    }

    /// Calls `hook` at every acknowledgement the bridge asks its clients to send, as it asks.
    pub fn on_send_ack(mut self, hook: SendAckHook) -> Self {
        self.on_send_ack = Some(hook);
        self
    }

    /// Records every message its clients hand to the bridge into `log`.
    pub fn logging_receipts(mut self, log: ReceiptLog) -> Self {
        self.received = Some(log);
        self
    }
}

struct ClientShared {
    broker: MqttBroker,
    client_id: String,
    /// The current connection's token (0: none).
    token: Mutex<u64>,
    stopping: std::sync::atomic::AtomicBool,
    stop: Notify,
    faults: ClientFaults,
    rng: Arc<dyn Fn(u64) -> u64 + Send + Sync>,
    subscribed: Option<SubscriptionLog>,
    reachable: Reachable,
    on_send_ack: Option<SendAckHook>,
    received: Option<ReceiptLog>,
    /// The number of the connection the client uses (0: none): events of an abandoned
    /// connection still on their way are discarded, as a closed socket's unread data.
    current: std::sync::atomic::AtomicU64,
    /// The number of the last connection whose CONNACK was handed to the bridge.
    told: std::sync::atomic::AtomicU64,
}

impl ClientShared {
    fn token(&self) -> u64 {
        *self.token.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the broker can be reached now: the client's node is not cut off the network,
    /// nor the client off the broker's ([`MqttBroker::cut`]).
    fn reaches(&self) -> bool {
        (self.reachable)() && self.broker.reaches(&self.client_id)
    }

    /// Waits until the broker is reachable, at most `bound`; whether it is.
    async fn until_reachable(&self, bound: Duration) -> bool {
        let deadline = Instant::now().checked_add(bound);
        while !self.reaches() {
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return false;
            }
            tokio::time::sleep(REACHABILITY_POLL).await;
        }
        true
    }

    /// Runs `send` now if the broker is reachable, else once it is again (a retransmission;
    /// the broker ignores it if the connection it names is gone by then).
    fn transmit(self: &Arc<Self>, send: impl FnOnce(&ClientShared) + Send + 'static) {
        if self.reaches() {
            send(self);
        } else {
            let shared = Arc::clone(self);
            tokio::spawn(async move {
                shared.until_reachable(Duration::MAX).await;
                send(&shared);
            });
        }
    }
}

/// Carries the broker's events of connection `number` to the client: in order, held while the
/// network is down, dropped once the client gave the connection up.
async fn forward(shared: Arc<ClientShared>, number: u64, mut from: EventReceiver, to: EventSender) {
    use std::sync::atomic::Ordering::SeqCst;
    while let Some(event) = from.recv().await {
        shared.until_reachable(Duration::MAX).await;
        if shared.current.load(SeqCst) != number {
            continue;
        }
        let connected = match &event {
            MqttEvent::Connected { connection, .. } => Some(*connection),
            _ => None,
        };
        let receipt = match (&event, &shared.received) {
            (MqttEvent::Publish(publish), Some(_)) => {
                Some((publish.topic.clone(), publish.payload.clone(), publish.connection))
            }
            _ => None,
        };
        if !to.send(event) {
            return;
        }
        if let Some(connection) = connected {
            shared.told.store(connection, SeqCst);
        }
        if let (Some(receipt), Some(log)) = (receipt, &shared.received) {
            log.lock().unwrap_or_else(|p| p.into_inner()).insert(receipt);
        }
    }
}

struct SimClient {
    shared: Arc<ClientShared>,
}

impl Mqtt for SimMqtt {
    fn connect(&self, session: &Session) -> Result<(Box<dyn MqttClient>, EventReceiver), MqttError> {
        let (events, receiver) = event_channel();
        let shared = Arc::new(ClientShared {
            broker: self.broker.clone(),
            client_id: session.client_id.clone(),
            token: Mutex::new(0),
            stopping: std::sync::atomic::AtomicBool::new(false),
            stop: Notify::new(),
            faults: self.faults.clone(),
            rng: Arc::clone(&self.rng),
            subscribed: self.subscribed.clone(),
            reachable: Arc::clone(&self.reachable),
            on_send_ack: self.on_send_ack.clone(),
            received: self.received.clone(),
            current: std::sync::atomic::AtomicU64::new(0),
            told: std::sync::atomic::AtomicU64::new(0),
        });
        tokio::spawn(drive(Arc::clone(&shared), session.session_expiry, events));
        Ok((Box::new(SimClient { shared }), receiver))
    }

    fn broker(&self) -> String {
        self.broker.name.clone()
    }
}

/// The client's connection loop (its own task, as the rumqttc adapter's event loop): connect,
/// keep alive, and after a drop reconnect with a backoff.
async fn drive(shared: Arc<ClientShared>, expiry: Duration, events: EventSender) {
    use std::sync::atomic::Ordering::SeqCst;
    let keepalive = shared.broker.keepalive();
    let mut number = 0;
    let mut backoff = Duration::from_millis(100);
    while !shared.stopping.load(SeqCst) {
        let attempt = if shared.until_reachable(CONNECT_TIMEOUT).await {
            // The broker's events of this connection reach the client through the network.
            let (to_client, from_broker) = event_channel();
            shared.current.store(number + 1, SeqCst);
            tokio::spawn(forward(Arc::clone(&shared), number + 1, from_broker, events.clone()));
            shared.broker.connect(&shared.client_id, expiry, number + 1, &to_client)
        } else {
            Err("connection timed out".to_owned())
        };
        match attempt {
            Ok(conn) => {
                number += 1;
                backoff = Duration::from_millis(100);
                *shared.token.lock().unwrap_or_else(|p| p.into_inner()) = conn.token;
                // Keep alive until the broker closes the connection, the pings go unanswered,
                // or we stop.
                loop {
                    tokio::select! {
                        biased;
                        () = conn.closed.notified() => break,
                        () = shared.stop.notified() => {
                            let token = conn.token;
                            shared.transmit(move |s| s.broker.disconnect(&s.client_id, token));
                            return;
                        }
                        () = tokio::time::sleep(keepalive / 2) => {
                            if !shared.until_reachable(keepalive / 2).await {
                                // No PINGRESP: the client gives the connection up (the broker
                                // notices only by the silence).
                                shared.current.store(0, SeqCst);
                                if !events.send(MqttEvent::Disconnected { reason: "keepalive timeout".into() }) {
                                    return;
                                }
                                break;
                            }
                            if !shared.broker.ping(&shared.client_id, conn.token) {
                                break;
                            }
                        }
                    }
                }
                *shared.token.lock().unwrap_or_else(|p| p.into_inner()) = 0;
            }
            Err(reason) => {
                shared.current.store(0, SeqCst);
                if !events.send(MqttEvent::Disconnected { reason }) {
                    return;
                }
            }
        }
        tokio::select! {
            biased;
            () = shared.stop.notified() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

impl MqttClient for SimClient {
    fn subscribe(&self, filter: &str, qos: QoS) -> Result<(), MqttError> {
        let s = &self.shared;
        // Every message is delivered at QoS 1 (the devices publish at QoS 1; QoS 0 subscriptions
        // are not modelled).
        let _ = qos;
        if let Some(log) = &s.subscribed {
            log.lock().unwrap_or_else(|p| p.into_inner()).insert(parse_wire(filter));
        }
        let (token, filter) = (s.token(), filter.to_owned());
        s.transmit(move |s| s.broker.subscribe(&s.client_id, token, &filter));
        Ok(())
    }

    fn unsubscribe(&self, filter: &str) -> Result<(), MqttError> {
        let s = &self.shared;
        let (token, filter) = (s.token(), filter.to_owned());
        s.transmit(move |s| s.broker.unsubscribe(&s.client_id, token, &filter));
        Ok(())
    }

    fn ack(&self, publish: &Publish) -> Result<(), MqttError> {
        if publish.qos == QoS::AtMostOnce {
            return Ok(());
        }
        let s = &self.shared;
        let token = s.token();
        if let Some(hook) = &s.on_send_ack {
            use std::sync::atomic::Ordering::SeqCst;
            let leaves_on = if token == 0 { 0 } else { s.current.load(SeqCst) };
            hook(&s.client_id, publish, AckRoute { leaves_on, bridge_told: s.told.load(SeqCst) });
        }
        if token == 0 {
            // Queued while disconnected: discarded (rumqttc does the same).
            return Ok(());
        }
        let max = s.faults.slow_ack_max.as_millis() as u64;
        let packet_id = publish.packet_id;
        if max == 0 {
            s.transmit(move |s| s.broker.ack(&s.client_id, token, packet_id));
        } else {
            let delay = Duration::from_millis((s.rng)(max + 1));
            let shared = Arc::clone(s);
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                shared.transmit(move |s| s.broker.ack(&s.client_id, token, packet_id));
            });
        }
        Ok(())
    }

    fn disconnect(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), MqttError>> + Send + '_>> {
        Box::pin(async move {
            let s = &self.shared;
            if s.stopping.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Err(MqttError::new(MqttErrorKind::Closed, "disconnect", "already stopped"));
            }
            let token = s.token();
            s.transmit(move |s| s.broker.disconnect(&s.client_id, token));
            s.stop.notify_one();
            Ok(())
        })
    }
}
