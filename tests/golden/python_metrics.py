"""Prometheus exposition of the Python reference (flechtwerk 0.17.0), for metric parity.

    eval "$(scripts/python-ref | grep '^PYTHON_REF=')"
    "$PYTHON_REF" tests/golden/python_metrics.py           # writes python_metrics_exposition.txt
    "$PYTHON_REF" tests/golden/python_metrics.py --check   # regenerates in memory and diffs

No broker: the framework's own `Metrics` and `PrometheusObserver` (what `Flechtwerk.of` wires
when `metrics_port > 0`) over a fresh `CollectorRegistry`, with `metrics_labels={"app": "demo"}`
and `max_poll_records=500`. Every observer hook is called at least once (the script fails if the
package grows a hook it does not call), and the text is prometheus_client's `generate_latest`:
the text format 0.0.4 that a plain `curl /metrics` gets. (A Prometheus server asks for
OpenMetrics first and gets prometheus_client's other encoder; see docs/reference/python-0.17.md.)

Determinism: two clocks are pinned, nothing else is touched. prometheus_client stamps each
counter and histogram child with `time.time()` at creation (the `*_created` series), and the
`*_scope()` hooks time their block with `timeit.default_timer`; both are replaced by fixed
values, so the durations below are exact and the file is byte-identical on every run.

Families appear in the order the hooks first touch them (the registry keeps registration order,
and `Metrics` builds each family lazily), which is the order of the calls below.
"""
import sys
from pathlib import Path

import prometheus_client.context_managers
import prometheus_client.metrics
from prometheus_client import CollectorRegistry, generate_latest

from flechtwerk.metrics import Metrics
from flechtwerk.observer import Observer, PrometheusObserver

CREATED = 1767225600.0  # 2026-01-01T00:00:00Z: every `*_created` sample
OUT = Path(__file__).with_name("python_metrics_exposition.txt")


class _FixedWallClock:
    """Stands in for the `time` module inside prometheus_client.metrics (only `.time()` is used)."""

    @staticmethod
    def time() -> float:
        return CREATED


class _ScopeClock:
    """`default_timer` for the scope hooks: a scope reads it on enter (0.0 here) and on exit (the
    next of `durations` here), so the duration it observes is exactly that value."""

    def __init__(self) -> None:
        self.entered = False
        self.durations: list[float] = []

    def __call__(self) -> float:
        self.entered = not self.entered
        return 0.0 if self.entered else self.durations.pop(0)


def hooks() -> set[str]:
    """Every hook of the observer surface: its public methods."""
    return {name for name in vars(Observer) if not name.startswith("_") and callable(getattr(Observer, name))}


class _Recording(PrometheusObserver):
    """The real observer, remembering which hooks were called."""

    called: set[str]

    def __getattribute__(self, name: str):
        if name in _HOOKS:
            object.__getattribute__(self, "called").add(name)
        return object.__getattribute__(self, name)


_HOOKS = hooks()


def exposition() -> bytes:
    prometheus_client.metrics.time = _FixedWallClock  # type: ignore[assignment]
    clock = _ScopeClock()
    prometheus_client.context_managers.default_timer = clock  # type: ignore[assignment]

    metrics = Metrics()
    metrics.max_poll_records = 500
    metrics.metrics_labels = {"app": "demo"}
    metrics.registry = CollectorRegistry()
    obs = _Recording()
    obs.called = set()
    obs.metrics = metrics
    obs.metrics_labels = {"app": "demo"}

    # Transformer: a task assigned and restored, two batches of records in and out, one commit per
    # task. Sizes straddle the byte ladder: 1 014 623 is the crash the ladder was built around
    # (97 % of the 1 MiB ceiling), 5 000 000 lands in +Inf only; the max gauges keep the peak.
    obs.tasks_assigned(2)
    obs.state_restored(0, 3)
    obs.state_restored(1, 0)
    for n in (120, 256, 257, 1_014_623):
        obs.message_in_bytes("in", n)
    obs.message_in_bytes("in", 100)  # below the running max: the gauge stays at 1014623
    obs.message_in_bytes("other-in", 5_000_000)
    for _ in range(4):
        obs.message_in("in")
    obs.message_in("other-in")
    obs.message_invalid("in", "raised")
    obs.message_invalid("in", "skipped")
    obs.message_invalid("in", "substituted")
    clock.durations += [0.004, 0.3, 12.0]
    for _ in range(3):
        with obs.dispatch_scope():
            obs.message_out("out")
    obs.message_out_bytes("out", 300)
    obs.message_out_bytes("out", 2_000_000)
    clock.durations += [0.02, 700.0]
    with obs.batch_scope(1):
        pass
    with obs.batch_scope(499):  # the cap - 1 bucket
        pass
    clock.durations += [0.05]
    with obs.batch_scope(500):  # exactly the cap
        pass
    for n in (50, 4096, 100):
        obs.state_record_bytes(n)
    obs.transaction_committed()
    obs.transaction_committed()

    # Config store (both stage shapes).
    obs.config_store_restored(7)
    obs.config_store_bytes(1234)
    obs.config_store_entries(7)
    obs.config_message_in("configs")
    obs.config_store_bytes(1400)
    obs.config_store_entries(8)

    # Extractor: tokens, active configs, poll cycles.
    obs.tokens_assigned(3)
    obs.active_configs(5)
    clock.durations += [0.6, 45.0]
    for _ in range(2):
        with obs.poll_cycle_scope():
            pass

    # Secrets and keyring.
    obs.keyring_key_loaded("k1")
    obs.keyring_key_loaded("k2")
    obs.secret_plaintext_read("")
    obs.secret_decrypted("tenant", "k1")
    obs.secret_unsigned_read("tenant")
    obs.secret_verified("tenant", "k2")

    # MQTT bridge: `topic` is the bare subscription filter, or "(unmatched)" for stale drops.
    obs.mqtt_connected()
    obs.mqtt_message_in("sensors/+/temp")
    obs.mqtt_message_in("sensors/+/temp")
    obs.mqtt_buffered("sensors/+/temp", 17)
    obs.mqtt_message_dropped("sensors/+/temp", "filtered")
    obs.mqtt_message_dropped("sensors/+/temp", "poison")
    obs.mqtt_message_dropped("sensors/+/temp", "unsubscribed")
    obs.mqtt_message_dropped("(unmatched)", "stale")
    obs.mqtt_disconnected()

    missing = _HOOKS - obs.called
    assert not missing, f"observer hooks never called: {sorted(missing)}"
    assert not clock.durations, "every planned scope duration is used"
    return generate_latest(metrics.registry)


def main() -> int:
    text = exposition()
    if sys.argv[1:] == ["--check"]:
        if OUT.read_bytes() != text:
            print(f"{OUT} differs from what flechtwerk produces now", file=sys.stderr)
            return 1
        print(f"{OUT.name}: up to date")
        return 0
    if sys.argv[1:]:
        print("usage: python_metrics.py [--check]", file=sys.stderr)
        return 2
    OUT.write_bytes(text)
    print(f"wrote {OUT} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
