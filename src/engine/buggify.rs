//! Fault points inside the engine (FoundationDB's `buggify`): in simulation builds with
//! buggify enabled, each point sometimes stalls the engine for a while, which makes rare
//! interleavings common — a rebalance striking between a fetch and its processing, a zombie
//! waking up between its sends and its commit, another owner fencing a task between its fence
//! and its restore. In production builds every point compiles to nothing.

/// Probability that an enabled point stalls.
#[cfg(madsim)]
const STALL_PROBABILITY: f64 = 0.05;

/// Longest stall, in milliseconds (kept below the simulations' session timeout, so a stall
/// alone does not evict the member; pauses do that).
#[cfg(madsim)]
const STALL_MAX_MS: u64 = 3_000;

/// A named fault point: may stall in simulation, never in production.
#[cfg(madsim)]
pub(crate) async fn point(name: &'static str) {
    use madsim::rand::Rng;
    if madsim::buggify::buggify_with_prob(STALL_PROBABILITY) {
        let ms = madsim::rand::thread_rng().gen_range(1..STALL_MAX_MS);
        tracing::debug!(point = name, ms, "buggify: stall");
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

/// A named fault point: may stall in simulation, never in production.
#[cfg(not(madsim))]
#[inline(always)]
pub(crate) async fn point(_name: &'static str) {}
