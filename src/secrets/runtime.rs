//! Where the attribute codecs find their keyring and report their events.
//!
//! Attributes are constants, so an encrypted codec cannot carry key material: it looks the
//! keyring up when it runs. Python keeps one process-global keyring and binds the stage's
//! observer in the asyncio context; here a *secret context* (a keyring, and where the events go)
//! is bound to the future an application runs, and carried into every task the engine spawns
//! for it, so a decrypt deep inside a stage's code reports to that application's observer. Code
//! outside a run (a tool, a test, a `main` that writes configs) uses [`install_keyring`] (one
//! keyring for the process) or [`with_keyring`] (one call, this thread).
//!
//! The lookup order of a codec: the keyring of the context it runs in, then the process's
//! installed keyring, else [`KeyringError::NotInstalled`].

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context as TaskContext, Poll};

use super::error::KeyringError;
use super::keyring::Keyring;

/// Where a codec's events go: the application wires its observer here.
pub(crate) trait SecretEvents: Send + Sync {
    /// A `flenc:` value decrypted (`secret_decrypted`).
    fn decrypted(&self, scope: &str, kid: &str);
    /// A plaintext value read where ciphertext was expected (`secret_plaintext_read`).
    fn plaintext_read(&self, scope: &str);
    /// A `flsig:` value verified (`secret_verified`).
    fn verified(&self, scope: &str, kid: &str);
    /// An unsigned value read where a signature was expected (`secret_unsigned_read`).
    fn unsigned_read(&self, scope: &str);
}

/// What a codec running in this context uses: a keyring (none: the process's), and a sink for
/// its events (none: they are dropped).
#[derive(Clone, Default)]
pub(crate) struct SecretContext {
    pub(crate) keyring: Option<Arc<Keyring>>,
    pub(crate) events: Option<Arc<dyn SecretEvents>>,
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<SecretContext>>> = const { RefCell::new(None) };
}

static INSTALLED: RwLock<Option<Arc<Keyring>>> = RwLock::new(None);

/// Installs the process's keyring, for code that runs outside an application (an application
/// takes its own through the builder's `keyring(...)`). Installing the same keyring again does
/// nothing; a different one is [`KeyringError::Conflict`] (SEC-04: one keyring per process,
/// so two parts of a program never encrypt under different keys by accident).
///
/// ```
/// use flechtwerk::secrets::{install_keyring, Keyring, KeyringError};
///
/// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
/// install_keyring(keyring.clone())?;
/// install_keyring(keyring)?; // the same material: nothing happens
/// let other = Keyring::builder().oct("k2", &[8; 32]).primary("k2").build()?;
/// assert!(matches!(install_keyring(other), Err(KeyringError::Conflict)));
/// # Ok::<(), KeyringError>(())
/// ```
pub fn install_keyring(keyring: Keyring) -> Result<(), KeyringError> {
    let mut installed = INSTALLED.write().unwrap_or_else(|p| p.into_inner());
    match &*installed {
        Some(current) if **current == keyring => Ok(()),
        Some(_) => Err(KeyringError::Conflict),
        None => {
            tracing::info!(keys = keyring.kids().count(), primary = keyring.primary(), "installed keyring");
            *installed = Some(Arc::new(keyring));
            Ok(())
        }
    }
}

/// Runs `f` with `keyring` as the keyring of every codec it calls on this thread (before the
/// process's installed one): for tests and tools that hold several keyrings, as Python's
/// `testing.installed_keyring` does. Events keep going where the enclosing context sends them.
///
/// ```
/// use flechtwerk::attribute::{encrypted, Attribute, STR};
/// use flechtwerk::secrets::{with_keyring, Keyring};
/// use flechtwerk::Config;
///
/// const API_KEY: Attribute<String> = Attribute::new("api_key", &encrypted(STR));
/// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
/// let config = with_keyring(&keyring, || Config::new().with(&API_KEY, "hunter2".to_owned()))?;
/// assert_eq!(with_keyring(&keyring, || config.require(&API_KEY))?, "hunter2");
/// assert!(config.require(&API_KEY).is_err()); // outside: no keyring (none installed here)
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn with_keyring<R>(keyring: &Keyring, f: impl FnOnce() -> R) -> R {
    let mut context = current().map(|c| (*c).clone()).unwrap_or_default();
    context.keyring = Some(Arc::new(keyring.clone()));
    enter(context, f)
}

/// Runs `f` with `context` bound on this thread.
pub(crate) fn enter<R>(context: SecretContext, f: impl FnOnce() -> R) -> R {
    let _guard = Enter::new(Some(Arc::new(context)));
    f()
}

/// The context bound on this thread now.
pub(crate) fn current() -> Option<Arc<SecretContext>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// The keyring a codec running here uses.
pub(crate) fn keyring() -> Result<Arc<Keyring>, KeyringError> {
    if let Some(keyring) = current().and_then(|c| c.keyring.clone()) {
        return Ok(keyring);
    }
    INSTALLED.read().unwrap_or_else(|p| p.into_inner()).clone().ok_or(KeyringError::NotInstalled)
}

/// Reports an event to the sink of the context bound here, if any.
pub(crate) fn report(event: impl FnOnce(&dyn SecretEvents)) {
    if let Some(events) = current().and_then(|c| c.events.clone()) {
        event(&*events);
    }
}

/// Binds a context on this thread until dropped, restoring the previous one.
struct Enter(Option<Arc<SecretContext>>);

impl Enter {
    fn new(context: Option<Arc<SecretContext>>) -> Self {
        Enter(CURRENT.with(|c| c.replace(context)))
    }
}

impl Drop for Enter {
    fn drop(&mut self) {
        let previous = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// A future that runs with `context` bound on whatever thread polls it (a Python context
/// variable's reach, for a future: each poll binds it, and restores the poller's own after).
pub(crate) struct Bound<F> {
    context: Option<Arc<SecretContext>>,
    inner: Pin<Box<F>>,
}

impl<F: Future> Future for Bound<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let _guard = Enter::new(self.context.clone());
        self.inner.as_mut().poll(cx)
    }
}

/// Runs `future` in `context`.
pub(crate) fn bind<F: Future>(context: Option<Arc<SecretContext>>, future: F) -> Bound<F> {
    Bound { context, inner: Box::pin(future) }
}

/// Runs `future` in the context bound where it is created: for the tasks the engine spawns, so
/// they inherit their application's context as Python's tasks inherit theirs.
pub(crate) fn carry<F: Future>(future: F) -> Bound<F> {
    bind(current(), future)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Sink(Mutex<Vec<String>>);

    impl SecretEvents for Sink {
        fn decrypted(&self, scope: &str, kid: &str) {
            self.0.lock().unwrap().push(format!("decrypted {scope} {kid}"));
        }
        fn plaintext_read(&self, scope: &str) {
            self.0.lock().unwrap().push(format!("plaintext {scope}"));
        }
        fn verified(&self, scope: &str, kid: &str) {
            self.0.lock().unwrap().push(format!("verified {scope} {kid}"));
        }
        fn unsigned_read(&self, scope: &str) {
            self.0.lock().unwrap().push(format!("unsigned {scope}"));
        }
    }

    #[test]
    fn sec_05_a_bound_future_reports_to_its_own_sink_on_any_poll() {
        let (a, b) = (Arc::new(Sink::default()), Arc::new(Sink::default()));
        let context = |sink: &Arc<Sink>| {
            Some(Arc::new(SecretContext { keyring: None, events: Some(sink.clone() as Arc<dyn SecretEvents>) }))
        };
        let run = |tag: &'static str| async move {
            report(|e| e.decrypted(tag, "k1"));
            // A task spawned here carries the context along.
            carry(async move { report(|e| e.plaintext_read(tag)) }).await;
        };
        futures::executor::block_on(async {
            bind(context(&a), run("a")).await;
            bind(context(&b), run("b")).await;
        });
        report(|e| e.decrypted("outside", "k1")); // no context bound: dropped
        assert_eq!(*a.0.lock().unwrap(), ["decrypted a k1", "plaintext a"]);
        assert_eq!(*b.0.lock().unwrap(), ["decrypted b k1", "plaintext b"]);
        assert!(current().is_none(), "the poller's own context is restored");
    }
}
