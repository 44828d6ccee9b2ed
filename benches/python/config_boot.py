"""One config bootstrap of the Python reference (flechtwerk 0.17.0) against a real broker: the
Python side of benches/config_boot.rs, which runs this once per measurement.

    eval "$(scripts/python-ref | grep '^PYTHON_REF=')"
    "$PYTHON_REF" benches/python/config_boot.py --bootstrap 127.0.0.1:9092 \\
        --config-topic flechtwerk-config-boot-v1-100000 --input-topic flechtwerk-config-boot-input \\
        --app config-boot-python-100000

What runs is the framework's own startup, nothing bench-specific in it: `Flechtwerk.of(...)`
with a transformer declaring the config topic, then `run()`, which opens the clients, checks the
topics, and has `TransformerRunner.run` call `bootstrap_config_store` (read every config
partition to the end offsets captured at entry, compact by wire key, decode, deep-copy, enrich
and re-encode each survivor into the `ConfigStore`) before it subscribes and enters the stage.
The stage's `__aenter__`, the first stage code after the bootstrap, takes the figures and ends
the process at once (`os._exit`: the group join that follows is not part of a boot's cost).

Printed: `RESULT <wall s> <cpu s> <peak bytes> <base bytes> <entries>`: wall seconds and
CPU seconds (getrusage, user + system, this process only) since `run()` was called, the peak
resident set (`VmHWM`) of the process, its resident set when `run()` was called, and the
entries in the store.
"""
import argparse
import asyncio
import os
import resource
import sys
import time
from collections.abc import AsyncIterator

import uvloop

from flechtwerk import Flechtwerk, IncomingMessage, Message, State, Transformer


def status_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def rss_bytes() -> int:
    return status_bytes("VmRSS:")


def peak_rss() -> int:
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over the exec from the (forked) bench
    # process, so a small child would report its parent's size.
    return status_bytes("VmHWM:")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Booted(Transformer):
    """A transformer with one config topic; its enter hook reports the boot."""

    def __init__(self, input_topic: str, config_topic: str) -> None:
        self.input_topics = [input_topic]
        self.config_topics = [config_topic]
        self.started = 0.0
        self.cpu_started = 0.0
        self.base = 0

    async def __aenter__(self) -> "Booted":
        wall = time.perf_counter() - self.started
        cpu = cpu_seconds() - self.cpu_started
        peak = peak_rss()
        print(f"RESULT {wall:.3f} {cpu:.3f} {peak} {self.base} {len(self.configs)}", flush=True)
        os._exit(0)

    async def transform(self, msg: IncomingMessage, state: State) -> AsyncIterator[Message | State]:
        yield state  # never called: the process ends in __aenter__


async def boot(args: argparse.Namespace) -> None:
    stage = Booted(args.input_topic, args.config_topic)
    app = Flechtwerk.of(
        application_id=args.app,
        bootstrap_servers=args.bootstrap,
        client_id="boot-0",
        stage=stage,
    )
    stage.base = rss_bytes()
    stage.cpu_started = cpu_seconds()
    stage.started = time.perf_counter()
    await app.run()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--config-topic", required=True)
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--app", required=True)
    args = parser.parse_args()
    # uvloop: what the package's README recommends for throughput (as benches/python/counter_app.py).
    uvloop.run(boot(args))
    return 1  # run() never returns; the enter hook ends the process


if __name__ == "__main__":
    sys.exit(main())
