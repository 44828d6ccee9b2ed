//! [`RevocationGate`]: a member gives up its partitions only between batches (TRX-33).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Holds a group member's revocations back while the engine commits a batch of the partitions
/// they would take away: the engine [holds](RevocationGate::hold) the gate for each commit, and a
/// consumer given the gate ([`Consumer::hold_revocations`](super::Consumer::hold_revocations))
/// gives up its partitions, and rejoins, only once no hold is left.
///
/// The engine polls the next batch while one commits (docs/concepts/exactly-once.md, TRX-02);
/// a revocation served by that poll would otherwise let the group move to its next generation
/// while the commit's offsets, sent with the old one, are still on their way, and the
/// coordinator would refuse them. The reference implementation gets the same from its batch
/// lock, which its revocation callback takes.
///
/// ```
/// use flechtwerk::kafka::RevocationGate;
/// # use std::time::Duration;
/// let gate = RevocationGate::default();
/// let hold = gate.hold();
/// assert!(gate.is_held());
/// assert!(!gate.wait_released(Duration::from_millis(1))); // a revocation would wait
/// drop(hold); // the commit finished
/// assert!(gate.wait_released(Duration::from_millis(1)));
/// ```
#[derive(Clone, Debug, Default)]
pub struct RevocationGate {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    holds: Mutex<usize>,
    released: Condvar,
    notify: tokio::sync::Notify,
}

/// One hold of a [`RevocationGate`]: revocations wait until it is dropped.
///
/// ```
/// use flechtwerk::kafka::RevocationGate;
/// let gate = RevocationGate::default();
/// {
///     let _commit = gate.hold();
///     assert!(gate.is_held());
/// } // dropped: the commit finished
/// assert!(!gate.is_held());
/// ```
#[derive(Debug)]
#[must_use = "the gate is released when the hold is dropped"]
pub struct RevocationHold {
    inner: Arc<Inner>,
}

impl Inner {
    fn holds(&self) -> MutexGuard<'_, usize> {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl RevocationGate {
    /// Holds revocations back until the returned hold is dropped. Holds add up: the gate is
    /// released when the last one is dropped.
    ///
    /// ```
    /// use flechtwerk::kafka::RevocationGate;
    /// let gate = RevocationGate::default();
    /// let (first, second) = (gate.hold(), gate.hold());
    /// drop(first);
    /// assert!(gate.is_held());
    /// drop(second);
    /// assert!(!gate.is_held());
    /// ```
    pub fn hold(&self) -> RevocationHold {
        *self.inner.holds() += 1;
        RevocationHold { inner: self.inner.clone() }
    }

    /// Whether a hold is out.
    ///
    /// ```
    /// use flechtwerk::kafka::RevocationGate;
    /// let gate = RevocationGate::default();
    /// assert!(!gate.is_held());
    /// let _hold = gate.hold();
    /// assert!(gate.is_held());
    /// ```
    pub fn is_held(&self) -> bool {
        *self.inner.holds() > 0
    }

    /// Blocks the calling thread until no hold is out, at most `timeout`; returns whether the
    /// gate is released (for a client library's rebalance callback, on its own thread).
    ///
    /// ```
    /// use flechtwerk::kafka::RevocationGate;
    /// # use std::time::Duration;
    /// let gate = RevocationGate::default();
    /// let hold = gate.hold();
    /// let callback = std::thread::spawn({
    ///     let gate = gate.clone();
    ///     move || gate.wait_released(Duration::from_secs(10))
    /// });
    /// drop(hold); // the commit finished: the callback goes on
    /// assert!(callback.join().unwrap());
    /// ```
    pub fn wait_released(&self, timeout: Duration) -> bool {
        let holds = self.inner.holds();
        let (holds, _) = self
            .inner
            .released
            .wait_timeout_while(holds, timeout, |holds| *holds > 0)
            .unwrap_or_else(PoisonError::into_inner);
        *holds == 0
    }

    /// Waits until no hold is out (for an adapter whose group protocol runs in async code).
    ///
    /// ```
    /// use flechtwerk::kafka::RevocationGate;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let gate = RevocationGate::default();
    /// let hold = gate.hold();
    /// let revocation = tokio::spawn({
    ///     let gate = gate.clone();
    ///     async move { gate.released().await }
    /// });
    /// drop(hold);
    /// revocation.await.unwrap();
    /// # }
    /// ```
    pub async fn released(&self) {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a release between the two is not missed.
            notified.as_mut().enable();
            if !self.is_held() {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for RevocationHold {
    fn drop(&mut self) {
        let mut holds = self.inner.holds();
        *holds -= 1;
        if *holds == 0 {
            drop(holds);
            self.inner.released.notify_all();
            self.inner.notify.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_thread_is_released_by_the_last_hold() {
        let gate = RevocationGate::default();
        let (first, second) = (gate.hold(), gate.hold());
        let waiter = {
            let gate = gate.clone();
            std::thread::spawn(move || gate.wait_released(Duration::from_secs(10)))
        };
        drop(first);
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "one hold is still out");
        drop(second);
        assert!(waiter.join().unwrap());
        assert!(!gate.is_held());
    }

    #[tokio::test]
    async fn an_async_waiter_is_released_by_the_last_hold() {
        let gate = RevocationGate::default();
        let hold = gate.hold();
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.released().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(hold);
        tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("released").unwrap();
    }
}
