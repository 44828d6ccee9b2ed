//! Errors of the Kafka port, classified the way a transactional client must react to them.

use std::fmt;

/// How a caller must react to a Kafka error.
///
/// ```
/// use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
///
/// fn react(error: &KafkaError) -> &'static str {
///     match error.kind() {
///         KafkaErrorKind::Retriable => "try again",
///         KafkaErrorKind::Abortable => "abort the transaction",
///         _ if error.is_fatal() => "stop this client",
///         _ => "report it",
///     }
/// }
/// assert_eq!(react(&KafkaError::new(KafkaErrorKind::Fenced, "commit_transaction", "fenced")), "stop this client");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KafkaErrorKind {
    /// Another producer with the same transactional id took over (its `init_transactions`
    /// bumped the epoch). Fatal for this producer: stop it; the new owner carries on.
    Fenced,
    /// Fatal for this client for another reason (invalid state, authorization, ...).
    Fatal,
    /// The current transaction cannot commit; abort it (the producer stays usable).
    Abortable,
    /// Transient (timeout, leader change, coordinator moving): the same call may succeed later.
    Retriable,
    /// The topic or partition does not exist.
    UnknownTopic,
    /// The cluster would not let this client in: SASL authentication failed, the TLS handshake
    /// failed (an untrusted or mismatched certificate), or the connection broke during the
    /// protocol handshake (a plaintext client on a TLS listener). Fatal: retrying cannot help
    /// until the configuration changes.
    Authentication,
    /// The broker refused an operation on a resource for lack of an ACL (topic, group,
    /// transactional id or cluster; the context names it). Fatal: retrying cannot help until
    /// the ACLs change.
    Authorization,
    /// Anything else: a bug, a misconfiguration, an unclassified broker error.
    Other,
}

/// A failed Kafka operation, with where it happened.
///
/// ```
/// use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
///
/// let error = KafkaError::new(KafkaErrorKind::Authorization, "send", "topic authorization failed")
///     .with_code(29)
///     .with_context("clicks/0");
/// assert_eq!(error.to_string(), "kafka send failed (clicks/0): topic authorization failed [broker error 29]");
/// assert!(error.is_refused() && error.is_fatal());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct KafkaError {
    kind: KafkaErrorKind,
    operation: &'static str,
    message: String,
    /// The broker's error code, when the failure came from the broker.
    code: Option<i32>,
    /// Topic/partition, transactional id or group the operation was about.
    context: Option<String>,
}

impl fmt::Display for KafkaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kafka {} failed", self.operation)?;
        if let Some(context) = &self.context {
            write!(f, " ({context})")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(code) = self.code {
            write!(f, " [broker error {code}]")?;
        }
        Ok(())
    }
}

/// Result of a Kafka operation.
///
/// ```
/// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
/// fn check(ok: bool) -> flechtwerk::kafka::KafkaResult<()> {
///     if ok { Ok(()) } else { Err(KafkaError::new(KafkaErrorKind::Other, "check", "not ok")) }
/// }
/// assert!(check(false).is_err());
/// ```
pub type KafkaResult<T> = Result<T, KafkaError>;

impl KafkaError {
    /// An error of `kind` in `operation`.
    ///
    /// ```
    /// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
    /// let error = KafkaError::new(KafkaErrorKind::Retriable, "poll", "coordinator moving");
    /// assert!(error.is_retriable());
    /// ```
    pub fn new(kind: KafkaErrorKind, operation: &'static str, message: impl Into<String>) -> Self {
        KafkaError { kind, operation, message: message.into(), code: None, context: None }
    }

    /// Adds the broker's error code.
    ///
    /// ```
    /// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
    /// assert_eq!(KafkaError::new(KafkaErrorKind::Other, "send", "x").with_code(10).code(), Some(10));
    /// ```
    pub fn with_code(mut self, code: i32) -> Self {
        self.code = Some(code);
        self
    }

    /// Adds what the operation was about (`topic/partition`, `transactional id app-3`, ...).
    ///
    /// ```
    /// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
    /// let error = KafkaError::new(KafkaErrorKind::Fenced, "commit_transaction", "x").with_context("app-3");
    /// assert_eq!(error.context(), Some("app-3"));
    /// ```
    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.context = Some(context.into());
        self
    }

    /// This error once a caller retried it `attempts` times over `elapsed` and gave up: kind,
    /// code and context stay as they were; the message says that a retry budget ran out.
    // Only the librdkafka adapter's reads retry within a budget, so a build without the adapter
    // (the simulation's) never calls this; an adapter feature may not gate it
    // (tests/architecture.rs).
    #[allow(dead_code)]
    pub(crate) fn gave_up(mut self, attempts: u32, elapsed: std::time::Duration) -> Self {
        self.message = format!(
            "retry budget exhausted: still failing after {attempts} attempts over {:.1} s; last error: {}",
            elapsed.as_secs_f64(),
            self.message
        );
        self
    }

    /// The classification.
    ///
    /// ```
    /// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
    /// assert_eq!(KafkaError::new(KafkaErrorKind::Fatal, "poll", "x").kind(), KafkaErrorKind::Fatal);
    /// ```
    pub fn kind(&self) -> KafkaErrorKind {
        self.kind
    }

    /// The operation that failed (`commit_transaction`, `poll`, ...).
    ///
    /// ```
    /// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
    /// assert_eq!(KafkaError::new(KafkaErrorKind::Other, "poll", "x").operation(), "poll");
    /// ```
    pub fn operation(&self) -> &'static str {
        self.operation
    }

    /// The broker's error code, if any.
    ///
    /// ```
    /// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
    /// assert_eq!(KafkaError::new(KafkaErrorKind::Other, "poll", "x").code(), None);
    /// ```
    pub fn code(&self) -> Option<i32> {
        self.code
    }

    /// The context, if any.
    ///
    /// ```
    /// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
    /// assert_eq!(KafkaError::new(KafkaErrorKind::Other, "poll", "x").context(), None);
    /// ```
    pub fn context(&self) -> Option<&str> {
        self.context.as_deref()
    }

    /// Fenced by a newer producer with the same transactional id.
    ///
    /// ```
    /// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
    /// assert!(KafkaError::new(KafkaErrorKind::Fenced, "init_transactions", "x").is_fenced());
    /// ```
    pub fn is_fenced(&self) -> bool {
        self.kind == KafkaErrorKind::Fenced
    }

    /// The client cannot continue (fenced, refused authentication or authorization included).
    ///
    /// ```
    /// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
    /// assert!(KafkaError::new(KafkaErrorKind::Authentication, "poll", "x").is_fatal());
    /// assert!(!KafkaError::new(KafkaErrorKind::Abortable, "send", "x").is_fatal());
    /// ```
    pub fn is_fatal(&self) -> bool {
        matches!(
            self.kind,
            KafkaErrorKind::Fenced
                | KafkaErrorKind::Fatal
                | KafkaErrorKind::Authentication
                | KafkaErrorKind::Authorization
        )
    }

    /// The cluster refused this client: authentication (SASL, TLS) or an ACL.
    ///
    /// ```
    /// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
    /// assert!(KafkaError::new(KafkaErrorKind::Authorization, "send", "x").is_refused());
    /// ```
    pub fn is_refused(&self) -> bool {
        matches!(self.kind, KafkaErrorKind::Authentication | KafkaErrorKind::Authorization)
    }

    /// The transaction must be aborted.
    ///
    /// ```
    /// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
    /// assert!(KafkaError::new(KafkaErrorKind::Abortable, "send", "x").is_abortable());
    /// ```
    pub fn is_abortable(&self) -> bool {
        self.kind == KafkaErrorKind::Abortable
    }

    /// Worth retrying.
    ///
    /// ```
    /// # use flechtwerk::kafka::{KafkaError, KafkaErrorKind};
    /// assert!(KafkaError::new(KafkaErrorKind::Retriable, "poll", "x").is_retriable());
    /// ```
    pub fn is_retriable(&self) -> bool {
        self.kind == KafkaErrorKind::Retriable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_operation_context_and_code() {
        let e = KafkaError::new(KafkaErrorKind::Fenced, "commit_transaction", "producer fenced")
            .with_context("transactional id app-3")
            .with_code(90);
        assert_eq!(
            e.to_string(),
            "kafka commit_transaction failed (transactional id app-3): producer fenced [broker error 90]"
        );
        assert!(e.is_fenced() && e.is_fatal() && !e.is_retriable() && !e.is_abortable());
    }

    #[test]
    fn a_given_up_error_keeps_its_kind_code_and_context() {
        let e = KafkaError::new(KafkaErrorKind::Retriable, "end_offset", "leader not available")
            .with_context("t/1")
            .with_code(5)
            .gave_up(7, std::time::Duration::from_millis(60_400));
        assert_eq!((e.kind(), e.code(), e.context()), (KafkaErrorKind::Retriable, Some(5), Some("t/1")));
        assert_eq!(
            e.to_string(),
            "kafka end_offset failed (t/1): retry budget exhausted: still failing after 7 attempts over \
             60.4 s; last error: leader not available [broker error 5]"
        );
    }
}
