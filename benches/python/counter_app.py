"""The counting transformer on the Python reference (flechtwerk 0.17.0): the Python side of the
side-by-side benchmarks and of the live-migration tests (a Python fleet handing over to Rust).

    eval "$(scripts/python-ref | grep '^PYTHON_REF=')"
    "$PYTHON_REF" benches/python/counter_app.py --bootstrap 127.0.0.1:9092 \
        --input counter-input --output counter-output --app counter --client pod-0 \
        [--metrics-port 9464 [--metrics-label app=counter ...]] [--max-poll-records 500] \
        [--compression zstd|none] [--loop uvloop|asyncio] [--announce-run]
    "$PYTHON_REF" benches/python/counter_app.py --check   # no broker: build the handle, run transform once

Per input record: the state of its key (state key = the Kafka key) gets `seen` += 1 (INT, from 0
when absent), and one output goes to `--output` under the same key, whose value is the input Event
with `seen` added (a tombstone input counts, and its output carries only `seen`). Output, state
change and input offset commit in one Kafka transaction per task and batch: the framework's
exactly-once path, nothing bench-specific in it.

Runs until SIGTERM or SIGINT. Flechtwerk 0.17.0 installs no signal handler of its own, and
`Flechtwerk.run()` returns only by cancellation (or crashes): on SIGTERM this script cancels the
task running it, and the cancellation unwinds through the runner (every task's producer stopped,
its state store closed) and the handle's `__aexit__` (consumers stopped, metrics server released)
before the process exits with status 0. Without the handler, SIGTERM would kill the interpreter
with no cleanup at all.

Metrics labels: `--metrics-label KEY=VALUE` (repeatable), default `app=<application id>`. Never
empty when metrics are on: 0.17.0 crashes with metrics_port > 0 and no metrics_labels (every
family without a label of its own, e.g. `flechtwerk_tasks_assigned`, then has no label names at
all, and prometheus_client's `.labels()` raises "No label names were set" at the first hook).

Topics are not created here: the input topic must exist (the framework refuses to start without
it), the output topic must exist or be auto-created by the broker, and the changelog
`<app>-changelog` is created by the framework with the input's partition count.
"""
import argparse
import asyncio
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator

from flechtwerk import Event, Flechtwerk, IncomingMessage, Message, State, Transformer
from flechtwerk.attribute import INT, Attribute

SEEN = Attribute("seen", INT)
"""The per-key count: in the state, and added to every output value."""


def counter(output_topic: str, input_topic: str) -> Transformer:
    async def transform(msg: IncomingMessage, state: State) -> AsyncIterator[Message | State]:
        seen = state.get(SEEN, 0) + 1
        # `msg` and `state` are read-only: build new records, never mutate them.
        value = Event({**msg.value, SEEN: seen}) if msg.value is not None else Event({SEEN: seen})
        yield Message(key=msg.key, topic=output_topic, value=value)
        new_state = State(state)
        new_state[SEEN] = seen
        yield new_state

    return Transformer.of(input_topics=[input_topic], transform=transform)


def metrics_labels(args: argparse.Namespace) -> dict[str, str]:
    pairs = args.metrics_label or [f"app={args.app}"]
    labels = dict(pair.split("=", 1) for pair in pairs)
    assert labels and all(labels), f"metrics labels need KEY=VALUE with a non-empty key: {pairs}"
    return labels


def handle(args: argparse.Namespace) -> Flechtwerk:
    return Flechtwerk.of(
        application_id=args.app,
        bootstrap_servers=args.bootstrap,
        client_id=args.client,
        compression_type=None if args.compression == "none" else args.compression,
        max_poll_records=args.max_poll_records,
        metrics_labels=metrics_labels(args),
        metrics_port=args.metrics_port,
        stage=counter(args.output, args.input),
    )


async def serve(args: argparse.Namespace) -> None:
    app = handle(args)
    task = asyncio.current_task()
    assert task is not None
    stop = asyncio.Event()

    def on_signal() -> None:
        stop.set()
        task.cancel()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    if args.announce_run:
        # The side-by-side bench measures run() -> first committed output from this instant.
        print(f"RUN {time.time_ns()}", flush=True)
    try:
        await app.run()
    except asyncio.CancelledError:
        if not stop.is_set():
            raise  # cancelled by something other than our signal
        logging.getLogger("counter_app").info("stopped by signal; clean shutdown done")


async def check(args: argparse.Namespace) -> None:
    """Without a broker: the handle builds, and the transform does what the docstring says."""
    app = handle(args)
    assert isinstance(app, Flechtwerk)
    stage = counter(args.output, args.input)
    msg = IncomingMessage(key="k", offset=0, partition=0, timestamp=None, topic=args.input,
                          value=Event.wrap({"x": 1}))
    out = [item async for item in stage.transform(msg, State.wrap({"seen": 41}))]
    assert out == [Message(key="k", topic=args.output, value=Event.wrap({"x": 1, "seen": 42})),
                   State.wrap({"seen": 42})], out
    first = [item async for item in stage.transform(msg, State())]
    assert first[1] == State.wrap({"seen": 1}), first
    tomb = IncomingMessage(key="k", offset=1, partition=0, timestamp=None, topic=args.input, value=None)
    out = [item async for item in stage.transform(tomb, State())]
    assert out[0] == Message(key="k", topic=args.output, value=Event.wrap({"seen": 1})), out
    print(f"ok: {type(app).__name__} built without a broker; transform {out[0]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="Kafka bootstrap servers")
    parser.add_argument("--input", default="counter-input", help="input topic (must exist)")
    parser.add_argument("--output", default="counter-output", help="output topic")
    parser.add_argument("--app", default="counter", help="application_id (group, changelog prefix)")
    parser.add_argument("--client", default="pod-0", help="client_id (unique per instance)")
    parser.add_argument("--metrics-port", type=int, default=0, help="Prometheus port on 0.0.0.0; 0 = off")
    parser.add_argument("--metrics-label", action="append", metavar="KEY=VALUE",
                        help="label on every metric (repeatable; default app=<--app>)")
    parser.add_argument("--max-poll-records", type=int, default=500, help="records per getmany() at most")
    parser.add_argument("--compression", default="zstd", choices=["zstd", "gzip", "snappy", "lz4", "none"],
                        help="producer compression (the framework's default: zstd)")
    parser.add_argument("--loop", default="uvloop", choices=["uvloop", "asyncio"],
                        help="event loop (uvloop: what the package recommends for throughput)")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--announce-run", action="store_true",
                        help="print `RUN <unix ns>` on stdout just before run() (the side-by-side bench)")
    parser.add_argument("--check", action="store_true", help="no broker: build the handle, run transform once")
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    coroutine = check(args) if args.check else serve(args)
    if args.loop == "uvloop":
        import uvloop
        uvloop.run(coroutine)
    else:
        asyncio.run(coroutine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
