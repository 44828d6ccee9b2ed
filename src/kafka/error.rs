//! Errors of the Kafka port, classified the way a transactional client must react to them.

use std::fmt;

/// How a caller must react to a Kafka error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
pub type KafkaResult<T> = Result<T, KafkaError>;

impl KafkaError {
    /// An error of `kind` in `operation`.
    pub fn new(kind: KafkaErrorKind, operation: &'static str, message: impl Into<String>) -> Self {
        KafkaError { kind, operation, message: message.into(), code: None, context: None }
    }

    /// Adds the broker's error code.
    pub fn with_code(mut self, code: i32) -> Self {
        self.code = Some(code);
        self
    }

    /// Adds what the operation was about (`topic/partition`, `transactional id app-3`, ...).
    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.context = Some(context.into());
        self
    }

    /// The classification.
    pub fn kind(&self) -> KafkaErrorKind {
        self.kind
    }

    /// The operation that failed (`commit_transaction`, `poll`, ...).
    pub fn operation(&self) -> &'static str {
        self.operation
    }

    /// The broker's error code, if any.
    pub fn code(&self) -> Option<i32> {
        self.code
    }

    /// The context, if any.
    pub fn context(&self) -> Option<&str> {
        self.context.as_deref()
    }

    /// Fenced by a newer producer with the same transactional id.
    pub fn is_fenced(&self) -> bool {
        self.kind == KafkaErrorKind::Fenced
    }

    /// The client cannot continue (fenced, refused authentication or authorization included).
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
    pub fn is_refused(&self) -> bool {
        matches!(self.kind, KafkaErrorKind::Authentication | KafkaErrorKind::Authorization)
    }

    /// The transaction must be aborted.
    pub fn is_abortable(&self) -> bool {
        self.kind == KafkaErrorKind::Abortable
    }

    /// Worth retrying.
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
}
