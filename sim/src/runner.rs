//! Runs one scenario on one seed, on a fresh madsim runtime in a fresh OS thread (std's
//! per-thread hash seeds and thread-local RNGs must not carry over between seeds).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::runtime::Runtime;

use crate::report::SeedReport;
use crate::trace::Trace;

/// Upper bound of simulated time for one run: a run still going after this is a liveness
/// violation (something waits forever).
pub const SIMULATED_TIME_MAX: Duration = Duration::from_secs(3_600);

/// A scenario: a name, a one-line description, the fault kinds it injects, and the simulation
/// itself.
pub struct Scenario {
    /// CLI name.
    pub name: &'static str,
    /// What it exercises and checks.
    pub about: &'static str,
    /// The kinds of fault it injects, named as the report counts them (`faults injected:
    /// kind=n`), plus those it injects without counting them (`buggify`: the engine's fault
    /// points; the extractor source's `source-error` and `slow-page`). `--list` prints them; a
    /// run that counts a kind missing here fails, so the list stays true.
    pub faults: &'static [&'static str],
    /// Builds the run's future (the supervisor), given its context.
    pub run: fn(Ctx) -> Pin<Box<dyn Future<Output = ()>>>,
}

/// What a running scenario records into: trace, fault counts, violations.
#[derive(Clone, Default)]
pub struct Ctx {
    /// The event trace.
    pub trace: Trace,
    /// Brokers of the seed's simulated Kafka cluster (0 and 1 both mean one).
    pub brokers: u32,
    /// The cluster's `transaction.version` (0 and 1 both mean 1; 2 is KIP-890's epoch bump
    /// per transaction).
    pub transaction_version: u8,
    faults: Arc<Mutex<BTreeMap<String, u64>>>,
    violations: Arc<Mutex<Vec<String>>>,
}

impl Ctx {
    /// Simulated time since the run started.
    pub fn now(&self) -> Duration {
        madsim::time::TimeHandle::current().elapsed()
    }

    /// Records an event.
    pub fn event(&self, what: impl Into<String>) {
        self.trace.record_at(self.now(), what);
    }

    /// Records an injected fault of `kind`.
    pub fn fault(&self, kind: &str, what: impl Into<String>) {
        *self.faults.lock().expect("faults lock").entry(kind.to_owned()).or_default() += 1;
        self.event(format!("FAULT {kind}: {}", what.into()));
    }

    /// Records a violated property.
    pub fn violation(&self, what: impl Into<String>) {
        let what = what.into();
        self.event(format!("VIOLATION {what}"));
        self.violations.lock().expect("violations lock").push(what);
    }
}

/// How many brokers the seeds' clusters have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Brokers {
    /// Three brokers, except every fourth seed (`seed % 4 == 0`), which runs on one: most seeds
    /// meet leaders, coordinators and failover on different brokers, and the single node stays
    /// covered. Decided by the seed number alone (no draw), so a seed's schedule stays the same.
    Mixed,
    /// Every seed on this many brokers.
    Fixed(u32),
}

impl Brokers {
    /// The brokers of `seed`'s cluster.
    ///
    /// ```
    /// use flechtwerk_sim::runner::Brokers;
    /// assert_eq!((0..8).map(|s| Brokers::Mixed.for_seed(s)).collect::<Vec<_>>(), [1, 3, 3, 3, 1, 3, 3, 3]);
    /// assert_eq!(Brokers::Fixed(1).for_seed(7), 1);
    /// ```
    pub fn for_seed(self, seed: u64) -> u32 {
        match self {
            Brokers::Mixed if seed % 4 == 0 => 1,
            Brokers::Mixed => 3,
            Brokers::Fixed(n) => n.max(1),
        }
    }
}

/// Which `transaction.version` the seeds' clusters run (production clusters run both: 1 where
/// brokers or clients predate KIP-890, 2 on clusters formatted by Kafka 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionVersions {
    /// Half the seeds each, decided by the seed number alone (no draw): seeds alternate, and
    /// the single-broker seeds of [`Brokers::Mixed`] (every fourth) alternate too.
    Mixed,
    /// Every seed on this version (1 or 2).
    Fixed(u8),
}

impl TransactionVersions {
    /// The `transaction.version` of `seed`'s cluster.
    ///
    /// ```
    /// use flechtwerk_sim::runner::TransactionVersions;
    /// let mixed: Vec<u8> = (0..8).map(|s| TransactionVersions::Mixed.for_seed(s)).collect();
    /// assert_eq!(mixed, [1, 2, 1, 2, 2, 1, 2, 1]);
    /// assert_eq!(TransactionVersions::Fixed(2).for_seed(0), 2);
    /// ```
    pub fn for_seed(self, seed: u64) -> u8 {
        match self {
            TransactionVersions::Mixed if (seed + seed / 4) % 2 == 1 => 2,
            TransactionVersions::Mixed => 1,
            TransactionVersions::Fixed(version) => version.clamp(1, 2),
        }
    }
}

/// The seeds' simulated clusters: how many brokers, which transaction version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Brokers per seed.
    pub brokers: Brokers,
    /// `transaction.version` per seed.
    pub transaction_versions: TransactionVersions,
}

impl Default for Topology {
    /// Both mixed: what `scripts/sim` runs unless told otherwise.
    fn default() -> Self {
        Topology { brokers: Brokers::Mixed, transaction_versions: TransactionVersions::Mixed }
    }
}

/// Runs `scenario` with `seed` on the default [`Topology`] and reports what happened (see
/// [`run_seed_on`]).
pub fn run_seed(scenario: &'static Scenario, seed: u64, keep_trace: bool) -> SeedReport {
    run_seed_on(scenario, seed, keep_trace, Topology::default())
}

/// Runs `scenario` with `seed` on a cluster of `topology` and reports what happened. A panic
/// anywhere in the simulation (an engine assertion, a scenario check) is a violation of the
/// seed, not a crash of the CLI. The rendered trace is kept when `keep_trace` is set or the seed
/// failed.
pub fn run_seed_on(scenario: &'static Scenario, seed: u64, keep_trace: bool, topology: Topology) -> SeedReport {
    let ctx = Ctx {
        brokers: topology.brokers.for_seed(seed),
        transaction_version: topology.transaction_versions.for_seed(seed),
        ..Ctx::default()
    };
    let run_ctx = ctx.clone();
    let outcome = std::thread::Builder::new()
        .name(format!("seed-{seed}"))
        .spawn(move || {
            let mut runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
            runtime.set_time_limit(SIMULATED_TIME_MAX);
            let clock = run_ctx.clone();
            runtime.block_on(async move {
                (scenario.run)(clock.clone()).await;
                clock.now()
            })
        })
        .expect("spawn a seed thread")
        .join();
    let simulated = match outcome {
        Ok(simulated) => simulated,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "non-string panic".to_owned());
            ctx.violations.lock().expect("violations lock").push(format!("panicked: {message}"));
            ctx.trace.events().last().map(|e| e.at).unwrap_or_default()
        }
    };
    let violations = ctx.violations.lock().expect("violations lock").clone();
    let faults = ctx.faults.lock().expect("faults lock").clone();
    SeedReport {
        seed,
        trace_hash: ctx.trace.hash(),
        simulated,
        faults,
        trace: if keep_trace || !violations.is_empty() { ctx.trace.render() } else { String::new() },
        events: if keep_trace || !violations.is_empty() { ctx.trace.events() } else { Vec::new() },
        violations,
    }
}
