//! The simulated broker: sessions, subscriptions, the in-flight window and queue per session,
//! restarts and keepalive (see the [module](super) docs for what it models).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::mqtt::{matches, EventSender, MqttEvent};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::wire::{parse_wire, publish_of};

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
    /// Sessions that lost it unacknowledged, with the session itself (a restart without
    /// persistence, an expiry, a clean start): the broker will never send it (again) to anyone.
    /// Each with the number of the client's connection it was last sent on (0: it was queued,
    /// never sent).
    pub lost_by: Vec<(String, u64)>,
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
    /// The client's number of the last connection the session had (0: none yet): what its
    /// in-flight messages were last sent on.
    last_number: u64,
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
    /// Clients cut off the broker (an outage of the network between them): until when.
    cut: BTreeMap<String, Instant>,
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
    pub(super) name: String,
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
                cut: BTreeMap::new(),
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

    /// The broker restarts *without persistence* (Mosquitto with `persistence false`, or its
    /// store lost): as [`stop`](Self::stop), and every session goes with its subscriptions, its
    /// in-flight messages and its queue (recorded as lost, [`PublishOutcome::lost_by`]). After
    /// [`start`](Self::start) a client's CONNECT finds no session (`session_present` false),
    /// and the new session's packet ids start again from 1.
    pub fn stop_without_persistence(&self) {
        self.stop();
        let mut state = self.lock();
        let sessions = std::mem::take(&mut state.sessions);
        let mut log = Vec::new();
        for (client, session) in sessions {
            let lost = forget(&mut state.outcomes, &client, session);
            log.push(format!("mqtt: session {client} lost with the broker's memory ({lost} messages)"));
        }
        state.note(log);
    }

    /// A client with `client_id` connects with `clean_start` and a session expiry of 0, then
    /// disconnects (an operator's tool, or a second deployment misconfigured with the same
    /// client id): it takes the session over, closing the connection of its holder, and the
    /// clean start discards the session with everything it held. The holder's next CONNECT
    /// finds no session. Whether there was a session.
    pub fn clean_start(&self, client_id: &str) -> bool {
        let mut state = self.lock();
        if !state.up {
            return false;
        }
        let Some(mut session) = state.sessions.remove(client_id) else { return false };
        let mut log = Vec::new();
        if let Some(conn) = session.conn.take() {
            conn.events.send(MqttEvent::Disconnected { reason: "session taken over".into() });
            conn.closed.notify_one();
            log.push(format!("mqtt: {client_id} session taken over"));
        }
        let lost = forget(&mut state.outcomes, client_id, session);
        log.push(format!("mqtt: session {client_id} discarded by a clean start ({lost} messages)"));
        state.note(log);
        true
    }

    /// Cuts the network between `client_id` and the broker for `outage`: nothing either sends
    /// arrives meanwhile (the client gives the connection up after an unanswered ping, the
    /// broker drops it after 1.5 × the keepalive of silence, and reconnects time out). A
    /// session whose expiry is shorter than what remains of the outage then expires.
    pub fn cut(&self, client_id: &str, outage: Duration) {
        let mut state = self.lock();
        let until = Instant::now() + outage;
        state.cut.insert(client_id.to_owned(), until);
        state.note(vec![format!("mqtt: {client_id} cut off the broker for {outage:?}")]);
    }

    /// Whether `client_id` can reach the broker's network now (not [cut](Self::cut) off).
    pub fn reaches(&self, client_id: &str) -> bool {
        self.lock().cut.get(client_id).is_none_or(|until| Instant::now() >= *until)
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
        let expired: Vec<String> = state
            .sessions
            .iter()
            .filter(|(_, s)| s.conn.is_none() && s.away_since.is_some_and(|t| now - t >= s.expiry))
            .map(|(client, _)| client.clone())
            .collect();
        for client in expired {
            let session = state.sessions.remove(&client).expect("listed above");
            let lost = forget(&mut state.outcomes, &client, session);
            log.push(format!("mqtt: session {client} expired ({lost} messages)"));
        }
        state.cut.retain(|_, until| now < *until);
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

    /// The keepalive the clients use.
    pub(super) fn keepalive(&self) -> Duration {
        self.lock().config.keepalive
    }

    pub(super) fn connect(
        &self,
        client_id: &str,
        expiry: Duration,
        number: u64,
        events: &EventSender,
    ) -> Result<Conn2, String> {
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
            last_number: 0,
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
        session.last_number = number;
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

    pub(super) fn ping(&self, client_id: &str, token: u64) -> bool {
        self.with_conn(client_id, token, |session, _, _| {
            if let Some(conn) = &mut session.conn {
                conn.last_seen = Instant::now();
            }
        })
        .is_some()
    }

    pub(super) fn subscribe(&self, client_id: &str, token: u64, wire: &str) {
        let (group, filter) = parse_wire(wire);
        self.with_conn(client_id, token, |session, _, _| {
            session.subs.retain(|s| !(s.group == group && s.filter == filter));
            session.subs.push(Sub { filter, group, dead: false });
        });
    }

    pub(super) fn unsubscribe(&self, client_id: &str, token: u64, wire: &str) {
        let (group, filter) = parse_wire(wire);
        self.with_conn(client_id, token, |session, _, _| {
            session.subs.retain(|s| !(s.group == group && s.filter == filter));
        });
    }

    pub(super) fn ack(&self, client_id: &str, token: u64, packet_id: u16) {
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

    pub(super) fn disconnect(&self, client_id: &str, token: u64) {
        self.with_conn(client_id, token, |session, _, _| {
            session.conn = None;
            session.away_since = Some(Instant::now());
        });
    }
}

/// A connection the broker accepted, as its client holds it: the token that names it in the
/// client's later calls, and the notification that the broker closed it.
pub(super) struct Conn2 {
    pub(super) token: u64,
    pub(super) closed: Arc<Notify>,
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

/// Records every message `session` of `client` held (in flight or queued) as lost with it;
/// returns how many.
fn forget(outcomes: &mut BTreeMap<u64, PublishOutcome>, client: &str, session: SessionState) -> usize {
    let sent = session.inflight.into_iter().map(|(_, held)| (held, session.last_number));
    let held: Vec<(Held, u64)> = sent.chain(session.queue.into_iter().map(|held| (held, 0))).collect();
    for (held, number) in &held {
        if let Some(outcome) = outcomes.get_mut(&held.number) {
            outcome.lost_by.push((client.to_owned(), *number));
        }
    }
    held.len()
}
