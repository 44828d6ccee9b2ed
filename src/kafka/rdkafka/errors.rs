//! librdkafka's errors classified the way the port's callers must react (fenced, fatal,
//! abortable, retriable), with the operation and its context.

use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode as Code};

use super::security::{is_authentication_code, is_authorization_code, is_secret_setting, refused_here, request_slice};
use super::REQUEST_TIMEOUT;
use crate::kafka::{KafkaError, KafkaErrorKind, KafkaResult};

pub(super) fn is_fenced_code(code: Code) -> bool {
    matches!(code, Code::Fenced | Code::ProducerFenced | Code::InvalidProducerEpoch)
}

/// librdkafka's local errors that a broker failover produces on its own, none of them a fault of
/// the caller: the same request succeeds once the cluster has moved the leaderships, so every
/// read retries them within [`READ_RETRY_BUDGET`] (issue 40). The broker's own codes of a
/// failover (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, NOT_COORDINATOR, ...) are in
/// [`code_kind`]'s list.
///
/// - `_DESTROY_BROKER`: the handle of a broker that left the cluster's metadata (a broker
///   killed or paused until the controller fenced it) is decommissioned, and the requests it
///   still held fail with this code; librdkafka's own metadata requests retry it on another
///   broker. Not `_DESTROY` (-197): that one means the client itself is being destroyed.
/// - `_UNKNOWN_BROKER`: a leader or coordinator id that the client has no handle for yet (the
///   metadata naming it arrived before the broker's own entry).
/// - `_NODE_UPDATE`: a broker handle's address changed under a request (a restarted broker
///   advertising anew).
/// - `_WAIT_CACHE`: the topic's metadata is being refreshed; the answer is on its way.
/// - `_ISR_INSUFF`: fewer in-sync replicas than the producer's acks require, while a replica
///   catches up again.
/// - `NOT_CONTROLLER` (41): an admin request (a topic's creation) reached a broker while the
///   controller moved.
pub(super) fn is_failover_code(code: Code) -> bool {
    matches!(
        code,
        Code::DestroyBroker
            | Code::UnknownBroker
            | Code::NodeUpdate
            | Code::WaitCache
            | Code::ISRInsufficient
            | Code::NotController
    )
}

/// How long a read (offsets, watermarks, committed offsets, metadata) is retried through
/// transient errors: a partition without a leader yet right after its topic was created, a
/// leader or coordinator moving, a broker handle replaced during a failover. A failed broker is
/// fenced by the controller after `broker.session.timeout.ms` (9 s by default) and its
/// leaderships move then, well within the budget. As long as the simulated client retries, so
/// neither client gives up where the other would not.
pub(super) const READ_RETRY_BUDGET: Duration = Duration::from_secs(60);

/// Runs the blocking read `attempt` (given the time one request may take) until it succeeds,
/// fails with an error that is not [`KafkaErrorKind::Retriable`], or [`READ_RETRY_BUDGET`]
/// runs out; then the last error says so ([`KafkaError::gave_up`]). Backs off from 50 ms,
/// doubling up to 1 s.
pub(super) fn retry_read<T>(attempt: impl FnMut(Duration) -> KafkaResult<T>) -> KafkaResult<T> {
    retry_read_within(READ_RETRY_BUDGET, attempt)
}

/// [`retry_read`] with another budget.
pub(super) fn retry_read_within<T>(
    budget: Duration,
    mut attempt: impl FnMut(Duration) -> KafkaResult<T>,
) -> KafkaResult<T> {
    let mut retry = Retry::within(budget);
    loop {
        let timeout = request_slice(retry.remaining().min(REQUEST_TIMEOUT));
        match attempt(timeout) {
            Ok(value) => return Ok(value),
            Err(error) => std::thread::sleep(retry.after(error, "a read")?),
        }
    }
}

/// The retry policy of the adapter's reads and topic creations: errors that are not
/// [`KafkaErrorKind::Retriable`] end at once; retriable ones are tried again after a backoff
/// from 50 ms, doubling up to 1 s, until the budget runs out, and then the last error says so
/// ([`KafkaError::gave_up`]).
pub(super) struct Retry {
    started: Instant,
    deadline: Instant,
    backoff: Duration,
    attempts: u32,
}

impl Retry {
    pub(super) fn within(budget: Duration) -> Self {
        let started = Instant::now();
        Retry { started, deadline: started + budget, backoff: Duration::from_millis(50), attempts: 0 }
    }

    /// What is left of the budget.
    pub(super) fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// After attempt `error` of `what`: how long to wait before the next one, or the error to
    /// end with.
    pub(super) fn after(&mut self, error: KafkaError, what: &str) -> KafkaResult<Duration> {
        self.attempts += 1;
        if !error.is_retriable() {
            return Err(error);
        }
        if let Some(refused) = refused_here() {
            // The cluster refused the client meanwhile: no retry can succeed.
            return Err(refused);
        }
        if Instant::now() + self.backoff >= self.deadline {
            tracing::warn!(%error, attempts = self.attempts, "{what} gave up: its retry budget ran out");
            return Err(error.gave_up(self.attempts, self.started.elapsed()));
        }
        tracing::debug!(%error, attempts = self.attempts, "{what}: retrying");
        let wait = self.backoff;
        self.backoff = (self.backoff * 2).min(Duration::from_secs(1));
        Ok(wait)
    }
}

/// Classification of a bare librdkafka or broker error code.
pub(super) fn code_kind(code: Code) -> KafkaErrorKind {
    match code {
        c if is_fenced_code(c) => KafkaErrorKind::Fenced,
        c if is_authorization_code(c) => KafkaErrorKind::Authorization,
        c if is_authentication_code(c) => KafkaErrorKind::Authentication,
        Code::UnknownTopicOrPartition | Code::UnknownTopic | Code::UnknownPartition | Code::UnknownTopicId => {
            KafkaErrorKind::UnknownTopic
        }
        Code::Fatal => KafkaErrorKind::Fatal,
        c if is_failover_code(c) => KafkaErrorKind::Retriable,
        Code::OperationTimedOut
        | Code::MessageTimedOut
        | Code::RequestTimedOut
        | Code::TimedOutQueue
        | Code::BrokerTransportFailure
        | Code::AllBrokersDown
        | Code::Resolve
        | Code::QueueFull
        | Code::Retry
        | Code::InProgress
        | Code::PreviousInProgress
        | Code::Interrupted
        | Code::WaitingForCoordinator
        | Code::CoordinatorLoadInProgress
        | Code::CoordinatorNotAvailable
        | Code::NotCoordinator
        | Code::LeaderNotAvailable
        | Code::NotLeaderForPartition
        | Code::BrokerNotAvailable
        | Code::ReplicaNotAvailable
        | Code::NetworkException
        | Code::NotEnoughReplicas
        | Code::NotEnoughReplicasAfterAppend
        | Code::KafkaStorageError
        | Code::FencedLeaderEpoch
        | Code::UnknownLeaderEpoch
        | Code::OffsetNotAvailable
        | Code::ConcurrentTransactions
        | Code::RebalanceInProgress
        | Code::UnstableOffsetCommit
        | Code::ThrottlingQuotaExceeded => KafkaErrorKind::Retriable,
        _ => KafkaErrorKind::Other,
    }
}

/// Classification of an rdkafka error. `fatal` is the client's fatal error, if it has one (a
/// transactional call after a fatal error reports `_FATAL`; the cause tells whether it was a
/// fence).
pub(super) fn classify(error: &RdError, fatal: Option<Code>) -> KafkaErrorKind {
    let fenced_cause = fatal.is_some_and(is_fenced_code);
    // A refusal names itself, whatever librdkafka made of it (a transactional-id authorization
    // failure is a fatal error there, a topic authorization failure an abortable one; a client
    // whose fatal error is a refusal reports `_FATAL` afterwards).
    let refused = |code: Code| is_authorization_code(code) || is_authentication_code(code);
    if let Some(code) = error.rdkafka_error_code().filter(|c| refused(*c)) {
        return code_kind(code);
    }
    if let Some(code) = fatal.filter(|c| refused(*c)) {
        return code_kind(code);
    }
    match error {
        RdError::Transaction(e) => {
            let code = e.code();
            if is_fenced_code(code) || (fenced_cause && (e.is_fatal() || code == Code::Fatal)) {
                KafkaErrorKind::Fenced
            } else if e.is_fatal() || code == Code::Fatal {
                KafkaErrorKind::Fatal
            } else if e.txn_requires_abort() {
                KafkaErrorKind::Abortable
            } else if e.is_retriable() {
                KafkaErrorKind::Retriable
            } else if code_kind(code) == KafkaErrorKind::UnknownTopic {
                KafkaErrorKind::UnknownTopic
            } else if code == Code::State {
                // An API call in the wrong state: a bug of the caller, not of the transaction.
                KafkaErrorKind::Other
            } else {
                // librdkafka: an error with none of the flags set is to be treated as fatal.
                KafkaErrorKind::Fatal
            }
        }
        RdError::Flush(Code::OperationTimedOut) => KafkaErrorKind::Retriable,
        // An admin request's own error (rdkafka gives it no `rdkafka_error_code`): a creation
        // that timed out against a paused broker is as transient as a read that did.
        RdError::AdminOp(code) => code_kind(*code),
        RdError::MessageConsumptionFatal(code) => {
            if is_fenced_code(*code) {
                KafkaErrorKind::Fenced
            } else {
                KafkaErrorKind::Fatal
            }
        }
        // A client with a fatal error is done for, whatever this error's own code (a delivery
        // purged from the queue when the producer was fenced reports _PURGE_QUEUE): the fatal
        // error decides.
        _ if fenced_cause => KafkaErrorKind::Fenced,
        _ if fatal.is_some() => KafkaErrorKind::Fatal,
        other => match other.rdkafka_error_code() {
            Some(code) => code_kind(code),
            None => KafkaErrorKind::Other,
        },
    }
}

/// A port error from an rdkafka error in `operation`. `fatal` is the client's fatal error, if
/// any (see [`classify`]).
pub(super) fn rd_error(operation: &'static str, error: &RdError, fatal: Option<(Code, String)>) -> KafkaError {
    let kind = classify(error, fatal.as_ref().map(|(code, _)| *code));
    rd_error_as(kind, operation, error, fatal)
}

/// A port error of `kind` from an rdkafka error.
pub(super) fn rd_error_as(
    kind: KafkaErrorKind,
    operation: &'static str,
    error: &RdError,
    fatal: Option<(Code, String)>,
) -> KafkaError {
    let mut message = match error {
        RdError::Transaction(e) => format!("{} ({})", e.string(), e.name()),
        // rdkafka prints the refused value; a secret's value is never printed.
        RdError::ClientConfig(_, description, key, _) if is_secret_setting(key) => {
            format!("Client config error: {description} {key} [redacted]")
        }
        other => other.to_string(),
    };
    if let Some((code, reason)) = &fatal {
        if !message.contains(reason.as_str()) {
            message.push_str(&format!("; fatal error {code:?}: {reason}"));
        }
    }
    let broker_code = fatal
        .as_ref()
        .map(|(code, _)| *code as i32)
        .filter(|c| *c > 0)
        .or_else(|| error.rdkafka_error_code().map(|c| c as i32).filter(|c| *c > 0));
    if kind == KafkaErrorKind::Authorization {
        message.push_str(&format!("; not authorized: {}", acl_hint(operation, broker_code)));
    }
    let error = KafkaError::new(kind, operation, message);
    match broker_code {
        Some(code) => error.with_code(code),
        None => error,
    }
}

/// Which ACL an authorization failure in `operation` points to (the error's context names the
/// resource).
pub(super) fn acl_hint(operation: &str, code: Option<i32>) -> &'static str {
    match (code, operation) {
        (Some(29), "partition_count" | "end_offset" | "assign" | "position") => "Describe on the topic is missing",
        (Some(29), "create_topic") => "Create on the topic is missing (or Describe, if it exists)",
        (Some(29), "poll" | "subscribe") => "Read (or Describe) on the topic is missing",
        (Some(29), _) => "Write on the topic is missing",
        (Some(30), "send_offsets_to_transaction" | "commit_transaction") => {
            "Read on the consumer group is missing (offsets commit with the transaction)"
        }
        (Some(30), _) => "Read on the consumer group is missing",
        (Some(53), _) => "Write (and Describe) on the transactional id is missing",
        (Some(31), _) => "the operation needs a cluster permission",
        _ => "an ACL is missing",
    }
}

pub(super) fn code_error(operation: &'static str, code: Code, context: impl Into<String>) -> KafkaError {
    let kind = code_kind(code);
    let mut message = code.to_string();
    if kind == KafkaErrorKind::Authorization {
        message.push_str(&format!("; not authorized: {}", acl_hint(operation, Some(code as i32))));
    }
    let error = KafkaError::new(kind, operation, message).with_context(context);
    if (code as i32) > 0 {
        error.with_code(code as i32)
    } else {
        error
    }
}
