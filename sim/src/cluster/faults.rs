//! Fault knobs of the simulated cluster: a [`FaultPlan`] a scenario sets up and may change while
//! the run goes on.
//!
//! Every decision draws from `madsim::rand` (seeded under simulation), so a seed replays its
//! faults exactly. Request faults are applied by the broker node's server (the network path);
//! marker faults by the broker state machine through [`BrokerFaults`]. Node-level faults (kill,
//! restart, pause, network partitions, broker restarts) are the scenario's, through madsim's
//! `Handle` / `NetSim` and the helpers on `Cluster`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flechtwerk::kafka::KafkaErrorKind;
use madsim::rand::{thread_rng, Rng};

use super::protocol::{ErrorCode, Request, RequestKind};

/// A request delay never exceeds this: a delayed request is still handled before the client's
/// request timeout ([`REQUEST_TIMEOUT`](super::client::REQUEST_TIMEOUT)) runs out. A request
/// held *past* the timeout is a knob of its own ([`RequestFaults::hold_past_timeout`]): by then
/// the client has closed that connection, so the broker discards the request if it has handled
/// anything on the client's newer connection (as a closed TCP connection's bytes are). Response
/// delays are not bounded: a late response is simply ignored by a client that gave up.
pub const REQUEST_DELAY_MAX: Duration = Duration::from_millis(2_000);

/// Faults of one request kind. Probabilities are per request, in `0.0..=1.0`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestFaults {
    /// The request is lost before the broker sees it.
    pub drop_request: f64,
    /// The broker handles the request, but the response is lost.
    pub drop_response: f64,
    /// The request reaches the broker late (uniform in `0..=delay_max`, capped at
    /// [`REQUEST_DELAY_MAX`]).
    pub delay_request: f64,
    /// The response leaves the broker late (uniform in `0..=delay_max`).
    pub delay_response: f64,
    /// The request is held in the network until after the client's request timeout
    /// (`REQUEST_TIMEOUT` plus up to `delay_max`): the client retries on a new connection
    /// meanwhile, and the late copy reaches the broker after the retry.
    pub hold_past_timeout: f64,
    /// Upper bound of an injected delay.
    pub delay_max: Duration,
    /// The broker answers with a retriable error (NOT_COORDINATOR / NOT_LEADER_OR_FOLLOWER)
    /// without handling the request.
    pub retriable_error: f64,
    /// The broker answers with a fatal error (UNKNOWN_SERVER_ERROR, kind `Fatal`) without
    /// handling the request.
    pub fatal_error: f64,
}

/// Faults of transaction markers (the coordinator's writes of COMMIT/ABORT to each partition
/// and to the group offsets).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MarkerFaults {
    /// A marker lands late (uniform in `0..=delay_max`); the transaction stays completing (and
    /// its id gets CONCURRENT_TRANSACTIONS) until every marker has landed.
    pub delay: f64,
    /// Upper bound of a marker delay.
    pub delay_max: Duration,
    /// Lower bound of a marker delay (at most `delay_max`), for tests that need a marker to be
    /// late for sure.
    pub delay_min: Duration,
    /// When set, only markers on targets (`topic/partition`, or `group <id>`) containing this
    /// text are delayed: e.g. a changelog's markers land last, while the outputs and offsets
    /// of the same transaction are already decided.
    pub only_targets_containing: Option<String>,
    /// **Deliberate broker-bug mode**, off by default: with this probability per ending
    /// transaction, the coordinator considers the transaction complete as soon as it has
    /// decided, without waiting for its (possibly delayed) markers. The producer's next
    /// transaction may then write to a partition before the late marker lands, and the late
    /// marker decides those new records too: the lost-write / aborted-read anomaly Jepsen
    /// reported against Kafka in 2024 (KAFKA-17754). Use it to check that a property checker
    /// catches the anomaly, never to test the engine.
    pub complete_before_markers: f64,
}

/// The whole plan: request faults (a default plus per-kind overrides) and marker faults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Faults {
    /// Faults of every request kind without an override.
    pub requests: RequestFaults,
    /// Per-kind overrides.
    pub by_kind: BTreeMap<RequestKind, RequestFaults>,
    /// Clients a kind's override is for: where a kind has an entry here, its override in
    /// [`by_kind`](Self::by_kind) applies only to clients whose id starts with it (e.g.
    /// `replica-`: the application's clients, not the feeders'); the others get
    /// [`requests`](Self::requests).
    pub by_kind_clients: BTreeMap<RequestKind, String>,
    /// Marker faults.
    pub markers: MarkerFaults,
}

impl Faults {
    /// No faults at all (the default).
    pub fn none() -> Self {
        Faults::default()
    }

    /// The faults that apply to `kind`.
    pub fn for_kind(&self, kind: RequestKind) -> &RequestFaults {
        self.by_kind.get(&kind).unwrap_or(&self.requests)
    }

    /// The faults that apply to a request of `kind` from `client` (see
    /// [`by_kind_clients`](Self::by_kind_clients)).
    pub fn for_request(&self, kind: RequestKind, client: &str) -> &RequestFaults {
        match self.by_kind_clients.get(&kind) {
            Some(prefix) if !client.starts_with(prefix.as_str()) => &self.requests,
            _ => self.for_kind(kind),
        }
    }
}

/// What the network does to one request, decided when it arrives at the broker node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestFate {
    /// Lost before handling.
    pub drop_request: bool,
    /// Handled this late.
    pub delay_request: Duration,
    /// Answered with this error instead of being handled.
    pub inject: Option<KafkaErrorKind>,
    /// Handled, response lost.
    pub drop_response: bool,
    /// Response sent this late.
    pub delay_response: Duration,
}

/// Records an injected fault (kind, description): the madsim cluster counts it in the run's
/// report and writes it to the trace.
pub type FaultRecorder = Arc<dyn Fn(&str, String) + Send + Sync>;

/// What a [`Director`] does to one request: nothing, or hold it before the broker handles it,
/// or answer it with an error instead of handling it.
#[derive(Clone, Debug, Default)]
pub struct Directed {
    /// The request reaches the broker this much later (on top of any random delay; keep it
    /// below the client's request timeout, or the client retries meanwhile).
    pub hold: Duration,
    /// The broker answers with this error instead of handling the request.
    pub fail: Option<ErrorCode>,
    /// The request stays in the network until this gate opens (after `hold`): a TCP stream
    /// stalled while its sender is frozen, delivered when the director says so.
    pub until: Option<Gate>,
}

/// A gate a [`Directed`] request waits at until the director opens it.
#[derive(Clone, Debug)]
pub struct Gate(tokio::sync::watch::Receiver<bool>);

/// Opens its [`Gate`]s: every request waiting at one goes on.
#[derive(Debug)]
pub struct GateOpener(tokio::sync::watch::Sender<bool>);

impl Gate {
    /// A closed gate and what opens it.
    pub fn closed() -> (Gate, GateOpener) {
        let (open, gate) = tokio::sync::watch::channel(false);
        (Gate(gate), GateOpener(open))
    }

    /// Waits until the gate is open (or its opener is gone: nothing can open it any more, and a
    /// request is not held forever).
    pub async fn passed(mut self) {
        let _ = self.0.wait_for(|open| *open).await;
    }
}

impl GateOpener {
    /// Opens the gate.
    pub fn open(&self) {
        let _ = self.0.send(true);
    }
}

/// A directed fault: sees every request as it reaches a broker (the request, its client id) and
/// decides what happens to it, from what the run did so far rather than by chance (the harness's
/// episodes aimed at a handover, `harness::directed`). Called before the random request faults,
/// whose draws it does not change.
pub type Director = Arc<dyn Fn(&Request, &str) -> Directed + Send + Sync>;

/// A shared, changeable fault plan. Cloning shares it.
#[derive(Clone, Default)]
pub struct FaultPlan {
    faults: Arc<Mutex<Faults>>,
    recorder: Option<FaultRecorder>,
    director: Arc<Mutex<Option<Director>>>,
    /// The clients' request timeout: a request held past it is held past this one.
    request_timeout: super::client::RequestTimeout,
}

impl fmt::Debug for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultPlan").field("faults", &self.get()).finish_non_exhaustive()
    }
}

fn chance(probability: f64) -> bool {
    probability > 0.0 && thread_rng().gen_bool(probability.min(1.0))
}

fn delay_up_to(max: Duration) -> Duration {
    if max.is_zero() {
        return Duration::ZERO;
    }
    Duration::from_micros(thread_rng().gen_range(0..=max.as_micros() as u64))
}

impl FaultPlan {
    /// A plan without faults.
    pub fn new() -> Self {
        FaultPlan::default()
    }

    /// Sets where injected faults are recorded.
    pub fn with_recorder(mut self, recorder: FaultRecorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Shares the clients' request timeout (held-past-timeout requests follow it).
    pub fn with_request_timeout(mut self, timeout: super::client::RequestTimeout) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The clients' request timeout.
    #[cfg_attr(not(madsim), allow(dead_code))]
    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout.get()
    }

    /// A copy of the current faults.
    pub fn get(&self) -> Faults {
        self.faults.lock().expect("fault plan lock").clone()
    }

    /// Replaces the faults.
    pub fn set(&self, faults: Faults) {
        *self.faults.lock().expect("fault plan lock") = faults;
    }

    /// Changes the faults in place.
    pub fn update(&self, change: impl FnOnce(&mut Faults)) {
        change(&mut self.faults.lock().expect("fault plan lock"));
    }

    /// Sets (or with `None` removes) the [`Director`] that sees every request first.
    pub fn set_director(&self, director: Option<Director>) {
        *self.director.lock().expect("director lock") = director;
    }

    /// What the director (if any) does to `request` from `client`.
    pub fn direct(&self, request: &Request, client: &str) -> Directed {
        let director = self.director.lock().expect("director lock").clone();
        director.map(|director| director(request, client)).unwrap_or_default()
    }

    pub(crate) fn record(&self, kind: &str, what: String) {
        if let Some(recorder) = &self.recorder {
            recorder(kind, what);
        }
    }

    /// Decides the fate of one request of `kind` from `client`, and records what was injected.
    pub fn decide(&self, kind: RequestKind, client: &str) -> RequestFate {
        let faults = self.faults.lock().expect("fault plan lock").for_request(kind, client).clone();
        let mut fate = RequestFate::default();
        if chance(faults.drop_request) {
            fate.drop_request = true;
            self.record("kafka-drop-request", format!("{kind} from {client}"));
            return fate;
        }
        if chance(faults.hold_past_timeout) {
            fate.delay_request = self.request_timeout.get() + delay_up_to(faults.delay_max);
            self.record("kafka-hold-request", format!("{kind} from {client} by {:?}", fate.delay_request));
        } else if chance(faults.delay_request) {
            fate.delay_request = delay_up_to(faults.delay_max.min(REQUEST_DELAY_MAX));
            self.record("kafka-delay-request", format!("{kind} from {client} by {:?}", fate.delay_request));
        }
        if chance(faults.fatal_error) {
            fate.inject = Some(KafkaErrorKind::Fatal);
        } else if chance(faults.retriable_error) {
            fate.inject = Some(KafkaErrorKind::Retriable);
        }
        if let Some(kind_injected) = fate.inject {
            self.record("kafka-error", format!("{kind} from {client}: {kind_injected:?}"));
        }
        if chance(faults.drop_response) {
            fate.drop_response = true;
            self.record("kafka-drop-response", format!("{kind} to {client}"));
        } else if chance(faults.delay_response) {
            fate.delay_response = delay_up_to(faults.delay_max);
            self.record("kafka-delay-response", format!("{kind} to {client} by {:?}", fate.delay_response));
        }
        fate
    }
}

/// The faults the broker state machine itself consults. Randomness reaches the state machine
/// only through this trait, so the state machine stays deterministic given its inputs.
pub trait BrokerFaults {
    /// How late the marker of `transactional_id`'s transaction lands on `target` (a
    /// `topic/partition`, or `group <id>` for its offsets).
    fn marker_delay(&mut self, transactional_id: &str, target: &str) -> Duration;

    /// Whether the coordinator (deliberately buggy) completes this transaction before its
    /// markers land. See [`MarkerFaults::complete_before_markers`].
    fn complete_before_markers(&mut self, transactional_id: &str) -> bool;
}

/// A broker without marker faults.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFaults;

impl BrokerFaults for NoFaults {
    fn marker_delay(&mut self, _: &str, _: &str) -> Duration {
        Duration::ZERO
    }

    fn complete_before_markers(&mut self, _: &str) -> bool {
        false
    }
}

impl BrokerFaults for FaultPlan {
    fn marker_delay(&mut self, transactional_id: &str, target: &str) -> Duration {
        let markers = self.faults.lock().expect("fault plan lock").markers.clone();
        if markers.only_targets_containing.as_deref().is_some_and(|only| !target.contains(only)) {
            return Duration::ZERO;
        }
        if !chance(markers.delay) {
            return Duration::ZERO;
        }
        let min = markers.delay_min.min(markers.delay_max);
        let delay = min + delay_up_to(markers.delay_max - min);
        self.record("kafka-marker-delay", format!("{transactional_id} on {target} by {delay:?}"));
        delay
    }

    fn complete_before_markers(&mut self, transactional_id: &str) -> bool {
        let probability = self.faults.lock().expect("fault plan lock").markers.complete_before_markers;
        let buggy = chance(probability);
        if buggy {
            self.record("kafka-jepsen-early-complete", transactional_id.to_owned());
        }
        buggy
    }
}
