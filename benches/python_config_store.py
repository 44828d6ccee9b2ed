"""Config store size and speed of the Python reference (flechtwerk 0.17.0), comparable to
benches/config_store.rs.

    eval "$(scripts/python-ref | grep '^PYTHON_REF=')"       # the reference venv, installed once
    "$PYTHON_REF" benches/python_config_store.py            # 100k and 1M
    "$PYTHON_REF" benches/python_config_store.py 250000     # other sizes
    "$PYTHON_REF" benches/python_config_store.py --dump 1000 [pretty]

What is measured: the framework's real bootstrap path, `flechtwerk.configs.bootstrap_config_store`
(read_to_end -> collect/compact by wire key -> apply_config_record per survivor: strict decode,
deepcopy, enrich_config, encode_json into `ConfigStore`), called exactly as the transformer runner
calls it: the default `Stage.enrich_config` and `on_invalid_message` of a `Transformer.of(...)`
stage, the latter wrapped in `counting_on_invalid` with a no-op `Observer()`. Records are real
`aiokafka.ConsumerRecord`s built by `flechtwerk.testing.make_record`.

The log is the Rust bench's, byte for byte (same SplitMix64 generator, keys, values, partitions,
offsets, timestamps and order; `--dump` prints it in the format of a verbatim Rust copy of the
generator, for a checksum comparison): `entries` live keys, 20% rewrites, 2% delete + re-add.

Consumer: NOT `flechtwerk.testing.FakeKafkaConsumer`. That double needs the whole log materialized
in its `records` list, and its `end_offsets` scans the full backlog once per partition while
`getmany` regroups and rebuilds it — O(partitions x records) work charged to the bootstrap, and an
input list (~1.5x the store) that would swamp the memory figures. `StreamingConsumer` below
implements only the calls `read_to_end` / `topic_partitions` make (`_client.set_topics`,
`partitions_for_topic`, `assign`, `seek_to_beginning`, `end_offsets`, `getmany`, `position`) and
serves batches of `BATCH` records, grouped by partition like aiokafka's `getmany`. End offsets are
the log length on every partition (offsets are global, so each partition's log has gaps, as a
compacted topic does); the position jumps there once the log is exhausted.

Columns (same meaning as the Rust bench where one exists):
- wire MiB: key + value bytes of the surviving record per key (the compacted topic's size);
  cross-checked against `ConfigStore.nbytes` (equal: the values are already canonical JSON).
- rss MiB: VmRSS after minus before the bootstrap, in a fresh child process, records generated
  lazily and streamed through the consumer, so nothing but the store (plus whatever freed memory
  the allocator keeps, which is part of what the process carries) is resident. The dict the call
  returns (surviving IncomingMessages) is dropped first, as the transformer runner drops it.
  Expect rss ~= peak: the store's key/value objects are allocated interleaved with the bootstrap's
  temporaries (ConsumerRecords held for compaction, decoded Events, deep copies, IncomingMessages)
  in the same pymalloc arenas, and pymalloc returns an arena to the OS only when it is entirely
  empty — so after the temporaries die almost no arena is (sys._debugmallocstats: "arenas
  reclaimed = 0"). The freed space is reusable by the process, but stays resident.
- peak MiB: VmHWM above the same baseline, after `echo 5 > /proc/self/clear_refs` at the baseline.
- apply s: CPU seconds (getrusage user+sys) of the bootstrap call, canonical values, in a fresh
  child with every record (already grouped in batches) in memory beforehand. The input is
  `gc.freeze()`d so the cyclic GC does not rescan 1.2M input records a streaming consumer would
  never hold; the GC otherwise runs normally. Python always decodes and re-encodes every
  survivor, so this is the counterpart of both the Rust `apply s` and `decode s`.
- pretty s: the same with pretty-printed values (`", "` and `": "`), which the store re-encodes.
- heap MiB (no Rust column; the counterpart of the Rust child's unprinted `memory_bytes()`): the
  live objects the finished store holds, sys.getsizeof of its dict plus every key str and value
  bytes — what the store would cost without the allocator's retained arenas.
- dict s: not the framework — a plain `dict[str, bytes]` taking the last write per key (decoded
  str key, tombstone = None/b""/b"{}"), the Rust `HashMap s` baseline in Python. No value copy:
  Python bytes are immutable and shared.
Every figure comes from its own child process; run one size at a time on an otherwise idle core.
"""
import asyncio
import gc
import resource
import subprocess
import sys
from collections.abc import Iterator
from itertools import islice

from aiokafka import ConsumerRecord, TopicPartition

from flechtwerk.configs import ConfigStore, bootstrap_config_store
from flechtwerk.kafka import is_tombstone
from flechtwerk.observer import Observer
from flechtwerk.stage import counting_on_invalid
from flechtwerk.testing import make_record
from flechtwerk.transformer import Transformer

TOPIC = "configs"
PARTITIONS = 6
BATCH = 1000
M64 = (1 << 64) - 1


class Rng:
    """SplitMix64, as in config_store.rs: the same log on every run."""

    __slots__ = ("state",)

    def __init__(self, seed: int) -> None:
        self.state = seed

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)


def key(n: int) -> str:
    return f"tenant-{n:013d}"


def value(rng: Rng, n: int, pretty: bool) -> bytes:
    r = rng.next()
    rot = ((r << 17) | (r >> 47)) & M64
    canonical = (
        f'{{"api_key":"{r:016x}{rot:016x}","enabled":true,"endpoint":"https://api.example.com/v1/t/{n}",'
        f'"interval_s":{30 + r % 90},"labels":["edge","eu-{r % 7}"],"owner":"team-{r % 1000}","retries":3}}'
    )
    if pretty:
        canonical = canonical.replace(',"', ', "').replace('":', '": ')
    return canonical.encode()


def log_entries(entries: int, pretty: bool) -> Iterator[tuple[int, int, bytes | None]]:
    """(offset, n, value) in log order: every key once, 20% rewritten, 2% deleted and re-added."""
    rng = Rng(0x5EED)
    updates = entries // 5
    deletes = entries // 50
    total = entries + updates + 2 * deletes
    for offset in range(total):
        if offset < entries:
            n, tombstone = offset, False
        elif offset < entries + updates:
            n, tombstone = rng.next() % entries, False
        elif offset < entries + updates + deletes:
            n, tombstone = offset - entries - updates, True
        else:
            n, tombstone = offset - entries - updates - deletes, False
        yield offset, n, None if tombstone else value(rng, n, pretty)


def log_length(entries: int) -> int:
    return entries + entries // 5 + 2 * (entries // 50)


def log(entries: int, pretty: bool) -> Iterator[ConsumerRecord]:
    for offset, n, raw in log_entries(entries, pretty):
        yield make_record(key=key(n).encode(), value=raw, topic=TOPIC, partition=n % PARTITIONS,
                          offset=offset, timestamp=1_700_000_000_000 + offset)


TPS = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]


def batches(records: Iterator[ConsumerRecord]) -> Iterator[dict[TopicPartition, list[ConsumerRecord]]]:
    """`BATCH` consecutive records per poll, grouped by partition as aiokafka's getmany does."""
    while chunk := list(islice(records, BATCH)):
        groups: dict[TopicPartition, list[ConsumerRecord]] = {}
        for record in chunk:
            groups.setdefault(TPS[record.partition], []).append(record)
        yield groups


class _Client:
    async def set_topics(self, topics: list[str]) -> None:
        pass


class StreamingConsumer:
    """The subset of AIOKafkaConsumer that `read_to_end` and `topic_partitions` call."""

    def __init__(self, polls: Iterator[dict[TopicPartition, list[ConsumerRecord]]], end: int) -> None:
        self._client = _Client()
        self._polls = polls
        self._end = end
        self._positions: dict[TopicPartition, int] = {}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(PARTITIONS)) if topic == TOPIC else set()

    def assign(self, tps: list[TopicPartition]) -> None:
        pass

    async def seek_to_beginning(self, *tps: TopicPartition) -> None:
        pass

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._end for tp in tps}

    async def getmany(self, *tps: TopicPartition, timeout_ms: int = 0) -> dict:
        poll = next(self._polls, None)
        if poll is None:  # log exhausted: every partition is at its end (gaps, as after compaction)
            for tp in TPS:
                self._positions[tp] = self._end
            return {}
        for tp, msgs in poll.items():
            self._positions[tp] = msgs[-1].offset + 1
        return poll

    async def position(self, tp: TopicPartition) -> int:
        return self._positions.get(tp, 0)


async def _transform(msg, state):  # never called: the stage exists for its default hooks
    yield state

STAGE = Transformer.of(input_topics=["input"], transform=_transform)
ON_INVALID = counting_on_invalid(STAGE.on_invalid_message, Observer())


def bootstrap(loop: asyncio.AbstractEventLoop, consumer: StreamingConsumer) -> ConfigStore:
    """The runner's call: `bootstrap_config_store` with the stage's default hooks."""
    store = ConfigStore()
    loop.run_until_complete(
        bootstrap_config_store(consumer, [TOPIC], store, STAGE.enrich_config, ON_INVALID))
    return store  # the returned {key: IncomingMessage} is dropped, as the transformer runner does


def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure_memory(entries: int) -> None:
    """Child: bootstrap from a lazily generated, streamed log; print rss, peak (KiB), nbytes, heap."""
    loop = asyncio.new_event_loop()
    bootstrap(loop, StreamingConsumer(batches(log(100, False)), log_length(100)))  # warm lazy imports/caches
    consumer = StreamingConsumer(batches(log(entries, False)), log_length(entries))
    gc.collect()
    baseline = status_kib("VmRSS:")
    with open("/proc/self/clear_refs", "w") as f:  # reset VmHWM to the current RSS
        f.write("5")
    store = bootstrap(loop, consumer)
    gc.collect()
    peak = status_kib("VmHWM:")
    rss = status_kib("VmRSS:")
    assert len(store) == entries
    raw = store._raw  # read-only peek at the store's one container, for the heap figure
    heap = sys.getsizeof(raw) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in raw.items())
    print(rss - baseline, peak - baseline, store.nbytes, heap)


def measure_apply(entries: int, mode: str) -> None:
    """Child: CPU seconds of one bootstrap (or the dict baseline) over records already in memory."""
    polls = list(batches(log(entries, mode == "pretty")))
    loop = asyncio.new_event_loop()
    bootstrap(loop, StreamingConsumer(batches(log(100, False)), log_length(100)))  # warm-up
    gc.collect()
    gc.freeze()  # the input is the consumer's, not the store's: keep it out of GC scans
    if mode == "dict":
        started = cpu_seconds()
        table: dict[str, bytes] = {}
        for poll in polls:
            for msgs in poll.values():
                for record in msgs:
                    k = record.key.decode("utf-8")
                    if is_tombstone(record.value):
                        table.pop(k, None)
                    else:
                        table[k] = record.value
        cpu = cpu_seconds() - started
        assert len(table) == entries
    else:
        started = cpu_seconds()
        store = bootstrap(loop, StreamingConsumer(iter(polls), log_length(entries)))
        cpu = cpu_seconds() - started
        assert len(store) == entries
    print(f"{cpu:.6f}")


def wire_bytes(entries: int) -> int:
    latest = [0] * entries
    for _, n, raw in log_entries(entries, False):
        latest[n] = 0 if raw is None else len(key(n)) + len(raw)
    return sum(latest)


def child(*args: str) -> list[float]:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{out.stderr}")
    return [float(v) for v in out.stdout.split()]


def mib(n: float) -> float:
    return n / (1024 * 1024)


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--memory-child"]:
        return measure_memory(int(args[1]))
    if args[:1] == ["--apply-child"]:
        return measure_apply(int(args[1]), args[2])
    if args[:1] == ["--dump"]:  # the log as text, to checksum against a verbatim Rust copy of the generator
        out = sys.stdout.buffer
        for offset, n, raw in log_entries(int(args[1]), len(args) > 2):
            out.write(b"%s\t%s\t%d\t%d\t%d\n" % (key(n).encode(), b"NULL" if raw is None else raw,
                                                  n % PARTITIONS, offset, 1_700_000_000_000 + offset))
        return None
    sizes = [int(a) for a in args] or [100_000, 1_000_000]
    print(f"python flechtwerk config store (CPython {sys.version.split()[0]}): 20-char keys, ~180-byte values;"
          " log = entries + 20% rewrites + 2% delete/re-add")
    print(f"{'entries':>9} {'wire MiB':>10} {'rss MiB':>10} {'x wire':>6} {'peak MiB':>10} {'x wire':>6}"
          f" {'apply s':>9} {'pretty s':>9} {'dict s':>9} {'heap MiB':>9}", flush=True)
    for entries in sizes:
        rss, peak, nbytes, heap = child("--memory-child", str(entries))
        wire = wire_bytes(entries)
        assert nbytes == wire, f"store nbytes {nbytes} != wire {wire}"
        apply = child("--apply-child", str(entries), "canonical")[0]
        pretty = child("--apply-child", str(entries), "pretty")[0]
        baseline = child("--apply-child", str(entries), "dict")[0]
        rss, peak = rss * 1024, peak * 1024
        print(f"{entries:>9} {mib(wire):>10.1f} {mib(rss):>10.1f} {rss / wire:>6.2f} {mib(peak):>10.1f}"
              f" {peak / wire:>6.2f} {apply:>9.3f} {pretty:>9.3f} {baseline:>9.3f} {mib(heap):>9.1f}", flush=True)


if __name__ == "__main__":
    main()
