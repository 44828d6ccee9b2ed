//! A simulated MQTT v5 broker, and the client adapter of flechtwerk's MQTT port on it.
//!
//! The broker is a deterministic state machine behind a lock (time from the tokio clock, so it
//! runs on madsim's simulated time and on plain tokio alike); clients call into it directly
//! instead of over a socket, and it pushes their events into their event channels. What it
//! models is what the bridge's correctness depends on (measured on Mosquitto 2.0,
//! `shared/research/mqtt-prometheus.md`):
//!
//! - **Persistent sessions** keyed by client id, kept across disconnects and broker restarts
//!   until they expire (`clean_start` is never used: the port always resumes). A reconnect to a
//!   kept session gets `session_present` and every message it had in flight again, in the
//!   order first sent, with the DUP flag and the same packet id; then its queue.
//! - **QoS 1 with manual acknowledgement**: a message stays in flight until its PUBACK arrives on
//!   the connection it was sent on; an ack sent on a connection that has since dropped is lost.
//! - **An in-flight window** per session (Mosquitto's `max_inflight_messages`, 20 by default):
//!   beyond it messages wait in the session's queue; the queue has a limit too
//!   (`max_queued_messages`), beyond which new messages are dropped (Mosquitto keeps the
//!   oldest) and counted.
//! - **Shared subscriptions** `$share/{group}/{filter}`: each message goes to one member
//!   session of the group, round robin over every member whose subscription is alive,
//!   connected or not (an offline member's session keeps absorbing its share, MQ-52). Plain
//!   subscriptions get a copy each.
//! - **Restarts keep sessions** (persistence on) and drop every connection; the broker is
//!   unreachable while it is down. Mosquitto's quirk is modelled: a restored `$share`
//!   subscription is dead — it receives nothing until subscribed again — and a message
//!   published meanwhile is lost.
//! - **Keepalive**: a connection whose client has not been heard of for 1.5 × the keepalive
//!   (a paused or killed process) is closed by the broker; a second connection of a client id
//!   takes the session over and closes the first.
//!
//! Not modelled (the bridge does not depend on them): QoS 2, retained messages, wills, topic
//! aliases, receive maximum negotiation, authentication. Packets are not lost individually (TCP
//! does not lose them): the fault knobs are connection drops, broker restarts, slow acks, and an
//! ack lost together with its connection.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::mqtt::{
    event_channel, matches, EventReceiver, EventSender, Mqtt, MqttClient, MqttError, MqttErrorKind, MqttEvent, Publish,
    QoS, Session,
};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Settings of the simulated broker.
#[derive(Clone, Debug)]
pub struct SimBrokerConfig {
    /// Messages in flight per session (Mosquitto `max_inflight_messages`, default 20).
    pub inflight_window: usize,
    /// Queued messages per session beyond the window (Mosquitto `max_queued_messages`).
    pub queue_limit: usize,
    /// The keepalive the clients use.
    pub keepalive: Duration,
}

impl Default for SimBrokerConfig {
    fn default() -> Self {
        SimBrokerConfig { inflight_window: 20, queue_limit: 1000, keepalive: Duration::from_secs(5) }
    }
}

/// One published message as the broker holds it.
#[derive(Clone, Debug)]
pub struct Held {
    /// The broker-wide publish number (1, 2, …): tells copies of a message apart in checks.
    pub number: u64,
    /// The topic.
    pub topic: String,
    /// The payload.
    pub payload: Bytes,
}

/// What happened to a published message, for the checks.
#[derive(Clone, Debug, Default)]
pub struct PublishOutcome {
    /// The sessions it was queued for.
    pub queued_for: Vec<String>,
    /// Sessions that dropped it (queue full).
    pub dropped_by: Vec<String>,
    /// No live subscription matched (e.g. only dead restored `$share` subscriptions).
    pub unrouted: bool,
}

/// An acknowledgement the broker applied.
#[derive(Clone, Debug)]
pub struct AckSeen {
    /// The session.
    pub client_id: String,
    /// The message.
    pub message: Held,
}

#[derive(Debug)]
struct Sub {
    filter: String,
    group: Option<String>,
    /// Restored after a broker restart and not subscribed again (the Mosquitto quirk).
    dead: bool,
}

#[derive(Debug)]
struct Conn {
    token: u64,
    number: u64,
    events: EventSender,
    closed: Arc<Notify>,
    last_seen: Instant,
}

#[derive(Debug)]
struct SessionState {
    subs: Vec<Sub>,
    queue: VecDeque<Held>,
    /// In flight: (packet id, message), in the order first sent.
    inflight: Vec<(u16, Held)>,
    next_packet_id: u16,
    conn: Option<Conn>,
    expiry: Duration,
    /// When the last connection ended (for expiry).
    away_since: Option<Instant>,
}

/// Hook called on every applied acknowledgement (for the checks).
pub type AckHook = Arc<dyn Fn(&AckSeen) + Send + Sync>;

struct State {
    config: SimBrokerConfig,
    sessions: BTreeMap<String, SessionState>,
    /// Round-robin position per share group.
    rr: BTreeMap<String, usize>,
    up: bool,
    next_token: u64,
    published: u64,
    outcomes: BTreeMap<u64, PublishOutcome>,
    /// Deliveries (first sends and redeliveries) per publish number.
    deliveries: BTreeMap<u64, u32>,
    on_ack: Option<AckHook>,
    on_log: Option<LogHook>,
    log: Vec<String>,
}

impl State {
    fn note(&mut self, lines: Vec<String>) {
        match &self.on_log {
            Some(hook) => lines.into_iter().for_each(|l| hook(l)),
            None => self.log.extend(lines),
        }
    }
}

/// Hook receiving the broker's event log lines as they happen (for a simulation's trace).
pub type LogHook = Arc<dyn Fn(String) + Send + Sync>;

/// The simulated broker (cheap to clone; clones share the broker).
#[derive(Clone)]
pub struct MqttBroker {
    state: Arc<Mutex<State>>,
    name: String,
}

impl MqttBroker {
    /// A broker that is up, with `config`.
    pub fn new(config: SimBrokerConfig) -> Self {
        MqttBroker {
            state: Arc::new(Mutex::new(State {
                config,
                sessions: BTreeMap::new(),
                rr: BTreeMap::new(),
                up: true,
                next_token: 1,
                published: 0,
                outcomes: BTreeMap::new(),
                deliveries: BTreeMap::new(),
                on_ack: None,
                on_log: None,
                log: Vec::new(),
            })),
            name: "sim-mqtt:1883".into(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Calls `hook` on every applied acknowledgement.
    pub fn on_ack(&self, hook: AckHook) {
        self.lock().on_ack = Some(hook);
    }

    /// Sends the broker's event log to `hook` as it happens (instead of keeping it).
    pub fn on_log(&self, hook: LogHook) {
        self.lock().on_log = Some(hook);
    }

    /// Takes the broker's event log (connects, drops, restarts) for the trace.
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().log)
    }

    /// Publishes a QoS 1 message as a device would; `None` while the broker is down (the device
    /// retries). Returns the publish number.
    pub fn publish(&self, topic: &str, payload: impl Into<Bytes>) -> Option<u64> {
        let mut state = self.lock();
        if !state.up {
            return None;
        }
        state.published += 1;
        let held = Held { number: state.published, topic: topic.to_owned(), payload: payload.into() };
        let mut outcome = PublishOutcome::default();
        let mut targets: Vec<String> = Vec::new();
        // Plain subscriptions: a copy each.
        for (client, session) in &state.sessions {
            if session.subs.iter().any(|s| s.group.is_none() && !s.dead && matches(&s.filter, topic)) {
                targets.push(client.clone());
            }
        }
        // Shared: one member per group, round robin over live members (connected or not).
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (client, session) in &state.sessions {
            for sub in &session.subs {
                if let Some(group) = &sub.group {
                    if !sub.dead && matches(&sub.filter, topic) {
                        let members = groups.entry(group.clone()).or_default();
                        if !members.contains(client) {
                            members.push(client.clone());
                        }
                    }
                }
            }
        }
        for (group, members) in groups {
            let at = state.rr.entry(group).or_default();
            let pick = members[*at % members.len()].clone();
            *at = at.wrapping_add(1);
            if !targets.contains(&pick) {
                targets.push(pick);
            }
        }
        outcome.unrouted = targets.is_empty();
        let limit = state.config.queue_limit;
        let window = state.config.inflight_window;
        let State { sessions, deliveries, .. } = &mut *state;
        for client in targets {
            let session = sessions.get_mut(&client).expect("a target has a session");
            if session.queue.len() >= limit {
                outcome.dropped_by.push(client);
                continue;
            }
            session.queue.push_back(held.clone());
            outcome.queued_for.push(client);
            pump(session, window, deliveries);
        }
        state.outcomes.insert(held.number, outcome);
        Some(held.number)
    }

    /// How often publish `number` was sent to a client (first sends and redeliveries).
    pub fn deliveries(&self, number: u64) -> u32 {
        self.lock().deliveries.get(&number).copied().unwrap_or(0)
    }

    /// What became of publish `number`.
    pub fn outcome(&self, number: u64) -> Option<PublishOutcome> {
        self.lock().outcomes.get(&number).cloned()
    }

    /// The broker restarts: every connection drops, sessions and their messages stay (with
    /// persistence), restored `$share` subscriptions are dead until subscribed again; down
    /// (refusing connections and publishes) until [`start`](Self::start).
    pub fn stop(&self) {
        let mut state = self.lock();
        state.up = false;
        let now = Instant::now();
        let mut log = Vec::new();
        for (client, session) in &mut state.sessions {
            if let Some(conn) = session.conn.take() {
                conn.events.send(MqttEvent::Disconnected { reason: "broker went away".into() });
                conn.closed.notify_one();
                session.away_since = Some(now);
                log.push(format!("mqtt: {client} dropped (broker stop)"));
            }
            for sub in &mut session.subs {
                if sub.group.is_some() {
                    sub.dead = true;
                }
            }
        }
        log.push("mqtt: broker down".into());
        state.note(log);
    }

    /// The broker is reachable again.
    pub fn start(&self) {
        let mut state = self.lock();
        state.up = true;
        state.note(vec!["mqtt: broker up".into()]);
    }

    /// Whether the broker is up.
    pub fn is_up(&self) -> bool {
        self.lock().up
    }

    /// Drops `client_id`'s connection (a network failure): its client sees a disconnect and
    /// reconnects; acks not yet applied are lost.
    pub fn drop_connection(&self, client_id: &str) -> bool {
        let mut state = self.lock();
        let Some(session) = state.sessions.get_mut(client_id) else { return false };
        let Some(conn) = session.conn.take() else { return false };
        conn.events.send(MqttEvent::Disconnected { reason: "connection reset".into() });
        conn.closed.notify_one();
        session.away_since = Some(Instant::now());
        state.note(vec![format!("mqtt: {client_id} connection dropped")]);
        true
    }

    /// Closes connections whose client was silent for 1.5 × the keepalive; expires sessions.
    /// Call it periodically (a simulation runs [`run_housekeeping`](Self::run_housekeeping)).
    pub fn housekeeping(&self) {
        let mut state = self.lock();
        let now = Instant::now();
        let limit = state.config.keepalive * 3 / 2;
        let mut log = Vec::new();
        for (client, session) in &mut state.sessions {
            if session.conn.as_ref().is_some_and(|c| now - c.last_seen > limit) {
                let conn = session.conn.take().expect("checked");
                conn.events.send(MqttEvent::Disconnected { reason: "keepalive timeout".into() });
                conn.closed.notify_one();
                session.away_since = Some(now);
                log.push(format!("mqtt: {client} keepalive timeout"));
            }
        }
        state.sessions.retain(|client, session| {
            let expired = session.conn.is_none() && session.away_since.is_some_and(|t| now - t >= session.expiry);
            if expired {
                log.push(format!("mqtt: session {client} expired"));
            }
            !expired
        });
        state.note(log);
    }

    /// Runs [`housekeeping`](Self::housekeeping) every 500 ms, forever.
    pub async fn run_housekeeping(self) {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            self.housekeeping();
        }
    }

    /// The live subscriptions of `client_id`, as `(group, filter)`; `None` without a session.
    pub fn subscriptions(&self, client_id: &str) -> Option<Vec<(Option<String>, String)>> {
        self.lock()
            .sessions
            .get(client_id)
            .map(|s| s.subs.iter().filter(|s| !s.dead).map(|s| (s.group.clone(), s.filter.clone())).collect())
    }

    /// Messages held for `client_id` (in flight and queued).
    pub fn held(&self, client_id: &str) -> usize {
        self.lock().sessions.get(client_id).map_or(0, |s| s.inflight.len() + s.queue.len())
    }

    // ---- the client side ----

    fn connect(&self, client_id: &str, expiry: Duration, number: u64, events: &EventSender) -> Result<Conn2, String> {
        let mut state = self.lock();
        if !state.up {
            return Err("connection refused".into());
        }
        let token = state.next_token;
        state.next_token += 1;
        let window = state.config.inflight_window;
        let now = Instant::now();
        let present = state.sessions.contains_key(client_id);
        let State { sessions, deliveries, .. } = &mut *state;
        let session = sessions.entry(client_id.to_owned()).or_insert_with(|| SessionState {
            subs: Vec::new(),
            queue: VecDeque::new(),
            inflight: Vec::new(),
            next_packet_id: 1,
            conn: None,
            expiry,
            away_since: None,
        });
        session.expiry = expiry;
        let mut log = Vec::new();
        if let Some(old) = session.conn.take() {
            // Session takeover: the old connection is closed.
            old.events.send(MqttEvent::Disconnected { reason: "session taken over".into() });
            old.closed.notify_one();
            log.push(format!("mqtt: {client_id} session taken over"));
        }
        let closed = Arc::new(Notify::new());
        events.send(MqttEvent::Connected { connection: number, session_present: present });
        // Redelivery: everything in flight, in the order first sent, with DUP.
        for (packet_id, held) in &session.inflight {
            events.send(MqttEvent::Publish(publish_of(held, *packet_id, true, number)));
            *deliveries.entry(held.number).or_default() += 1;
        }
        session.conn =
            Some(Conn { token, number, events: events.clone(), closed: Arc::clone(&closed), last_seen: now });
        session.away_since = None;
        pump(session, window, deliveries);
        log.push(format!("mqtt: {client_id} connected #{number} (session present: {present})"));
        state.note(log);
        Ok(Conn2 { token, closed })
    }

    fn with_conn<R>(
        &self,
        client_id: &str,
        token: u64,
        f: impl FnOnce(&mut SessionState, usize, &mut BTreeMap<u64, u32>) -> R,
    ) -> Option<R> {
        let mut state = self.lock();
        let window = state.config.inflight_window;
        let State { sessions, deliveries, .. } = &mut *state;
        let session = sessions.get_mut(client_id)?;
        if session.conn.as_ref().is_none_or(|c| c.token != token) {
            return None;
        }
        Some(f(session, window, deliveries))
    }

    fn ping(&self, client_id: &str, token: u64) -> bool {
        self.with_conn(client_id, token, |session, _, _| {
            if let Some(conn) = &mut session.conn {
                conn.last_seen = Instant::now();
            }
        })
        .is_some()
    }

    fn subscribe(&self, client_id: &str, token: u64, wire: &str) {
        let (group, filter) = parse_wire(wire);
        self.with_conn(client_id, token, |session, _, _| {
            session.subs.retain(|s| !(s.group == group && s.filter == filter));
            session.subs.push(Sub { filter, group, dead: false });
        });
    }

    fn unsubscribe(&self, client_id: &str, token: u64, wire: &str) {
        let (group, filter) = parse_wire(wire);
        self.with_conn(client_id, token, |session, _, _| {
            session.subs.retain(|s| !(s.group == group && s.filter == filter));
        });
    }

    fn ack(&self, client_id: &str, token: u64, packet_id: u16) {
        let acked = self.with_conn(client_id, token, |session, window, deliveries| {
            let at = session.inflight.iter().position(|(id, _)| *id == packet_id)?;
            let (_, held) = session.inflight.remove(at);
            pump(session, window, deliveries);
            Some(held)
        });
        if let Some(Some(message)) = acked {
            let hook = self.lock().on_ack.clone();
            if let Some(hook) = hook {
                hook(&AckSeen { client_id: client_id.to_owned(), message });
            }
        }
    }

    fn disconnect(&self, client_id: &str, token: u64) {
        self.with_conn(client_id, token, |session, _, _| {
            session.conn = None;
            session.away_since = Some(Instant::now());
        });
    }
}

struct Conn2 {
    token: u64,
    closed: Arc<Notify>,
}

fn parse_wire(wire: &str) -> (Option<String>, String) {
    match wire.strip_prefix("$share/") {
        Some(rest) => match rest.split_once('/') {
            Some((group, filter)) => (Some(group.to_owned()), filter.to_owned()),
            None => (None, wire.to_owned()),
        },
        None => (None, wire.to_owned()),
    }
}

fn publish_of(held: &Held, packet_id: u16, dup: bool, connection: u64) -> Publish {
    Publish {
        topic: held.topic.clone(),
        payload: held.payload.clone(),
        qos: QoS::AtLeastOnce,
        packet_id,
        dup,
        connection,
    }
}

/// Moves queued messages into the in-flight window of a connected session, sending each.
fn pump(session: &mut SessionState, window: usize, deliveries: &mut BTreeMap<u64, u32>) {
    let Some(conn) = &session.conn else { return };
    while session.inflight.len() < window {
        let Some(held) = session.queue.pop_front() else { break };
        let mut packet_id = session.next_packet_id;
        while session.inflight.iter().any(|(id, _)| *id == packet_id) {
            packet_id = packet_id.checked_add(1).unwrap_or(1);
        }
        session.next_packet_id = packet_id.checked_add(1).unwrap_or(1);
        conn.events.send(MqttEvent::Publish(publish_of(&held, packet_id, false, conn.number)));
        *deliveries.entry(held.number).or_default() += 1;
        session.inflight.push((packet_id, held));
    }
}

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
}

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
        SimMqtt { broker, faults, rng, subscribed: None, reachable: Arc::new(|| true) }
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
    /// The number of the connection the client uses (0: none): events of an abandoned
    /// connection still on their way are discarded, as a closed socket's unread data.
    current: std::sync::atomic::AtomicU64,
}

impl ClientShared {
    fn token(&self) -> u64 {
        *self.token.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until the broker is reachable, at most `bound`; whether it is.
    async fn until_reachable(&self, bound: Duration) -> bool {
        let deadline = Instant::now().checked_add(bound);
        while !(self.reachable)() {
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
        if (self.reachable)() {
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
        if !to.send(event) {
            return;
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
            current: std::sync::atomic::AtomicU64::new(0),
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
    let keepalive = shared.broker.lock().config.keepalive;
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
