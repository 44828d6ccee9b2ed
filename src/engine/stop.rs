//! The shutdown signal of a run, and the grace it leaves in-flight work.
//!
//! A run stops when the caller's shutdown future resolves or when the caller drops the run's
//! future: either way the signal is raised, the runner stops taking new work, lets the in-flight
//! batch finish within [`SHUTDOWN_GRACE`], then tears down (aborting whatever transaction is
//! still open) and returns.

use std::sync::Arc;

use tokio::sync::watch;

use super::bounds::SHUTDOWN_GRACE;

/// A cloneable stop signal.
#[derive(Clone, Debug)]
pub(crate) struct Stop {
    sender: Arc<watch::Sender<bool>>,
    receiver: watch::Receiver<bool>,
}

impl Stop {
    pub(crate) fn new() -> Self {
        let (sender, receiver) = watch::channel(false);
        Stop { sender: Arc::new(sender), receiver }
    }

    /// Raises the signal (idempotent).
    pub(crate) fn raise(&self) {
        self.sender.send_replace(true);
    }

    pub(crate) fn is_raised(&self) -> bool {
        *self.receiver.borrow()
    }

    /// Resolves once the signal is raised.
    pub(crate) async fn raised(&self) {
        let mut receiver = self.receiver.clone();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = receiver.wait_for(|raised| *raised).await;
    }

    /// Runs `work` unless the signal is raised first (then `None`, and `work` is dropped where
    /// it waits). For start-up work a stop must not wait for: admin reads and bootstraps that
    /// retry through a broker failover for up to a minute.
    pub(crate) async fn unless_raised<F: std::future::Future>(&self, work: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            () = self.raised() => None,
            output = work => Some(output),
        }
    }

    /// Resolves [`SHUTDOWN_GRACE`] after the signal is raised: the bound of in-flight work.
    pub(crate) async fn grace_expired(&self) {
        self.raised().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    }
}
